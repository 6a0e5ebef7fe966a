"""Public test helpers that start real servers (not mocks) for tests and for local use.

``arroyo.testing.kafka``: a single-node Apache Kafka broker (KRaft) from its Maven jars.
"""
