"""Public test helpers that start real servers (not mocks) for tests and for local use.

``arroyo.testing.kafka``: a single-node Apache Kafka broker (KRaft) from its Maven jars.
``arroyo.testing.schema_registry``: Apicurio Registry, through its Confluent-compatible API.
``arroyo.testing.postgres``: a throwaway PostgreSQL cluster from the installed binaries.

What they share: ``arroyo.testing.ports`` hands out their free ports (one registry for every
process of the machine's user), ``arroyo.testing.processes`` stops their processes and reads
their logs, ``arroyo.testing.certificates`` makes the CA and certificates of their TLS
listeners.
"""
