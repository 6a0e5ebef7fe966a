"""The Confluent Cloud connector's options, named as Arroyo names them (``bootstrap_servers``,
``key``, ``secret``, ``schema_registry.*``), and how they map onto the Kafka connector's.

``ConfluentConnection`` is what a connection profile holds: a cluster's address and an API key,
which logs in over SASL_SSL with mechanism PLAIN (the key is the user, the secret its password),
as every Confluent Cloud cluster takes it. ``ConfluentOptions`` is a table's whole option set:
that connection plus a Kafka table's own options (``KafkaTableOptions``). Both map onto the
Kafka connector's models (``kafka_connection``, ``kafka_options``), whose code then does the work.

Two options are ours, not Arroyo's: ``client_configs`` on the connection (Arroyo takes it on the
table only; so does a table here, and a profile may hold it too, as a ``kafka`` profile may), and
``ssl.ca_file``, a CA certificate file to trust instead of the system's (Confluent Cloud's
certificates come from public CAs; a private CA is for clusters that are not Confluent Cloud,
or for tests).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field, model_validator

from arroyo.connectors.base import SECRET, ConnectorOptions
from arroyo.connectors.kafka.options import (
    ClientConfigs,
    KafkaConnection,
    KafkaOptions,
    KafkaTableOptions,
)

# How Confluent Cloud authenticates clients: an API key over SASL PLAIN, inside TLS.
SECURITY_PROTOCOL = "SASL_SSL"
SASL_MECHANISM = "PLAIN"
# host:port, comma-separated (Arroyo's pattern for bootstrap servers).
_SERVERS = r"^(([\w.\-]+:\d+),)*([\w.\-]+:\d+)$"


class ConfluentConnection(ConnectorOptions):
    """A Confluent Cloud cluster and the API key to log in with (a connection profile)."""

    bootstrap_servers: str = Field(
        description="the cluster's bootstrap server, host:port "
        "(comma-separated for several), e.g. pkc-12345.us-east-1.aws.confluent.cloud:9092",
        pattern=_SERVERS,
    )
    key: str = Field(description="the cluster's API key (the SASL PLAIN user)", min_length=1)
    secret: str = Field(
        description="the API key's secret (the SASL PLAIN password)",
        min_length=1,
        json_schema_extra=SECRET,
    )
    client_configs: ClientConfigs = None
    ssl_ca_file: str | None = Field(
        None,
        alias="ssl.ca_file",
        description="PEM file of the CA certificates to trust instead of the system's (not "
        "Arroyo's: librdkafka's ssl.ca.location and the Java client's PEM truststore)",
        min_length=1,
    )
    schema_registry_endpoint: str | None = Field(
        None,
        alias="schema_registry.endpoint",
        description="URL of the environment's schema registry",
    )
    schema_registry_api_key: str | None = Field(
        None,
        alias="schema_registry.api_key",
        description="the schema registry's API key (needed with schema_registry.endpoint)",
    )
    schema_registry_api_secret: str | None = Field(
        None,
        alias="schema_registry.api_secret",
        description="the schema registry API key's secret (needed with schema_registry.endpoint)",
        json_schema_extra=SECRET,
    )

    @model_validator(mode="after")
    def _settings(self) -> Self:
        if self.schema_registry_endpoint is not None:
            missing = [
                alias
                for alias, value in (
                    ("schema_registry.api_key", self.schema_registry_api_key),
                    ("schema_registry.api_secret", self.schema_registry_api_secret),
                )
                if value is None
            ]
            if missing:
                raise ValueError(f"schema_registry.endpoint needs {' and '.join(missing)}")
        if self.ssl_ca_file is not None and "," in self.ssl_ca_file:
            # It travels in the Kafka connection's client_configs, which commas separate.
            raise ValueError("ssl.ca_file cannot hold a comma")
        return self

    def _kafka_settings(self) -> dict[str, Any]:
        """The Kafka connection's options (as the SQL names them) these stand for."""
        trust = (
            {
                "ssl.ca.location": self.ssl_ca_file,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": self.ssl_ca_file,
            }
            if self.ssl_ca_file
            else {}
        )
        configs = ", ".join(f"{k}={v}" for k, v in trust.items())
        if self.client_configs:
            # The table's own settings come last: they win over ours.
            configs = f"{configs}, {self.client_configs}" if configs else self.client_configs
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "auth.type": "sasl",
            "auth.mechanism": SASL_MECHANISM,
            "auth.protocol": SECURITY_PROTOCOL,
            "auth.username": self.key,
            "auth.password": self.secret,
            "client_configs": configs or None,
            "schema_registry.endpoint": self.schema_registry_endpoint,
            "schema_registry.api_key": self.schema_registry_api_key,
            "schema_registry.api_secret": self.schema_registry_api_secret,
        }

    def kafka_connection(self) -> KafkaConnection:
        """The Kafka connection these settings stand for."""
        return KafkaConnection.model_validate(self._kafka_settings())


class ConfluentOptions(KafkaTableOptions, ConfluentConnection):
    """A Kafka table on Confluent Cloud: a connection, a topic, and how to read or write it."""

    def kafka_options(self) -> KafkaOptions:
        """The Kafka table these options stand for."""
        table = self.model_dump(include=set(KafkaTableOptions.model_fields))
        return KafkaOptions.model_validate({**self._kafka_settings(), **table})
