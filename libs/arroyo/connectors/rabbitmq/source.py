"""The RabbitMQ Streams source: a stream's messages with their stream offsets as Spark's
offsets, read by Spark's tasks, a range of offsets each, so a micro-batch replayed after a crash
is read again from the stream itself.

The driver reads no message. It follows where the stream ends from chunk headers (``Tail``)
and says where each micro-batch ends: at most ``max_records`` past the last one's end, within
what the stream has written. Each task subscribes at its range's first offset and turns the
chunks it is given into Arrow batches (``chunks.read_range``), so the messages are read once,
in parallel, where Spark uses them.

Offsets: ``{"offset": the next to read}``. A new pipeline starts at -1 and its first batch's
end also records where ``source.offset`` put the start (``from``): the first chunk given to a
subscription from ``source.offset``. Spark asks a reader for its latest offset before it says
where the batch starts (and, after a restart past a committed batch, never says), so the reader
keeps the end of the last batch it was asked to read in the table's state (``planned``): with
it, a restarted reader knows where the next batch starts; without it, the pipeline is new.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from arroyo.connectors.rabbitmq.chunks import (
    CONNECT_TIMEOUT_S,
    RabbitmqError,
    Tail,
    newest_messages,
    read_range,
    where,
)
from arroyo.connectors.rabbitmq.options import RabbitmqOptions
from arroyo.connectors.runtime.remote_state import write_durably
from arroyo.connectors.runtime.spool import hold
from arroyo.formats import arrow_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

__all__ = ["RabbitmqError", "RabbitmqSource", "newest_messages", "read_rabbitmq"]

# Records in a micro-batch, at most (unless the pipeline caps it lower).
MAX_RECORDS = 1_000_000
# Offsets a task reads, at least: a smaller batch is one task's.
_MIN_RANGE = 10_000
# How long a new subscription is given for its first chunk before the reader answers Spark
# (a stream that has messages gives one in milliseconds; one with none, never).
_FIRST_CHUNK_S = 0.5


def _start_spec(opts: RabbitmqOptions) -> tuple[str, int | None]:
    """Where ``source.offset`` starts a new pipeline, as a subscription's offset spec."""
    if opts.source_offset in ("first", "last", "next"):
        return opts.source_offset, None
    when = datetime.fromisoformat(opts.source_offset)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return "timestamp", int(when.timestamp() * 1000)


class OffsetRange(InputPartition):
    """A task's part of a micro-batch: the records at offsets [begin, end)."""

    def __init__(self, begin: int, end: int) -> None:
        super().__init__((begin, end))
        self.begin, self.end = begin, end


def split(begin: int, end: int, parts: int) -> list[OffsetRange]:
    """[begin, end) in up to ``parts`` ranges of nearly equal size, none under _MIN_RANGE."""
    if end <= begin:
        return []
    count = max(1, min(parts, (end - begin) // _MIN_RANGE))
    bounds = [begin + (end - begin) * i // count for i in range(count + 1)]
    return [OffsetRange(lo, hi) for lo, hi in itertools.pairwise(bounds)]


class _Reader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it (the driver's Python worker, or a task's).
        self.opts = RabbitmqOptions.model_validate(json.loads(options["options"]))
        self.parallelism = int(options["parallelism"])
        self.max_records = int(options["max_records"])
        self.decode = arrow_json.parse_option(options.get(arrow_json.OPTION))
        self._state = Path(options["state"]) / "planned"
        self._held: Any = None  # the table state's lock, while this reader plans its batches
        self._start: Tail | None = None  # a new pipeline's: where source.offset points
        self._from: int | None = None
        self._tail: Tail | None = None
        self._planned: int | None = None  # the end of the last batch Spark planned

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_start": None, "_tail": None, "_held": None}

    def _hold(self) -> None:
        """The one reader of the table's state: a second (another query reading the table, or
        the pipeline running twice) would take the first's planned end for its own."""
        if self._held is None:
            self._held = hold(self._state.parent, f"RabbitMQ stream '{self.opts.stream}''s state")

    def initialOffset(self) -> dict[str, int]:
        return {"offset": -1}

    def _what(self) -> str:
        return f"stream '{self.opts.stream}' at {where(self.opts)}"

    def _fewer(self, end: int, read: int) -> RabbitmqError:
        return RabbitmqError(
            f"{self._what()} ends at offset {end}, before the checkpoint's {read}: it holds "
            "fewer messages than were read (was it deleted and made again?)"
        )

    def _latest(self) -> int | None:
        """The end of what the stream has written, as far as is known."""
        if self._tail is None:
            self._tail = Tail(self.opts, "last", None)
            self._tail.wait(_FIRST_CHUNK_S)
        if self._tail.failure is not None:
            raise RabbitmqError(f"{self._what()}: {self._tail.failure}")
        ends = [t.end for t in (self._tail, self._start) if t is not None and t.end is not None]
        return max(ends, default=None)

    def _resolve_start(self) -> int | None:
        """A new pipeline's first offset, once a chunk has come where source.offset points."""
        if self._from is None:
            if self._start is None:
                self._start = Tail(self.opts, *_start_spec(self.opts))
                self._start.wait(_FIRST_CHUNK_S)
            self._from = self._start.first
        return self._from

    def latestOffset(self) -> dict[str, int]:
        self._hold()
        if self._planned is None:
            try:
                self._planned = int(self._state.read_text())
            except FileNotFoundError:
                return self._first_batch()
            return self._next_batch(resumed=True)
        return self._next_batch(resumed=False)

    def _first_batch(self) -> dict[str, int]:
        """A new pipeline's first batch, once the stream has a message past its start."""
        begin = self._resolve_start()
        latest = self._latest()
        if begin is None or latest is None or latest <= begin:
            return {"offset": -1}
        return {"offset": min(latest, begin + self.max_records), "from": begin}

    def _next_batch(self, resumed: bool) -> dict[str, int]:
        assert self._planned is not None
        latest = self._latest()
        if resumed:
            # The node followed may be a replica still catching up: given a while to reach
            # what was read before it is taken for a stream made again.
            deadline = time.monotonic() + CONNECT_TIMEOUT_S
            while (latest is None or latest < self._planned) and time.monotonic() < deadline:
                time.sleep(0.1)
                latest = self._latest()
            if latest is None or latest < self._planned:
                raise self._fewer(latest or 0, self._planned)
        if latest is not None:
            self._planned = max(self._planned, min(latest, self._planned + self.max_records))
        return {"offset": self._planned}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        self._hold()
        if end["offset"] < 0:
            # A new pipeline's first batch, which Spark runs even with nothing in it: its
            # start is not known yet.
            return []
        begin = start["offset"] if start["offset"] >= 0 else end["from"]
        last = end["offset"]
        if last < begin:
            raise self._fewer(last, begin)
        if self._planned is None or last > self._planned:
            self._planned = last
        # Spark asks for a latest offset only once every batch it planned has committed (one
        # it has not is planned again, from its offsets), so a restarted reader that is asked
        # starts where this says.
        write_durably(self._state, str(last))
        if self._start is not None:  # the start is known for good now
            self._start.close(wait=False)
            self._start = None
        return list(split(begin, last, self.parallelism))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.opts, partition.begin, partition.end, self.decode)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the offsets are the checkpoint's, and nothing is buffered."""

    def stop(self) -> None:
        for tail in (self._start, self._tail):
            if tail is not None:
                tail.close()
        self._start = self._tail = None
        if self._held is not None:
            self._held.close()
            self._held = None


class RabbitmqSource(DataSource):
    """Options: ``options`` (the table's, as JSON), ``parallelism`` (tasks per micro-batch, at
    most) and ``max_records`` (records per micro-batch, at most)."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_rabbitmq"

    def schema(self) -> str:
        schema = "`_offset` BIGINT, `_source_time` TIMESTAMP, `value` BINARY, `_eoi` BOOLEAN"
        decode = arrow_json.parse_option(self.options.get(arrow_json.OPTION))
        return f"{schema}, {arrow_json.spark_fields(decode)}" if decode else schema

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(dict(self.options))


def read_rabbitmq(ctx: ReadContext, table: TableSpec, opts: RabbitmqOptions) -> DataFrame:
    """The stream's messages as ``value``, each one's stream time (its chunk's) as the source
    time, and its offset as the ``offset`` metadata; their JSON decoded by the tasks that read
    them where the table's columns permit (``arroyo.formats.arrow_json``)."""
    ctx.spark.dataSource.register(RabbitmqSource)
    df = (
        ctx.spark.readStream.format(RabbitmqSource.name())
        .option("options", opts.model_dump_json(by_alias=True))
        .option("parallelism", str(ctx.parallelism))
        .option("max_records", str(ctx.max_records_per_batch or MAX_RECORDS))
        .option("state", str(ctx.state_dir.resolve() / f"query-{ctx.query}"))
        .option(arrow_json.OPTION, arrow_json.option(table))
        .load()
    )
    offset = df["_offset"].alias("_meta_offset")
    return df.select("value", "_source_time", "_eoi", offset, *arrow_json.carried(df.columns))
