"""Connectors, listed explicitly: adding one is adding its package and a line to ``CONNECTORS``.

Each connector is a package ``arroyo.connectors.<name>`` (see ``base``); the registry imports
their ``__init__`` modules only, which import no Spark, so listing and validating connectors
needs no JVM.
"""

from __future__ import annotations

from arroyo.connectors.base import (
    AnyConnector,
    Connector,
    ConnectorError,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.blackhole import BlackholeConnector
from arroyo.connectors.confluent import ConfluentConnector
from arroyo.connectors.delta import DeltaConnector
from arroyo.connectors.filesystem import FilesystemConnector
from arroyo.connectors.iceberg import IcebergConnector
from arroyo.connectors.impulse import ImpulseConnector
from arroyo.connectors.kafka import KafkaConnector
from arroyo.connectors.kinesis import KinesisConnector
from arroyo.connectors.mqtt import MqttConnector
from arroyo.connectors.nats import NatsConnector
from arroyo.connectors.nexmark import NexmarkConnector
from arroyo.connectors.polling_http import PollingHttpConnector
from arroyo.connectors.rabbitmq import RabbitmqConnector
from arroyo.connectors.redis import RedisConnector
from arroyo.connectors.single_file import SingleFileConnector
from arroyo.connectors.sse import SseConnector
from arroyo.connectors.stage import StageConnector
from arroyo.connectors.stdout import StdoutConnector
from arroyo.connectors.webhook import WebhookConnector
from arroyo.connectors.websocket import WebsocketConnector

CONNECTORS: tuple[AnyConnector, ...] = (
    ImpulseConnector(),
    NexmarkConnector(),
    KafkaConnector(),
    ConfluentConnector(),
    MqttConnector(),
    NatsConnector(),
    RabbitmqConnector(),
    KinesisConnector(),
    SseConnector(),
    WebsocketConnector(),
    PollingHttpConnector(),
    SingleFileConnector(),
    FilesystemConnector(),
    DeltaConnector(),
    IcebergConnector(),
    RedisConnector(),
    WebhookConnector(),
    StdoutConnector(),
    BlackholeConnector(),
)

# The engine's own (stages): found by name for the programs that use them, never listed.
INTERNAL: tuple[AnyConnector, ...] = (StageConnector(),)

_BY_NAME = {c.name: c for c in (*CONNECTORS, *INTERNAL)}


def connector(name: str) -> AnyConnector | None:
    return _BY_NAME.get(name)


__all__ = [
    "CONNECTORS",
    "INTERNAL",
    "AnyConnector",
    "Connector",
    "ConnectorError",
    "ReadContext",
    "WriteContext",
    "connector",
]
