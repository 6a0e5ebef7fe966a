"""The Kafka connector."""

from __future__ import annotations

from typing import ClassVar

from arroyo.connectors.base import Connector, ConnectorError, ConnectorOptions
from arroyo.connectors.kafka.options import KafkaConnection, KafkaOptions
from arroyo.sql.program import Role

_TEST_TIMEOUT_S = 10.0


class KafkaConnector(Connector):
    name = "kafka"
    description = "Apache Kafka topics"
    roles: ClassVar[frozenset[Role]] = frozenset({"source", "sink"})
    options_model = KafkaOptions
    connection_model = KafkaConnection
    formats = frozenset({"json", "debezium_json", "avro", "protobuf", "raw_string", "raw_bytes"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "offset_id": ("BIGINT",),
        "partition": ("INT", "BIGINT"),
        "topic": ("STRING",),
        "timestamp": ("TIMESTAMP",),
        "key": ("STRING", "BINARY"),
    }

    def test_connection(self, options: ConnectorOptions) -> str:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        assert isinstance(options, KafkaConnection)
        admin = AdminClient(options.librdkafka_config())
        try:
            metadata = admin.list_topics(timeout=_TEST_TIMEOUT_S)
        except KafkaException as err:
            raise ConnectorError(
                f"could not reach Kafka at {options.bootstrap_servers}: {err.args[0].str()}"
            ) from err
        topics = sorted(t for t in metadata.topics if not t.startswith("__"))
        return f"connected to {len(metadata.brokers)} broker(s); topics: {', '.join(topics)}"
