"""What the HTTP sources (``sse``, ``websocket``, ``polling_http``) share, without Spark: the
options every one of them takes, Arroyo's header strings, and the retry policy.

Options as Arroyo names them: ``endpoint`` and ``headers`` (``'Name: value,Name2: value2'``,
split at each comma and then at the first colon; ``{{ VAR }}`` is the environment variable
``VAR`` of the process that connects, as Arroyo substitutes them). Ours, which Arroyo does
not have: ``max_message_bytes`` (the largest message taken: a larger one fails the job) and
the bound of the buffer between the connection and Spark's micro-batches, ``buffer.max_bytes``
(received and not yet taken by a micro-batch)
with ``buffer.overflow`` = ``backpressure`` (stop reading until Spark has caught up) or
``drop`` (discard new messages, counted in the job's metrics).
"""

from __future__ import annotations

import os
import random
import re
from typing import ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from arroyo.connectors.base import SECRET, ConnectorError, ConnectorOptions
from arroyo.sql.sizes import data_size_bytes

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

# A connection that fails again and again is given up after this long without a message.
GIVE_UP_S = 120.0
# Waits between attempts: doubling from the first to the last, each with up to 20% jitter.
FIRST_RETRY_S = 0.1
LAST_RETRY_S = 5.0

Overflow = Literal["backpressure", "drop"]


class HttpSourceError(ConnectorError):
    """A source's endpoint refused it in a way that retrying does not mend (a 4xx answer, a
    message over ``max_message_bytes``), or stayed unreachable for ``GIVE_UP_S``."""

    code = "http_source_error"


def substitute(text: str) -> str:
    """``text`` with each ``{{ VAR }}`` replaced by the environment variable ``VAR``; raises
    ValueError naming a variable that is not set (never a value)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"environment variable '{name}' is not set")
        return os.environ[name]

    return _VARIABLE.sub(value, text)


def parse_headers(text: str) -> list[tuple[str, str]]:
    """``'Name: value,Name2: value2'`` as (name, value) pairs, as Arroyo splits them: at each
    comma, then at the first colon. A ValueError names a header of another form."""
    headers = []
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition(":")
        name = name.strip()
        if not sep or not _HEADER_NAME.match(name):
            raise ValueError(f"header '{name or item.strip()}' is not of the form 'Name: value'")
        headers.append((name, value.strip()))
    return headers


def _size(value: object) -> object:
    return data_size_bytes(value) if isinstance(value, str) else value


class HttpSourceOptions(ConnectorOptions):
    """Options every HTTP source takes; each connector's model adds its own."""

    # The URL schemes its endpoint may have.
    schemes: ClassVar[tuple[str, ...]] = ("http", "https")

    endpoint: str = Field(description="the URL to connect to", min_length=1)
    headers: str | None = Field(
        None,
        description="headers sent with each request, 'Name: value,Name2: value2'; {{ VAR }} "
        "is replaced by the environment variable VAR",
        json_schema_extra=SECRET,
    )
    max_message_bytes: int = Field(
        5 * 1024 * 1024,
        ge=1,
        description="the largest message (event, frame, response body) taken, in bytes or "
        "as '4MB'; a larger one fails the job, naming this option (not in Arroyo)",
    )
    buffer_max_bytes: int = Field(
        64 * 1024 * 1024,
        alias="buffer.max_bytes",
        ge=1024,
        description="the most bytes received and not yet taken by a micro-batch, in bytes "
        "or as '64MB' (not in Arroyo)",
    )
    buffer_overflow: Overflow = Field(
        "backpressure",
        alias="buffer.overflow",
        description="what happens past buffer.max_bytes: 'backpressure' stops reading the "
        "connection until Spark catches up, 'drop' discards new messages and counts them in "
        "the job's metrics (not in Arroyo)",
    )

    @field_validator("max_message_bytes", "buffer_max_bytes", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> object:
        return _size(value)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return _check_endpoint(value, cls.schemes)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: str | None) -> str | None:
        if value is not None:
            parse_headers(value)
        return value

    def endpoint_url(self) -> str:
        """The endpoint, its variables substituted (when connecting, never when planning)."""
        return _check_endpoint(substitute(self.endpoint), self.schemes)

    def header_pairs(self) -> list[tuple[str, str]]:
        """The headers, their variables substituted (when connecting, never when planning)."""
        return parse_headers(substitute(self.headers)) if self.headers else []


def _check_endpoint(value: str, schemes: tuple[str, ...]) -> str:
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.hostname or "{{" in value):
        wanted = " or ".join(f"{s}://" for s in schemes)
        raise ValueError(f"endpoint '{value}' must be a {wanted} URL")
    return value


def permanent_status(status: int) -> bool:
    """Whether an HTTP error status will not mend by retrying: a 4xx other than a timeout
    (408) or too many requests (429)."""
    return 400 <= status < 500 and status not in (408, 429)


class Backoff:
    """Waits between attempts to reach an endpoint: doubling, jittered, reset by a success;
    ``give_up`` says whether it has failed for ``limit_s`` since the last success."""

    def __init__(self, limit_s: float = GIVE_UP_S, first_s: float = FIRST_RETRY_S) -> None:
        self.limit_s = limit_s
        self.first_s = first_s
        self.delay_s = first_s
        self.failing_since: float | None = None

    def succeeded(self) -> None:
        self.delay_s = self.first_s
        self.failing_since = None

    def failed(self, now: float) -> float:
        """Records a failure at ``now`` (monotonic seconds): the seconds to wait."""
        if self.failing_since is None:
            self.failing_since = now
        wait = self.delay_s * (1 + random.uniform(0, 0.2))
        self.delay_s = min(self.delay_s * 2, LAST_RETRY_S)
        return wait

    def give_up(self, now: float) -> bool:
        return self.failing_since is not None and now - self.failing_since >= self.limit_s
