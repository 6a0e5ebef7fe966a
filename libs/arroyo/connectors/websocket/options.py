"""The WebSocket source's options, as Arroyo names them: ``endpoint`` (ws:// or wss://),
``headers``, and the messages sent after each connection is opened: ``subscription_messages``
(in SQL ``'subscription_messages.0'``, ``'subscription_messages.1'``..., sent in that order)
or the older single ``subscription_message``; and the options every HTTP source takes
(``arroyo.connectors.runtime.http``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from arroyo.connectors.runtime.http import HttpSourceOptions

_MESSAGES = "subscription_messages"


class WebsocketOptions(HttpSourceOptions):
    """A WebSocket endpoint, and what to send it after each connection."""

    schemes: ClassVar[tuple[str, ...]] = ("ws", "wss")

    subscription_message: str | None = Field(
        None,
        max_length=2048,
        description="[deprecated: subscription_messages] a message sent after connecting",
    )
    subscription_messages: list[str] = Field(
        default_factory=list,
        description="messages sent in order after each connection is opened; in SQL "
        "'subscription_messages.0', 'subscription_messages.1'...",
    )

    @model_validator(mode="before")
    @classmethod
    def _numbered(cls, data: Any) -> Any:
        """``subscription_messages.N`` (from 0, as long as they run on) as one list."""
        if not isinstance(data, dict) or f"{_MESSAGES}.0" not in data:
            return data
        if "subscription_message" in data:
            raise ValueError("set subscription_message or subscription_messages.0, not both")
        data = dict(data)
        messages: list[str] = []
        while f"{_MESSAGES}.{len(messages)}" in data:
            messages.append(data.pop(f"{_MESSAGES}.{len(messages)}"))
        data[_MESSAGES] = messages
        return data

    @model_validator(mode="after")
    def _lengths(self) -> WebsocketOptions:
        for i, message in enumerate(self.subscription_messages):
            if len(message) > 2048:
                raise ValueError(f"subscription_messages.{i} is longer than 2048 characters")
        return self

    def messages(self) -> list[str]:
        """What is sent after connecting, in order."""
        first = [self.subscription_message] if self.subscription_message else []
        return [*first, *self.subscription_messages]
