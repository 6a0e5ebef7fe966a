"""The Redis connector's options, named as Arroyo names them (``address``, ``target.*``).

``RedisConnection`` is what a connection profile holds (where the server or cluster is and how to
log in); ``RedisOptions`` a table's whole option set: a connection, and for a sink where and how
each row is written (``target``: a string per key, a list per key, or a hash per key).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from arroyo.connectors.base import SECRET, ConnectorOptions
from arroyo.sql.time import option_duration_us


class RedisConnection(ConnectorOptions):
    """A Redis server (``address``) or cluster (``cluster.addresses``), and its credentials."""

    address: str | None = Field(
        None,
        pattern=r"^rediss?://",
        description="redis://host:port of a single server (rediss:// for TLS)",
    )
    cluster_addresses: str | None = Field(
        None,
        alias="cluster.addresses",
        description="comma-separated redis://host:port of a cluster's nodes",
    )
    username: str | None = Field(None, description="user, where the server has ACL users")
    password: str | None = Field(None, description="password", json_schema_extra=SECRET)

    @model_validator(mode="after")
    def _one_address(self) -> RedisConnection:
        if self.address and self.cluster_addresses:
            raise ValueError("only one of `address` or `cluster.addresses` may be set")
        if not self.address and not self.cluster_addresses:
            raise ValueError("one of `address` or `cluster.addresses` must be set")
        for node in self.nodes():
            if not node.startswith(("redis://", "rediss://")):
                raise ValueError(f"cluster.addresses: '{node}' is not a redis:// URL")
        return self

    def nodes(self) -> list[str]:
        if self.address:
            return [self.address]
        return [a.strip() for a in (self.cluster_addresses or "").split(",") if a.strip()]


Target = Literal["string", "list", "hash"]


class RedisOptions(RedisConnection):
    """A Redis table: a connection, and for a sink, its target."""

    target: Target | None = Field(
        None,
        description="how a sink writes each row: a string value per key (SET), appended or "
        "prepended to a list per key, or a field of a hash per key",
    )
    target_key_prefix: str | None = Field(
        None,
        alias="target.key_prefix",
        description="prefix of every key written; the key column's value follows it",
    )
    target_key_column: str | None = Field(
        None,
        alias="target.key_column",
        description="TEXT column whose value, after the prefix, is each row's key (unset: "
        "every row writes the prefix itself)",
    )
    target_ttl_secs: int | None = Field(
        None,
        alias="target.ttl_secs",
        gt=0,
        description="seconds until a written key expires (unset: never)",
    )
    target_max_length: int | None = Field(
        None,
        alias="target.max_length",
        gt=0,
        description="list target: the list is trimmed to this many items after each write, "
        "keeping the newest",
    )
    target_operation: Literal["append", "prepend"] = Field(
        "append",
        alias="target.operation",
        description="list target: push each row at the list's end (RPUSH) or start (LPUSH)",
    )
    target_field_column: str | None = Field(
        None,
        alias="target.field_column",
        description="hash target: TEXT column whose value is the field each row is written to",
    )

    lookup_cache_max_bytes: int = Field(
        8 * 1024 * 1024,
        alias="lookup.cache.max_bytes",
        ge=0,
        description="lookup table: bytes of records cached per worker process (0: no cache)",
    )
    lookup_cache_ttl: str | None = Field(
        None,
        alias="lookup.cache.ttl",
        description="lookup table: how long a cached record is used, as interval '5 seconds' "
        "(unset: until the cache evicts it)",
    )

    @field_validator("lookup_cache_ttl")
    @classmethod
    def _ttl(cls, value: str | None) -> str | None:
        if value is not None:
            option_duration_us(value)  # raises a DurationError (a ValueError) naming the text
        return value

    def cache_ttl_s(self) -> float | None:
        return (
            None
            if self.lookup_cache_ttl is None
            else option_duration_us(self.lookup_cache_ttl) / 1e6
        )

    @model_validator(mode="after")
    def _target(self) -> RedisOptions:
        if self.target is None:
            return self  # a lookup table (the planner refuses a sink without a target)
        if self.target_key_prefix is None:
            raise ValueError("target.key_prefix must be set for a redis sink")
        if self.target == "hash" and not self.target_field_column:
            raise ValueError("target.field_column must be set for target = 'hash'")
        if self.target != "hash" and self.target_field_column:
            raise ValueError("target.field_column applies to target = 'hash' only")
        if self.target != "list" and self.target_max_length is not None:
            raise ValueError("target.max_length applies to target = 'list' only")
        return self

    def columns_named(self) -> list[tuple[str, str]]:
        """(option, column) of the TEXT columns the target names."""
        named = [("target.key_column", self.target_key_column)]
        named.append(("target.field_column", self.target_field_column))
        return [(option, column) for option, column in named if column]
