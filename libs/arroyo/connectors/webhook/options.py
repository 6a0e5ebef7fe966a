"""The webhook sink's options: Arroyo's ``endpoint`` and ``headers`` (``'Name: value,Name2:
value2'``, where ``{{ VAR }}`` is an environment variable, read as the HTTP sources read
them: ``arroyo.connectors.runtime.http``), and how rows are batched and sent, which Arroyo
does not offer (it posts one record per request, at most 50 at a time)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from arroyo.connectors.base import SECRET, ConnectorOptions
from arroyo.connectors.runtime.http import parse_headers
from arroyo.sql.time import option_duration_us


class WebhookOptions(ConnectorOptions):
    """A webhook sink: where each batch of records is posted, with which headers, how many
    records go in one request and how many requests are in flight at once."""

    endpoint: str = Field(
        description="the URL (http:// or https://) that each request is POSTed to; "
        "{{ VAR }} is replaced by the environment variable VAR",
        min_length=1,
    )
    headers: str | None = Field(
        None,
        max_length=2048,
        description="headers sent with every request, 'Name: value,Name2: value2'; {{ VAR }} "
        "is replaced by the environment variable VAR",
        json_schema_extra=SECRET,
    )
    max_batch_size: int = Field(
        1,
        ge=1,
        le=100_000,
        description="records in one request: 1 posts each record as the body (as Arroyo "
        "does); more posts a JSON array (json) or newline-separated lines (raw_string)",
    )
    max_batch_interval: str = Field(
        "1 second",
        description="the longest a record waits for its batch to fill before it is sent",
    )
    max_inflight: int = Field(
        50, ge=1, le=1_000, description="requests in flight at once, per task of the sink"
    )
    request_timeout: str = Field(
        "30 seconds",
        description="how long one request may take before it is abandoned and retried",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not (parts.hostname or "{{" in value):
            raise ValueError(f"endpoint '{value}' must be an http:// or https:// URL")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: str | None) -> str | None:
        if value is not None:
            parse_headers(value)  # a ValueError names the header
        return value

    @field_validator("max_batch_interval", "request_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        if option_duration_us(value) <= 0:  # a DurationError (a ValueError) names the text
            raise ValueError(f"'{value}' must be longer than zero")
        return value

    def batch_interval_s(self) -> float:
        return option_duration_us(self.max_batch_interval) / 1e6

    def request_timeout_s(self) -> float:
        return option_duration_us(self.request_timeout) / 1e6
