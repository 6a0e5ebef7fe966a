"""The impulse connector's options."""

from __future__ import annotations

from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from arroyo.connectors.base import ConnectorOptions
from arroyo.sql.time import parse_duration_us


class ImpulseOptions(ConnectorOptions):
    event_rate: PositiveFloat = Field(description="events per second, over all subtasks")
    message_count: PositiveInt | None = Field(
        None, description="events per subtask; the table is bounded when set"
    )
    event_time_interval: int | None = Field(
        None,
        description="event time between consecutive events (microseconds, or an interval "
        "such as '1 second'); unset: the time each event is due",
    )

    @field_validator("event_time_interval", mode="before")
    @classmethod
    def _interval(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            return parse_duration_us(value)
        return value
