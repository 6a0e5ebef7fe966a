"""The NATS connector's options, named as Arroyo names them (``servers``, ``auth.*``,
``consumer.*``).

``NatsConnection`` is what a connection profile holds (the servers and how to log in);
``NatsOptions`` a table's: a core ``subject`` (a source's or a sink's) or a JetStream ``stream``
(a source's), and the durable consumer's settings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from arroyo.connectors.base import SECRET, ConnectorOptions


class NatsConnection(ConnectorOptions):
    """NATS servers and the way to log in."""

    servers: str = Field(
        description="comma-separated servers, host:port or nats://host:port (tls:// for TLS)",
        min_length=1,
    )
    auth_type: Literal["none", "credentials", "token", "nkey", "jwt", "credentials_file"] = Field(
        "none",
        alias="auth.type",
        description="how to log in: none, credentials (username and password), token, nkey (a "
        "seed), jwt (a user JWT signed with its nkey seed) or credentials_file (a .creds file)",
    )
    auth_username: str | None = Field(None, alias="auth.username", description="user")
    auth_password: str | None = Field(
        None, alias="auth.password", description="password", json_schema_extra=SECRET
    )
    auth_token: str | None = Field(
        None, alias="auth.token", description="token", json_schema_extra=SECRET
    )
    auth_nkey_seed: str | None = Field(
        None, alias="auth.nkey_seed", description="NKey seed", json_schema_extra=SECRET
    )
    auth_jwt: str | None = Field(
        None, alias="auth.jwt", description="user JWT", json_schema_extra=SECRET
    )
    auth_credentials_file: str | None = Field(
        None, alias="auth.credentials_file", description="path of a .creds file"
    )

    @model_validator(mode="after")
    def _auth(self) -> NatsConnection:
        needed = {
            "credentials": ("auth.username", "auth.password"),
            "token": ("auth.token",),
            "nkey": ("auth.nkey_seed",),
            "jwt": ("auth.jwt", "auth.nkey_seed"),
            "credentials_file": ("auth.credentials_file",),
        }.get(self.auth_type, ())
        given = self.model_dump(by_alias=True)
        missing = [name for name in needed if not given.get(name)]
        if missing:
            raise ValueError(f"auth.type = '{self.auth_type}' needs {', '.join(missing)}")
        return self

    def server_urls(self) -> list[str]:
        urls = []
        for server in (s.strip() for s in self.servers.split(",")):
            if server:
                urls.append(server if "://" in server else f"nats://{server}")
        return urls


class NatsOptions(NatsConnection):
    """A NATS table: a subject, or a JetStream stream and its consumer."""

    subject: str | None = Field(
        None, description="core NATS subject to subscribe to (source) or publish to (sink)"
    )
    stream: str | None = Field(None, description="JetStream stream to read (source)")
    consumer_ack_policy: Literal["Explicit", "None", "All"] = Field(
        "Explicit", alias="consumer.ack_policy", description="JetStream consumer's ack policy"
    )
    consumer_replay_policy: Literal["Original", "Instant"] = Field(
        "Instant",
        alias="consumer.replay_policy",
        description="replay at the original pace or at once",
    )
    consumer_ack_wait: int = Field(
        30,
        alias="consumer.ack_wait",
        gt=0,
        description="seconds before an unacked message is sent again",
    )
    consumer_description: str | None = Field(
        None, alias="consumer.description", description="the consumer's description"
    )
    consumer_filter_subjects: str | None = Field(
        None,
        alias="consumer.filter_subjects",
        description="comma-separated subjects to read of the stream",
    )
    consumer_sample_frequency: int = Field(
        0, alias="consumer.sample_frequency", ge=0, le=100, description="percent of acks sampled"
    )
    consumer_num_replicas: int = Field(
        1, alias="consumer.num_replicas", ge=0, description="replicas"
    )
    consumer_inactive_threshold: int = Field(
        600, alias="consumer.inactive_threshold", gt=0, description="seconds an idle consumer lives"
    )
    consumer_rate_limit: int = Field(
        -1, alias="consumer.rate_limit", description="bits per second (-1: no limit)"
    )
    consumer_max_ack_pending: int = Field(
        -1, alias="consumer.max_ack_pending", description="unacked messages at most (-1: no limit)"
    )
    consumer_max_deliver: int = Field(
        -1,
        alias="consumer.max_deliver",
        description="deliveries of a message at most (-1: no limit)",
    )
    consumer_max_waiting: int = Field(
        1_000_000, alias="consumer.max_waiting", gt=0, description="pull requests waiting at most"
    )
    consumer_max_batch: int = Field(
        10_000, alias="consumer.max_batch", gt=0, description="messages fetched at once"
    )
    consumer_max_bytes: int = Field(
        104_857_600, alias="consumer.max_bytes", gt=0, description="bytes fetched at once"
    )
    consumer_max_expires: int = Field(
        300_000, alias="consumer.max_expires", gt=0, description="seconds a pull request waits"
    )

    @model_validator(mode="after")
    def _one_source(self) -> NatsOptions:
        if self.subject and self.stream:
            raise ValueError("Exactly one of `stream` or `subject` must be set")
        if not self.subject and not self.stream:
            raise ValueError("One of `stream` or `subject` must be set")
        return self
