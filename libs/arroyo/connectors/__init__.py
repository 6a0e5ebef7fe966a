"""Connectors, listed explicitly: adding one is adding it to ``CONNECTORS``."""

from __future__ import annotations

from arroyo.connectors.base import Connector, ConnectorError, ReadContext, WriteContext
from arroyo.connectors.builtin import (
    BlackholeConnector,
    FilesystemConnector,
    SingleFileConnector,
    StdoutConnector,
)
from arroyo.connectors.impulse import ImpulseConnector
from arroyo.connectors.kafka import KafkaConnector
from arroyo.connectors.nexmark import NexmarkConnector

CONNECTORS: tuple[Connector, ...] = (
    ImpulseConnector(),
    NexmarkConnector(),
    KafkaConnector(),
    SingleFileConnector(),
    FilesystemConnector(),
    StdoutConnector(),
    BlackholeConnector(),
)

_BY_NAME = {c.name: c for c in CONNECTORS}


def connector(name: str) -> Connector | None:
    return _BY_NAME.get(name)


__all__ = ["CONNECTORS", "Connector", "ConnectorError", "ReadContext", "WriteContext", "connector"]
