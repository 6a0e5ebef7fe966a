"""The RabbitMQ Streams source: a stream's messages with their stream offsets as Spark's
offsets, so a micro-batch replayed after a crash is read again from the stream itself.

The reader (on the driver) keeps a consumer subscribed from where the pipeline's offsets say
(a new pipeline: ``source.offset``), buffering messages until a micro-batch takes them. A batch
replayed after a restart (``readBetweenOffsets``) is read by a consumer of its own from its
first offset to its last. Offsets: ``{"offset": the next to read}``; a new pipeline's first
batch starts at -1 (wherever ``source.offset`` put it) and its end also records the offset it
began at (``from``), so that it can be replayed exactly.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, SimpleDataSourceStreamReader

from arroyo.connectors.rabbitmq.options import RabbitmqConnection, RabbitmqOptions
from arroyo.connectors.runtime.arrow_rows import TIMESTAMP, batches
from arroyo.connectors.runtime.spool import StoppingWrapper

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

CONNECT_TIMEOUT_S = 10.0
REPLAY_TIMEOUT_S = 60.0
_BATCH_ROWS = 100_000
_SCHEMA = pa.schema(
    [
        ("_offset", pa.int64()),
        ("_source_time", TIMESTAMP),
        ("value", pa.binary()),
        ("_eoi", pa.bool_()),
    ]
)


class RabbitmqError(RuntimeError):
    """A node that cannot be reached or refuses us, or a stream that does not exist."""


def _where(conn: RabbitmqConnection) -> str:
    return f"{conn.host}:{conn.port}{conn.virtual_host}"


def _ssl(conn: RabbitmqConnection) -> Any:
    if not conn.tls_enabled:
        return None
    import ssl

    context = ssl.create_default_context(cafile=conn.tls_root_certificates_path)
    if conn.tls_trust_certificates:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if conn.tls_client_certificates_path:
        context.load_cert_chain(conn.tls_client_certificates_path, conn.tls_client_keys_path)
    return context


def _spec(opts: RabbitmqOptions, offset: int) -> Any:
    from rstream import ConsumerOffsetSpecification, OffsetType

    if offset >= 0:
        return ConsumerOffsetSpecification(OffsetType.OFFSET, offset)
    named = {"first": OffsetType.FIRST, "last": OffsetType.LAST, "next": OffsetType.NEXT}
    if opts.source_offset in named:
        return ConsumerOffsetSpecification(named[opts.source_offset], None)
    when = datetime.fromisoformat(opts.source_offset)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return ConsumerOffsetSpecification(OffsetType.TIMESTAMP, int(when.timestamp() * 1000))


class _Consumer:
    """A consumer of the stream from ``offset`` (-1: as ``source.offset`` says) on a loop of
    its own, calling ``on_message(offset, body, time)``."""

    def __init__(self, opts: RabbitmqOptions, offset: int, on_message: Any) -> None:
        from arroyo.connectors.runtime.loop import Loop

        self.loop = Loop()
        try:
            self.consumer = self.loop.run(self._start(opts, offset, on_message), 30)
        except Exception as err:
            self.loop.close()
            raise RabbitmqError(
                f"cannot read stream '{opts.stream}' at {_where(opts)}: {err or type(err).__name__}"
            ) from err

    async def _start(self, opts: RabbitmqOptions, offset: int, on_message: Any) -> Any:
        import asyncio

        from rstream import Consumer

        consumer = Consumer(
            opts.host,
            opts.port,
            username=opts.username,
            password=opts.password,
            vhost=opts.virtual_host,
            ssl_context=_ssl(opts),
            load_balancer_mode=opts.load_balancer_mode,
            max_retries=1,
        )
        await asyncio.wait_for(consumer.start(), CONNECT_TIMEOUT_S)
        if not await consumer.stream_exists(opts.stream):
            await consumer.close()
            raise RabbitmqError(f"no stream named '{opts.stream}'")

        async def callback(message: Any, context: Any) -> None:
            body = message.body if hasattr(message, "body") else message
            if isinstance(body, list):
                body = b"".join(bytes(b) for b in body)
            on_message(context.offset, bytes(body), getattr(context, "timestamp", None))

        await consumer.subscribe(
            opts.stream, callback, offset_specification=_spec(opts, offset), initial_credit=64
        )
        return consumer

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a consumer whose node went away
            self.loop.run(self.consumer.close(), 10)
        self.loop.close()


# How far back a sample looks for the newest messages; the pause in their arrival that says
# the consumer has caught up, and how long it waits for a first one once subscribed.
_SAMPLE_WINDOW_S = 3600.0
_SAMPLE_QUIET_S = 0.5
_SAMPLE_FIRST_S = 2.0


def newest_messages(opts: RabbitmqOptions, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the stream's newest messages (of the last hour): a consumer of its
    own from an hour ago, read until it has caught up (nothing new for half a second; nothing
    at all for two seconds once subscribed) or ``timeout_s`` has passed. No offset is stored
    on the server (the source keeps its own in checkpoints), so no reader's position moves."""
    got: list[bytes] = []
    lock = threading.Lock()
    last: list[float] = []  # when the latest message came

    def on_message(offset: int, body: bytes, at_ms: int | None) -> None:
        with lock:
            got.append(body)
            del got[:-count]
            last[:] = [time.monotonic()]

    since = datetime.now(UTC).timestamp() - _SAMPLE_WINDOW_S
    start = datetime.fromtimestamp(since, UTC).isoformat()
    began = time.monotonic()
    consumer = _Consumer(opts.model_copy(update={"source_offset": start}), -1, on_message)
    subscribed = time.monotonic()
    try:
        while time.monotonic() < began + timeout_s:
            with lock:
                if last and time.monotonic() - last[0] >= _SAMPLE_QUIET_S:
                    break
                if not last and time.monotonic() - subscribed >= _SAMPLE_FIRST_S:
                    break
            time.sleep(0.05)
    finally:
        consumer.close()
    with lock:
        return list(got)


def _row(offset: int, body: bytes, at_ms: int | None) -> tuple[Any, ...]:
    seconds = (at_ms if at_ms is not None else time.time() * 1000) / 1000
    return (offset, datetime.fromtimestamp(seconds, UTC), body, False)


class _Reader(SimpleDataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it: the consumer is made there.
        self.opts = RabbitmqOptions.model_validate(json.loads(options["options"]))
        self._consumer: _Consumer | None = None
        self._buffer: list[tuple[int, bytes, int | None]] = []
        self._lock: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_consumer": None, "_buffer": [], "_lock": None}

    def initialOffset(self) -> dict[str, int]:
        return {"offset": -1}

    def _subscribed(self, offset: int) -> None:
        if self._consumer is not None:
            return
        self._lock = threading.Lock()

        def on_message(at: int, body: bytes, when: int | None) -> None:
            with self._lock:
                self._buffer.append((at, body, when))

        self._consumer = _Consumer(self.opts, offset, on_message)

    def read(self, start: dict[str, int]) -> tuple[Iterator[pa.RecordBatch], dict[str, int]]:
        begin = start["offset"]
        self._subscribed(begin)
        with self._lock:
            taken = [m for m in self._buffer if m[0] >= begin][:_BATCH_ROWS]
        if not taken:
            return iter([]), start
        end = {"offset": taken[-1][0] + 1}
        if begin < 0:
            end["from"] = taken[0][0]
        return batches(_SCHEMA, [_row(*m) for m in taken]), end

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[pa.RecordBatch]:
        begin = start["offset"] if start["offset"] >= 0 else end.get("from", 0)
        last = end["offset"] - 1
        got: dict[int, tuple[int, bytes, int | None]] = {}
        done = threading.Event()

        def on_message(at: int, body: bytes, when: int | None) -> None:
            if begin <= at <= last:
                got[at] = (at, body, when)
            if at >= last:
                done.set()

        consumer = _Consumer(self.opts, begin, on_message)
        try:
            if not done.wait(REPLAY_TIMEOUT_S):
                raise RabbitmqError(
                    f"stream '{self.opts.stream}' at {_where(self.opts)} did not give offsets "
                    f"{begin} to {last} again within {REPLAY_TIMEOUT_S:.0f} s"
                )
        finally:
            consumer.close()
        return batches(_SCHEMA, [_row(*got[k]) for k in sorted(got)])

    def commit(self, end: dict[str, int]) -> None:
        if self._lock is None:
            return
        with self._lock:
            self._buffer = [m for m in self._buffer if m[0] >= end["offset"]]

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class RabbitmqSource(DataSource):
    """Options: ``options`` (the table's, as JSON)."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_rabbitmq"

    def schema(self) -> str:
        return (
            "`_offset` BIGINT, `_source_time` TIMESTAMP, `value` BINARY, `_eoi` BOOLEAN"  # _SCHEMA
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StoppingWrapper(_Reader(dict(self.options)))


def read_rabbitmq(ctx: ReadContext, table: TableSpec, opts: RabbitmqOptions) -> DataFrame:
    """The stream's messages as ``value``, each one's stream time as the source time, and its
    offset as the ``offset`` metadata."""
    ctx.spark.dataSource.register(RabbitmqSource)
    df = (
        ctx.spark.readStream.format(RabbitmqSource.name())
        .option("options", opts.model_dump_json(by_alias=True))
        .load()
    )
    return df.select("value", "_source_time", "_eoi", df["_offset"].alias("_meta_offset"))
