"""``kafka``: topics as sources and sinks, on Spark's own Kafka connector."""

from arroyo.connectors.kafka.connector import KafkaConnector
from arroyo.connectors.kafka.options import KafkaConnection, KafkaOptions

__all__ = ["KafkaConnection", "KafkaConnector", "KafkaOptions"]
