"""``redis``: a sink writing rows as strings, list items or hash fields, and lookup tables
read by key."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    KeyLookup,
    WriteContext,
)
from arroyo.connectors.redis.options import RedisConnection, RedisOptions
from arroyo.program.spec import ColumnSpec, Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

_TARGET_OPTIONS = (
    "target",
    "target.key_prefix",
    "target.key_column",
    "target.ttl_secs",
    "target.max_length",
    "target.operation",
    "target.field_column",
)
_LOOKUP_OPTIONS = ("lookup.cache.max_bytes", "lookup.cache.ttl")


class RedisConnector(Connector[RedisOptions, RedisConnection]):
    """Sink (``sink.py``): each row encoded in the table's format and written under the key
    ``target.key_prefix`` + the ``target.key_column`` value: as the key's string value
    (``target = 'string'``, SET, with ``target.ttl_secs`` as its expiry), pushed onto the key's
    list (``'list'``: RPUSH or LPUSH by ``target.operation``, trimmed to
    ``target.max_length``), or as a field of the key's hash (``'hash'``: HSET, the field from
    ``target.field_column``). Written from the executors, one pipeline per partition and
    micro-batch. At least once: a replayed micro-batch sets the same strings and hash fields
    again (so they end as written once) and pushes its list items again.

    Lookup table (``type = 'lookup'`` or CREATE TEMPORARY TABLE): its PRIMARY KEY is a TEXT
    column ``METADATA FROM 'key'``; a stream joined on it has each row's key looked up when its
    micro-batch runs (MGET, a batch of keys at a time: arroyo.engine.lookups), and the key's
    string value decoded in the table's format (one it cannot decode is bad data: ``'fail'``
    fails the job naming the table and the key, ``'drop'`` takes the key as missing:
    arroyo.sql.planner.plan.lookups). What the key holds when the row's batch runs is
    what the row gets (a replayed batch may see a newer value); ``lookup.cache.*`` bound how
    stale a cached one can be.
    """

    name = "redis"
    description = "Redis keys: strings, lists and hashes"
    capabilities = Capabilities(
        sink=True, delivery="at_least_once", needs_format=True, lookup=True, lookup_by_key=True
    )
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {"key": ("STRING",)}
    options_model = RedisOptions
    connection_model = RedisConnection
    formats = frozenset({"json", "raw_string", "raw_bytes"})
    default_format = "json"

    def test_connection(self, settings: RedisConnection) -> str:
        from arroyo.connectors.redis.sink import client

        try:
            redis = client(settings, timeout_s=5.0)
            try:
                info = redis.info("server")
            finally:
                redis.close()
        except Exception as err:  # redis-py's errors; the message names the address
            where = settings.address or settings.cluster_addresses
            raise ConnectorError(f"cannot reach redis at {where}: {err}") from err
        version = info.get("redis_version", "unknown") if isinstance(info, dict) else "unknown"
        return f"connected to redis {version}"

    def misplaced_options(self, options: RedisOptions, role: Role) -> list[str]:
        set_ = options.model_dump(by_alias=True, exclude_unset=True)
        wrong = _LOOKUP_OPTIONS if role == "sink" else _TARGET_OPTIONS
        return [name for name in wrong if name in set_]

    def lookup(self, table: TableSpec, options: RedisOptions) -> KeyLookup:
        from arroyo.connectors.redis.sink import RedisLookup

        return RedisLookup(table.name, options)

    def lookup_cache(self, options: RedisOptions) -> tuple[int, float | None]:
        return options.lookup_cache_max_bytes, options.cache_ttl_s()

    def column_errors(self, options: RedisOptions, columns: list[ColumnSpec]) -> list[str]:
        if options.target is None:
            return ["a redis sink needs target = 'string', 'list' or 'hash'"]
        by_name = {c.name: c for c in columns}
        errors = []
        for option, column in options.columns_named():
            found = by_name.get(column)
            if found is None or found.spark_type.upper() != "STRING" or found.nullable:
                errors.append(
                    f"invalid value '{column}' for {option}, must be the name of a "
                    f"non-nullable TEXT column on the table"
                )
        return errors

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: RedisOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.redis.sink import write_redis

        return write_redis(ctx, df, table, options)


__all__ = ["RedisConnector"]
