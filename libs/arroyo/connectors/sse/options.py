"""The SSE source's options, as Arroyo names them: ``endpoint``, ``headers`` and ``events`` (a
comma-separated list of the event types to read; all when unset), and the options every HTTP
source takes (``arroyo.connectors.runtime.http``)."""

from __future__ import annotations

from pydantic import Field

from arroyo.connectors.runtime.http import HttpSourceOptions


class SseOptions(HttpSourceOptions):
    """A Server-Sent Events stream."""

    events: str | None = Field(
        None,
        description="the event types to read, comma-separated (all when unset)",
    )

    def event_types(self) -> frozenset[str]:
        return frozenset(e.strip() for e in (self.events or "").split(",") if e.strip())
