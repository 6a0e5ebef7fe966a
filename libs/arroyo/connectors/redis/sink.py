"""The Redis sink: each micro-batch written from the executors, one pipeline of commands per
partition (sent every ``_FLUSH_EVERY`` rows and at the partition's end), never a round trip per
row. At least once: a micro-batch replayed after a crash is written again, which leaves strings
and hash fields as they were (the same values set again) and appends a list's items twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from arroyo.connectors.base import WriteContext
from arroyo.connectors.redis.options import RedisConnection, RedisOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.streaming.readwriter import DataStreamWriter

# Commands sent in one pipeline round trip.
_FLUSH_EVERY = 2_000
# A partition whose connection fails is written again, this many times, backing off.
_ATTEMPTS = 5
_BACKOFF_S = (0.1, 0.5, 1.0, 2.0)


class RedisWriteError(RuntimeError):
    """A batch that could not be written: names the sink and the server."""


class RedisReadError(RuntimeError):
    """Keys that could not be looked up: names the table and the server."""


# The key and field columns as the executors get them (beside the encoded ``value``).
_KEY = "__arroyo_redis_key"
_FIELD = "__arroyo_redis_field"


def client(conn: RedisConnection, timeout_s: float = 10.0) -> Any:
    """A client of the server or cluster ``conn`` names (redis-py)."""
    import redis
    from redis.cluster import ClusterNode, RedisCluster

    if conn.address:
        return redis.Redis.from_url(
            conn.address,
            username=conn.username,
            password=conn.password,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
        )
    nodes = []
    for url in conn.nodes():
        parts = urlsplit(url)
        node = ClusterNode(parts.hostname or "127.0.0.1", parts.port or 6379)  # type: ignore[no-untyped-call]
        nodes.append(node)
    return RedisCluster(
        startup_nodes=nodes,
        username=conn.username,
        password=conn.password,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
    )


@dataclass(frozen=True)
class PartitionWriter:
    """Writes one partition's encoded rows (``value``, and the key and field columns) to Redis;
    pickled to the executors."""

    sink: str
    options: RedisOptions

    def __call__(self, rows: Iterator[Row]) -> None:
        batch = [self._command(row) for row in rows]
        if not batch:
            return
        for attempt in range(_ATTEMPTS):
            try:
                self._write(batch)
                return
            except Exception as err:  # redis-py's ConnectionError, TimeoutError, ResponseError
                import redis

                retry = isinstance(err, redis.ConnectionError | redis.TimeoutError)
                if not retry or attempt == _ATTEMPTS - 1:
                    where = self.options.address or self.options.cluster_addresses
                    raise RedisWriteError(
                        f"redis sink '{self.sink}' could not write to {where}: {err}"
                    ) from err
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])

    def _command(self, row: Row) -> tuple[str, str | None, Any]:
        opts = self.options
        key = opts.target_key_prefix or ""
        field = None
        for option, column, name in (
            ("target.key_column", opts.target_key_column, _KEY),
            ("target.field_column", opts.target_field_column, _FIELD),
        ):
            if column is None:
                continue
            if row[name] is None:
                raise RedisWriteError(
                    f"redis sink '{self.sink}': a row's {option} '{column}' is null"
                )
            if name == _KEY:
                key += row[name]
            else:
                field = row[name]
        value = row["value"]
        return key, field, bytes(value) if isinstance(value, bytearray) else value

    def _write(self, batch: list[tuple[str, str | None, Any]]) -> None:
        opts = self.options
        redis = client(opts)
        try:
            pipe = redis.pipeline(transaction=False)
            touched: dict[str, None] = {}
            for i, (key, field, value) in enumerate(batch, 1):
                if opts.target == "string":
                    pipe.set(key, value, ex=opts.target_ttl_secs)
                elif opts.target == "list":
                    (pipe.rpush if opts.target_operation == "append" else pipe.lpush)(key, value)
                    touched[key] = None
                else:
                    pipe.hset(key, field, value)
                    touched[key] = None
                if i % _FLUSH_EVERY == 0:
                    pipe.execute()
            for key in touched:
                if opts.target_max_length is not None:
                    keep = opts.target_max_length
                    if opts.target_operation == "append":
                        pipe.ltrim(key, -keep, -1)  # the newest are at the end
                    else:
                        pipe.ltrim(key, 0, keep - 1)
                if opts.target_ttl_secs is not None:
                    pipe.expire(key, opts.target_ttl_secs)
            pipe.execute()
        finally:
            redis.close()


def write_redis(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: RedisOptions
) -> DataStreamWriter:
    """The sink of a streaming query: each micro-batch's rows, encoded in the table's format,
    written by the executors (``PartitionWriter``)."""
    from pyspark.sql import functions as F

    from arroyo.connectors.runtime.sinks import write_partitions
    from arroyo.formats.codec import encode
    from arroyo.program.names import quote_name

    # The key and field columns beside the record, under names no table column has.
    beside = {
        name: column
        for name, column in ((_KEY, opts.target_key_column), (_FIELD, opts.target_field_column))
        if column
    }
    carried = df.select("*", *[F.col(quote_name(c)).alias(n) for n, c in beside.items()])
    encoded = encode(carried, table, beside=list(beside))
    return write_partitions(encoded, PartitionWriter(table.name, opts))


# Clients of this process (a Python worker's), by the connection's options: a lookup keeps its
# connection from batch to batch.
_CLIENTS: dict[str, Any] = {}
_MGET_KEYS = 1_000


@dataclass(frozen=True)
class RedisLookup:
    """A lookup table's records by key: MGET, a thousand keys at a time; pickled to the
    executors."""

    table: str
    options: RedisOptions

    def __call__(self, keys: list[str]) -> list[str | bytes | None]:
        import redis
        from redis.cluster import RedisCluster
        from redis.exceptions import RedisClusterException

        opts = self.options
        ident = opts.model_dump_json(
            include={"address", "cluster_addresses", "username", "password"}
        )
        where = opts.address or opts.cluster_addresses
        for attempt in range(_ATTEMPTS):
            try:
                found = _CLIENTS.get(ident)
                if found is None:
                    found = _CLIENTS[ident] = client(opts)
                # A cluster's keys are on many nodes: one MGET per node holding some.
                mget = found.mget_nonatomic if isinstance(found, RedisCluster) else found.mget
                values: list[str | bytes | None] = []
                for start in range(0, len(keys), _MGET_KEYS):
                    values.extend(mget(keys[start : start + _MGET_KEYS]))
                return values
            except (redis.ConnectionError, redis.TimeoutError) as err:
                stale = _CLIENTS.pop(ident, None)
                if stale is not None:
                    stale.close()
                if attempt == _ATTEMPTS - 1:
                    raise RedisReadError(
                        f"redis lookup table '{self.table}' could not read from {where}: {err}"
                    ) from err
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            except (redis.RedisError, RedisClusterException) as err:
                raise RedisReadError(
                    f"redis lookup table '{self.table}' could not read from {where}: {err}"
                ) from err
        raise AssertionError("unreachable")
