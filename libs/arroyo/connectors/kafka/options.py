"""The Kafka connector's options, named as Arroyo names them (``auth.type``, ``source.offset``...).

Two models: ``KafkaConnection`` is what a connection profile holds (where the cluster is and how
to log in), ``KafkaOptions`` a table's whole option set (a connection plus the topic and the
source or sink settings). They are the single source of validation, of the API's JSON schema and
of the client configuration derived from them (``client_config``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from arroyo.connectors.base import SECRET, ConnectorOptions


def parse_client_configs(text: str) -> dict[str, str]:
    """``'key=value, key2=value2'`` -> a dict; a piece without ``=`` is an error."""
    configs: dict[str, str] = {}
    for raw in text.split(","):
        piece = raw.strip()
        if not piece:
            continue
        key, sep, value = piece.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"'{piece}' is not key=value")
        configs[key.strip()] = value.strip()
    return configs


def _valid_client_configs(value: str | None) -> str | None:
    if value is not None:
        parse_client_configs(value)
    return value


# ``client_configs``, as every Kafka-speaking connection takes it (``kafka``, ``confluent``).
ClientConfigs = Annotated[
    str | None,
    AfterValidator(_valid_client_configs),
    Field(
        description="further Kafka client settings, 'key=value, key2=value2' "
        "(passed to the consumer and producer as they are)",
    ),
]


class KafkaConnection(ConnectorOptions):
    """Where the Kafka cluster is and how to authenticate to it (a connection profile)."""

    bootstrap_servers: str = Field(
        description="comma-separated host:port of the brokers to bootstrap from",
        min_length=1,
    )
    auth_type: Literal["none", "sasl"] = Field(
        "none", alias="auth.type", description="'sasl' to authenticate with SASL"
    )
    auth_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, alias="auth.mechanism", description="SASL mechanism (auth.type = 'sasl')"
    )
    auth_protocol: Literal["SASL_PLAINTEXT", "SASL_SSL"] | None = Field(
        None, alias="auth.protocol", description="security protocol (auth.type = 'sasl')"
    )
    auth_username: str | None = Field(None, alias="auth.username", description="SASL user")
    auth_password: str | None = Field(
        None, alias="auth.password", description="SASL password", json_schema_extra=SECRET
    )
    client_configs: ClientConfigs = None
    schema_registry_endpoint: str | None = Field(
        None,
        alias="schema_registry.endpoint",
        description="URL of a Confluent-compatible schema registry",
    )
    schema_registry_api_key: str | None = Field(
        None, alias="schema_registry.api_key", description="schema registry basic-auth user"
    )
    schema_registry_api_secret: str | None = Field(
        None,
        alias="schema_registry.api_secret",
        description="schema registry basic-auth password",
        json_schema_extra=SECRET,
    )

    @model_validator(mode="after")
    def _sasl(self) -> KafkaConnection:
        if self.auth_type == "sasl":
            missing = [
                alias
                for alias, value in (
                    ("auth.mechanism", self.auth_mechanism),
                    ("auth.protocol", self.auth_protocol),
                    ("auth.username", self.auth_username),
                    ("auth.password", self.auth_password),
                )
                if value is None
            ]
            if missing:
                raise ValueError(f"auth.type = 'sasl' needs {', '.join(missing)}")
        return self

    def client_config(self) -> dict[str, str]:
        """The librdkafka/Java client settings these options stand for (the names are the same
        in both clients for everything set here)."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.auth_type == "sasl":
            assert self.auth_protocol and self.auth_mechanism
            config["security.protocol"] = self.auth_protocol
            config["sasl.mechanism"] = self.auth_mechanism
        if self.client_configs:
            config.update(parse_client_configs(self.client_configs))
        return config

    def jaas_config(self) -> str | None:
        """The Java client's ``sasl.jaas.config`` for SASL logins (librdkafka takes
        ``sasl.username``/``sasl.password`` instead)."""
        if self.auth_type != "sasl":
            return None
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if self.auth_mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )

        def quoted(value: str | None) -> str:
            return '"' + (value or "").replace("\\", "\\\\").replace('"', '\\"') + '"'

        return (
            f"{module} required username={quoted(self.auth_username)} "
            f"password={quoted(self.auth_password)};"
        )

    def librdkafka_config(self) -> dict[str, str | int | float | bool]:
        """Settings for confluent-kafka (librdkafka) clients: ``client_configs`` are written for
        both clients (Spark's Java client is the data path), so a setting only the Java client
        knows, such as ``default.api.timeout.ms``, is left out here rather than refused."""
        config: dict[str, str | int | float | bool] = {
            k: v for k, v in self.client_config().items() if _librdkafka_knows(k)
        }
        if self.auth_type == "sasl":
            config["sasl.username"] = self.auth_username or ""
            config["sasl.password"] = self.auth_password or ""
        return config


class KafkaTableOptions(ConnectorOptions):
    """A Kafka table's own options, besides its connection: the topic and how to read or
    write it (a ``confluent`` table takes them too)."""

    topic: str = Field(description="the topic to read or write", min_length=1)
    source_offset: Literal["latest", "earliest", "group"] = Field(
        "latest",
        alias="source.offset",
        description="where a new pipeline starts reading: the end of the topic, its "
        "beginning, or the consumer group's committed offsets",
    )
    source_read_mode: Literal["read_uncommitted", "read_committed"] = Field(
        "read_uncommitted",
        alias="source.read_mode",
        description="read_committed skips records of aborted transactions",
    )
    source_group_id: str | None = Field(
        None,
        alias="source.group_id",
        description="consumer group whose offsets track this source's progress",
    )
    source_group_id_prefix: str | None = Field(
        None,
        alias="source.group_id_prefix",
        description="prefix of a generated consumer group id (when source.group_id is unset)",
    )
    sink_commit_mode: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once",
        alias="sink.commit_mode",
        description="exactly_once writes each micro-batch in one Kafka transaction",
    )
    sink_key_field: str | None = Field(
        None, alias="sink.key_field", description="column written as the record key"
    )
    sink_timestamp_field: str | None = Field(
        None,
        alias="sink.timestamp_field",
        description="TIMESTAMP column written as the record timestamp",
    )

    @model_validator(mode="after")
    def _group(self) -> Self:
        if self.source_group_id and self.source_group_id_prefix:
            raise ValueError("set source.group_id or source.group_id_prefix, not both")
        return self


class KafkaOptions(KafkaTableOptions, KafkaConnection):
    """A Kafka table: a connection, a topic, and how to read or write it."""


@lru_cache(maxsize=256)
def _librdkafka_knows(name: str) -> bool:
    """Whether librdkafka has a configuration property of this name. It keeps no list we can
    read, so ask it: creating a client with an unknown property fails with exactly that error
    (a client is cheap to create and connects to nothing until it is used). A few Java client
    names (``ssl.truststore.location``, ``sasl.jaas.config``) it knows only to refuse them,
    whatever their value, with an error that begins "Java ": those are the Java client's."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({"bootstrap.servers": "127.0.0.1:9", name: "0", "log_level": 0})
    except KafkaException as err:
        refusal = err.args[0].str()
        return "No such configuration property" not in refusal and not refusal.startswith("Java ")
    return True
