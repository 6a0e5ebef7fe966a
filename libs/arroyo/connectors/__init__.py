"""Connectors, listed explicitly: adding one is adding it to ``CONNECTORS``."""

from __future__ import annotations

from arroyo.connectors.base import (
    AnyConnector,
    Connector,
    ConnectorError,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.builtin import (
    BlackholeConnector,
    FilesystemConnector,
    SingleFileConnector,
    StdoutConnector,
)
from arroyo.connectors.impulse import ImpulseConnector
from arroyo.connectors.kafka import KafkaConnector
from arroyo.connectors.nexmark import NexmarkConnector
from arroyo.connectors.stage import StageConnector

CONNECTORS: tuple[AnyConnector, ...] = (
    ImpulseConnector(),
    NexmarkConnector(),
    KafkaConnector(),
    SingleFileConnector(),
    FilesystemConnector(),
    StdoutConnector(),
    BlackholeConnector(),
)

# The engine's own (stages): found by name for the programs that use them, never listed.
_INTERNAL: tuple[AnyConnector, ...] = (StageConnector(),)

_BY_NAME = {c.name: c for c in (*CONNECTORS, *_INTERNAL)}


def connector(name: str) -> AnyConnector | None:
    return _BY_NAME.get(name)


__all__ = [
    "CONNECTORS",
    "AnyConnector",
    "Connector",
    "ConnectorError",
    "ReadContext",
    "WriteContext",
    "connector",
]
