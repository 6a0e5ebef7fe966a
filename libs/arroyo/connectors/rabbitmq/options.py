"""The RabbitMQ Streams connector's options, named as Arroyo names them (``host``, ``port``,
``virtual_host``, ``tls_config.*``, ``stream``, ``source.offset``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, field_validator

from arroyo.connectors.base import SECRET, ConnectorOptions

_NAMED_OFFSETS = ("first", "last", "next")


class RabbitmqConnection(ConnectorOptions):
    """A RabbitMQ node's stream port and the credentials."""

    host: str = Field("localhost", description="the node's host")
    port: int = Field(5552, ge=0, le=65535, description="its stream protocol port")
    virtual_host: str = Field("/", description="the virtual host")
    username: str = Field("guest", description="user")
    password: str = Field("guest", description="password", json_schema_extra=SECRET)
    tls_enabled: bool = Field(False, alias="tls_config.enabled", description="connect with TLS")
    tls_trust_certificates: bool = Field(
        False,
        alias="tls_config.trust_certificates",
        description="accept the server's certificate without verifying it",
    )
    tls_root_certificates_path: str | None = Field(
        None, alias="tls_config.root_certificates_path", description="CA certificates (PEM)"
    )
    tls_client_certificates_path: str | None = Field(
        None, alias="tls_config.client_certificates_path", description="client certificate"
    )
    tls_client_keys_path: str | None = Field(
        None, alias="tls_config.client_keys_path", description="client certificate's key"
    )
    load_balancer_mode: bool = Field(
        False, description="the node is reached through a load balancer"
    )


class RabbitmqOptions(RabbitmqConnection):
    """A stream, and where a new pipeline starts reading it."""

    stream: str = Field(description="the stream to read", min_length=1)
    source_offset: str = Field(
        "last",
        alias="source.offset",
        description="where a new pipeline starts: first, last (the last chunk), next (only what "
        "is published from now on), or a time (ISO 8601, e.g. 2026-11-29T10:00:00Z)",
    )

    @field_validator("source_offset")
    @classmethod
    def _offset(cls, value: str) -> str:
        if value in _NAMED_OFFSETS:
            return value
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"invalid value for source.offset '{value}': first, last, next or a time (ISO 8601)"
            ) from None
        return value
