"""The nexmark connector's options."""

from __future__ import annotations

from pydantic import Field, PositiveFloat

from arroyo.connectors.base import ConnectorOptions


class NexmarkOptions(ConnectorOptions):
    event_rate: PositiveFloat = Field(description="events per second")
    runtime: PositiveFloat | None = Field(
        None, description="seconds of events to generate; the table is bounded when set"
    )
