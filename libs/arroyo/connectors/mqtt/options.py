"""The MQTT connector's options, named as Arroyo names them (``url``, ``tls.ca``, ``qos``...).

``MqttConnection`` is what a connection profile holds (the broker and how to log in);
``MqttOptions`` a table's whole option set: a connection, the topic (a filter with wildcards for
a source), the quality of service, and for a sink whether messages are retained.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from arroyo.connectors.base import SECRET, ConnectorOptions

_SCHEMES = {"tcp": 1883, "mqtt": 1883, "ssl": 8883, "mqtts": 8883, "ws": 80, "wss": 443}


class MqttConnection(ConnectorOptions):
    """An MQTT broker: where it is, its TLS, and the credentials."""

    url: str = Field(
        description="the broker: tcp:// or mqtt:// (plain), ssl:// or mqtts:// (TLS), ws:// or "
        "wss:// (WebSocket), then host:port",
        min_length=1,
    )
    tls_ca: str | None = Field(
        None, alias="tls.ca", description="CA certificate (a file, or PEM) to verify the broker"
    )
    tls_cert: str | None = Field(
        None, alias="tls.cert", description="client certificate (a file, or PEM), for mutual TLS"
    )
    tls_key: str | None = Field(
        None,
        alias="tls.key",
        description="the client certificate's private key (a file, or PEM)",
        json_schema_extra=SECRET,
    )
    client_prefix: str = Field("arroyo-mqtt", description="prefix of the client ids used")
    username: str | None = Field(None, description="user to log in as")
    password: str | None = Field(None, description="password", json_schema_extra=SECRET)
    max_packet_size: int = Field(
        10_240,
        ge=0,
        le=4_294_967_295,
        description="the largest message a sink publishes, in bytes (0: no limit)",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in _SCHEMES:
            raise ValueError(
                f"url '{value}' must start with one of " + ", ".join(f"{s}://" for s in _SCHEMES)
            )
        if not parts.hostname:
            raise ValueError(f"url '{value}' names no host")
        return value

    def endpoint(self) -> tuple[Literal["tcp", "websockets"], str, int, bool]:
        """(transport, host, port, tls) of the broker."""
        parts = urlsplit(self.url)
        scheme = parts.scheme
        transport: Literal["tcp", "websockets"] = "websockets" if scheme in ("ws", "wss") else "tcp"
        tls = scheme in ("ssl", "mqtts", "wss")
        return transport, parts.hostname or "", parts.port or _SCHEMES[scheme], tls


Qos = Literal["AtMostOnce", "AtLeastOnce", "ExactlyOnce"]


class MqttOptions(MqttConnection):
    """An MQTT table: a connection, a topic and how messages are delivered."""

    topic: str = Field(
        description="the topic a sink publishes to, or the filter a source subscribes to "
        "(wildcards + and #)",
        min_length=1,
    )
    qos: Qos = Field(
        "AtMostOnce",
        description="quality of service: AtMostOnce (0), AtLeastOnce (1) or ExactlyOnce (2); "
        "a source of 1 or 2 keeps a persistent session, so that messages sent while it is "
        "down are delivered when it is back",
    )
    sink_retain: bool = Field(
        False, alias="sink.retain", description="publish retained messages (sink)"
    )

    def qos_level(self) -> int:
        return {"AtMostOnce": 0, "AtLeastOnce": 1, "ExactlyOnce": 2}[self.qos]
