"""Tests of the service bootstrap (arroyo.service), on real servers, sockets and processes.

``serving`` starts a real service in-process (free ports, no signal handlers, no global logging
or tracing setup) and stops it however the test ends.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from arroyo.config import Config
from arroyo.service import Listen, RunningService, start


@asynccontextmanager
async def serving(
    *servicers: tuple[Callable[[Any, Any], None], Any],
    status: Callable[[], Mapping[str, object]] | None = None,
    tracer_provider: TracerProvider | None = None,
    name: str = "test-service",
    port: int = 0,
) -> AsyncIterator[RunningService]:
    """A running service hosting ``(add_XServicer_to_server, servicer)`` pairs, on ``port``
    (0: a free one)."""

    def register(server: Any) -> None:
        for add, servicer in servicers:
            add(servicer, server)

    running = await start(
        name,
        Config(),
        listen=Listen(grpc_port=port),
        register=register,
        status=status,
        tracer_provider=tracer_provider,
    )
    try:
        yield running
    finally:
        await running.stop(grace_s=0)


def unused_port() -> int:
    """A port nothing listens on (bound then released: connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
