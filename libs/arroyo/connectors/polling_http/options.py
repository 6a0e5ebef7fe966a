"""The polling HTTP source's options, as Arroyo names them: ``endpoint``, ``headers``,
``method``, ``body``, ``poll_interval_ms`` and ``emit_behavior``; and the options every HTTP
source takes (``arroyo.connectors.runtime.http``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from arroyo.connectors.runtime.http import HttpSourceOptions


class PollingHttpOptions(HttpSourceOptions):
    """An HTTP endpoint requested again and again."""

    method: Literal["GET", "POST", "PUT", "PATCH"] = Field(
        "GET", description="the request's method: GET, POST, PUT or PATCH"
    )
    body: str | None = Field(None, description="a body sent with each request")
    poll_interval_ms: int = Field(
        1000, ge=1, description="milliseconds from the start of one successful poll to the next"
    )
    emit_behavior: Literal["all", "changed"] = Field(
        "all",
        description="'all': every response's body is a message; 'changed': only a body that "
        "differs from the one before",
    )
