"""A spool: messages of a source that cannot replay (MQTT, NATS), written to files in the
table's state before the system's delivery is acknowledged, so that Spark's offsets (positions
in the spool) replay a micro-batch exactly.

A record is handed to the operating system before ``append`` returns, or, for a source that
acknowledges nothing (``flush=False``), before any reader reads it; ``sync`` makes what was
appended durable (fsync) before a source acknowledges it to its system. Segment files are
named by their first byte's position; positions run on across segments and restarts, and
segments wholly before a committed position are removed.
A record may hold several messages, none with a line break, one a line (``append_lines``: a
run of server-sent events, as they came), which reading gives one by one.
A record may carry the system's own sequence number (JetStream's), so that a message delivered
again after a crash between the spool write and the acknowledgement is recognised
(``sequences``) and not spooled twice.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

from arroyo.formats import arrow_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

_HEADER = struct.Struct("<IqqI")  # topic length, time in ms, sequence (-1: none), payload length
# The sequence of a record that holds several messages, one a line (``append_lines``).
_LINES = -2
_SEGMENT_BYTES = 64 * 1024 * 1024
# The most a micro-batch takes of the spool (the rest waits for the next batch).
BATCH_BYTES = 64 * 1024 * 1024
# How often the writer remembers where a record ends, to end a batch there.
_MARK_BYTES = 1024 * 1024
# The file that holds the position the spool was last cut at (what a checkpoint committed).
_COMMITTED = "committed"


def _whole_records(path: Path, repair: bool) -> int:
    """The length of ``path``'s whole records. A record cut short by a crash mid-write (its
    message was never acknowledged, so the broker sends it again) is cut off the file when
    ``repair`` (by the one writer, holding the spool's lock: another process may be writing)."""
    size = path.stat().st_size
    whole = 0
    with path.open("rb") as f:
        while whole + _HEADER.size <= size:
            f.seek(whole)
            topic_len, _at, _sequence, length = _HEADER.unpack(f.read(_HEADER.size))
            following = whole + _HEADER.size + topic_len + length
            if following > size:
                break
            whole = following
    if whole < size and repair:
        with path.open("r+b") as f:
            f.truncate(whole)
    return whole


def _must_be_here(root: Path) -> None:
    if not root.is_dir():
        raise RuntimeError(
            f"the spool {root} is not here: a spooled source's batches are read where its "
            "pipeline's driver runs (local mode or a single machine)"
        )


def read_records(root: Path, start: int, end: int) -> Iterator[tuple[str, int, bytes]]:
    """The messages in [start, end) of the spool at ``root`` (``start`` a record's start, ``end``
    a record's end, both flushed): each segment's part read whole, then split."""
    _must_be_here(root)
    unpack, header = _HEADER.unpack_from, _HEADER.size
    for first in sorted(int(p.stem) for p in root.glob("*.log")):
        path = root / f"{first:020d}.log"
        size = path.stat().st_size
        if first + size <= start or first >= end:
            continue
        begin = max(start, first)
        with path.open("rb") as f:
            f.seek(begin - first)
            data = f.read(min(end, first + size) - begin)
        pos, stop = 0, len(data)
        while pos + header <= stop:
            topic_len, at_ms, sequence, length = unpack(data, pos)
            topic_at = pos + header
            payload_at = topic_at + topic_len
            pos = payload_at + length
            if pos > stop:  # cut short (by a crash, or being written): not a whole record
                return
            topic = data[topic_at:payload_at].decode("utf-8", "replace")
            if sequence == _LINES:
                for line in data[payload_at:pos].split(b"\n"):
                    yield topic, at_ms, line
            else:
                yield topic, at_ms, data[payload_at:pos]


class Spool:
    """Messages appended to segment files named by their first byte's position (offsets run on
    across segments and restarts); segments wholly before a committed position are removed."""

    def __init__(
        self, root: Path, *, writer: bool = True, segment_bytes: int = _SEGMENT_BYTES
    ) -> None:
        """``writer``: this one appends (holding the spool's lock), and cuts off a record left
        half written; a reader's spool only reads up to it. A segment is closed once it holds
        ``segment_bytes``."""
        self.root = root
        self.segment_bytes = segment_bytes
        if writer:
            root.mkdir(parents=True, exist_ok=True)
        else:
            _must_be_here(root)
        self.lock = threading.Lock()
        starts = self.segments()
        self.start = starts[0] if starts else 0
        last = starts[-1] if starts else 0
        self.end = last + (_whole_records(self._path(last), writer) if starts else 0)
        self._file: Any = None
        self._file_start = last
        # Record ends about every _MARK_BYTES appended in this run (``boundary``).
        self._marks: list[int] = []

    def segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self.root.glob("*.log"))

    def _path(self, start: int) -> Path:
        return self.root / f"{start:020d}.log"

    def append(
        self, topic: str, at_ms: int, payload: bytes, sequence: int = -1, *, flush: bool = True
    ) -> None:
        """``flush``: to the operating system before returning; without it, the writer calls
        ``flush`` before anything reads what it appended, and readers read up to what that
        returns (a source that acknowledges nothing saves a system call per message)."""
        self._append(topic, at_ms, [payload], sequence, flush)

    def append_many(self, topic: str, at_ms: int, payloads: list[bytes]) -> None:
        """``append`` of each of ``payloads`` (without ``flush``, no sequence), in one write."""
        self._append(topic, at_ms, payloads, -1, False)

    def append_lines(self, topic: str, at_ms: int, lines: bytes) -> None:
        """``append`` (without ``flush``) of the messages ``lines`` holds, one a line (none
        holds a line break), as one record: reading gives each line as a message."""
        self._append(topic, at_ms, [lines], _LINES, False)

    def _append(
        self, topic: str, at_ms: int, payloads: list[bytes], sequence: int, flush: bool
    ) -> None:
        """A record of each of ``payloads``, in one write; the positions and the marks (a
        record end about every _MARK_BYTES) move on once it is written."""
        name = topic.encode()
        pack, topic_len = _HEADER.pack, len(name)
        parts: list[bytes] = []
        marks: list[int] = []
        with self.lock:
            file = self._segment()
            end = self.end
            mark = self._marks[-1] if self._marks else 0
            for payload in payloads:
                parts += (pack(topic_len, at_ms, sequence, len(payload)), name, payload)
                end += _HEADER.size + topic_len + len(payload)
                if end - mark >= _MARK_BYTES:
                    marks.append(end)
                    mark = end
            file.write(b"".join(parts))
            if flush:
                file.flush()
            # Once written: a failed write leaves no mark or position past what is there.
            self._marks += marks
            self.end = end

    def _segment(self) -> Any:
        """The segment file to append to (holding the lock): a new one once the open one
        holds ``segment_bytes``."""
        if self._file is None or self.end - self._file_start >= self.segment_bytes:
            if self._file is not None:
                # Durable before it is let go: ``sync`` reaches the open segment only.
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            self._file_start = self.end
            self._file = self._path(self.end).open("ab")
        return self._file

    def flush(self) -> int:
        """What was appended without ``flush``, handed to the operating system; the end of
        the whole records flushed (a record appended after it may be partly written)."""
        with self.lock:
            if self._file is not None:
                self._file.flush()
            return self.end

    def read(self, start: int, end: int) -> Iterator[tuple[str, int, bytes]]:
        """The messages in [start, end)."""
        return read_records(self.root, start, end)

    def sequences(self) -> set[int]:
        """The sequence numbers of the records spooled (in the segments not yet removed)."""
        found = set()
        for first in self.segments():
            path = self._path(first)
            with path.open("rb") as f:
                while head := f.read(_HEADER.size):
                    if len(head) < _HEADER.size:
                        break
                    topic_len, _at, sequence, length = _HEADER.unpack(head)
                    f.seek(topic_len + length, 1)
                    if sequence >= 0:
                        found.add(sequence)
        return found

    def last_sequence(self) -> int:
        """The highest sequence number spooled (-1: none)."""
        return max(self.sequences(), default=-1)

    def sync(self) -> None:
        """Makes what was appended durable (flushed and fsynced), before a system is told it
        was received."""
        with self.lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())

    @staticmethod
    def size(topic: str, payload: bytes) -> int:
        """The bytes a record of ``topic`` and ``payload`` takes."""
        return _HEADER.size + len(topic.encode()) + len(payload)

    def committed(self) -> int:
        """The position ``cut`` was last given (0: never)."""
        try:
            return int((self.root / _COMMITTED).read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def boundary(self, begin: int, most: int, end: int) -> int:
        """The end of the records from ``begin`` (a record's start) that fit in ``most``
        bytes, up to ``end`` (a record's end), or of the first record if it alone is larger."""
        if end - begin <= most:
            return end
        with self.lock:
            marks = [m for m in self._marks if begin < m <= begin + most]
        if marks:
            return marks[-1]
        # Written before this run (no marks): the records' lengths, from their headers.
        pos = begin
        for first in self.segments():
            path = self._path(first)
            size = path.stat().st_size
            if first + size <= pos:
                continue
            with path.open("rb") as f:
                while pos < min(end, first + size):
                    f.seek(pos - first)
                    topic_len, _at, _sequence, length = _HEADER.unpack(f.read(_HEADER.size))
                    following = pos + _HEADER.size + topic_len + length
                    if following - begin > most and pos > begin:
                        return pos
                    pos = following
        return pos

    def split(self, begin: int, end: int, parts: int) -> list[int]:
        """Record ends strictly between ``begin`` and ``end`` that cut it into up to ``parts``
        ranges of about equal size: the marks of this run nearest each even cut (none where
        no mark falls between: records written before this run)."""
        with self.lock:
            marks = [m for m in self._marks if begin < m < end]
        cuts: list[int] = []
        for i in range(1, parts):
            ideal = begin + (end - begin) * i // parts
            near = min(marks, key=lambda m: abs(m - ideal), default=None)
            if near is not None and near > (cuts[-1] if cuts else begin):
                cuts.append(near)
        return cuts

    def cut(self, committed: int) -> None:
        """Removes the segments wholly before ``committed``, and remembers it
        (``committed``)."""
        marker = self.root / _COMMITTED
        partial = marker.with_suffix(".tmp")
        partial.write_text(str(committed))
        os.replace(partial, marker)
        with self.lock:
            self._marks = [m for m in self._marks if m > committed]
            starts = self.segments()
            for i, first in enumerate(starts):
                following = starts[i + 1] if i + 1 < len(starts) else self.end
                if following <= committed and first != self._file_start:
                    self._path(first).unlink(missing_ok=True)


class SpoolRange(InputPartition):
    """A micro-batch's part of a spool: the records in [start, end) of the spool at ``root``."""

    def __init__(self, root: str, start: int, end: int) -> None:
        super().__init__((root, start, end))
        self.root, self.start, self.end = root, start, end


class SpooledReader(DataSourceStreamReader):
    """A streaming reader over a spool: ``connect`` starts the system's subscriber, which
    appends to the spool (on the first ``latestOffset``, never while planning); offsets are
    spool positions. The driver only says where each micro-batch ends; the batch's task reads
    its records from the spool in an executor, as Arrow batches (``read``), which costs a third
    of what a simple reader's batch, handed over by the driver, costs Spark. So the spool must
    be where the executors run: local mode, or one machine (elsewhere, ``DriverReads``).
    Rows: ``_topic``, ``_source_time`` (when the message reached the spool), ``value``,
    ``_eoi``, ``_meta_topic`` (and the decoded columns, ``arroyo.formats.arrow_json``).
    Options: ``spool`` (its directory), ``parallelism`` (tasks a micro-batch is read by, at
    most), ``decode_json``."""

    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it: the spool and the client are made there.
        self.root = Path(options["spool"])
        # The table's columns, when the reader decodes its JSON records (arroyo.formats.
        # arrow_json).
        self.decode = arrow_json.parse_option(options.get(arrow_json.OPTION))
        self.parallelism = int(options.get("parallelism", "1"))
        self._spool: Spool | None = None
        self.client: Any = None
        self._lock: Any = None
        self._failure: BaseException | None = None
        # The end of the last micro-batch Spark planned (None: none yet in this run).
        self._planned: int | None = None

    def connect(self, spool: Spool) -> Any:
        raise NotImplementedError

    def disconnect(self, client: Any) -> None:
        raise NotImplementedError

    def before_batch(self, begin: int) -> None:
        """Called on the driver as each micro-batch is planned, before the subscriber starts
        on the first: ``begin`` is where the batch starts."""

    @property
    def spool(self) -> Spool:
        if self._spool is None:
            self._spool = Spool(self.root, writer=self._lock is not None)
        return self._spool

    def fail(self, err: BaseException) -> None:
        """Records that the subscriber stopped for good: the next read raises it."""
        if self._failure is None:
            self._failure = err

    @property
    def failure(self) -> BaseException | None:
        """What stopped the subscriber for good, if it has stopped."""
        return self._failure

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spool": None, "client": None, "_lock": None, "_failure": None}

    def initialOffset(self) -> dict[str, int]:
        """A new checkpoint over a spool an earlier one read: after what that one committed."""
        if not self.root.is_dir():
            return {"pos": 0}
        return {"pos": max(self.spool.committed(), self.spool.start)}

    def _own(self) -> Spool:
        """The spool, as its one writer (holding its lock)."""
        if self._lock is None:
            self._lock = hold(self.root, "the spool")
            self._spool = None  # read again, now that no other reader writes to it
            self._failure = None
        return self.spool

    def subscribe(self) -> None:
        """Starts the subscriber, once; raises what stopped it."""
        if self.client is None:
            self.client = self.connect(self._own())
        failure = self._failure
        if failure is not None:
            raise RuntimeError(f"the source's subscriber stopped: {failure}") from failure

    def latestOffset(self) -> dict[str, int]:
        """Up to BATCH_BYTES past where the last batch ended, at a record's end, of what is
        flushed. After a restart Spark tells the reader where that was where it can
        (``partitions`` of its latest batch, before any ``latestOffset``); else the committed
        position, at or before Spark's start."""
        spool = self._own()
        if self._planned is None:
            self._planned = max(spool.committed(), spool.start)
        begin = self._planned
        self.before_batch(begin)
        self.subscribe()
        if not spool.start <= begin <= spool.end:
            raise RuntimeError(
                f"the checkpoint is at position {begin} of the spool {self.root}, which "
                f"holds {spool.start} to {spool.end}: the spool lost what the checkpoint counts"
            )
        self._planned = spool.boundary(begin, BATCH_BYTES, spool.flush())
        return {"pos": self._planned}

    def planned_up_to(self, pos: int) -> None:
        """Spark has planned batches up to ``pos`` (after a restart, its latest batch first)."""
        if self._planned is None or pos > self._planned:
            self._planned = pos

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        self.planned_up_to(end["pos"])
        begin, last = start["pos"], end["pos"]
        if last <= begin:
            return []
        # A task a range, read side by side (cut where this run marked record ends).
        bounds = [begin, *self.spool.split(begin, last, self.parallelism), last]
        return [SpoolRange(str(self.root), lo, hi) for lo, hi in itertools.pairwise(bounds)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SpoolRange)
        records = read_records(Path(partition.root), partition.start, partition.end)
        yield from spooled_batches(records, self.decode)

    def commit(self, end: dict[str, int]) -> None:
        self.spool.cut(end["pos"])

    def stop(self) -> None:
        if self.client is not None:
            self.disconnect(self.client)
            self.client = None
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None


# How long a reader waits for the one before it (of a query that stopped) to let go.
_LOCK_WAIT_S = 60.0


def hold(root: Path, what: str) -> Any:
    """The lock of the table state ``root`` (``what`` it is, for the message), held by the one
    reader that keeps it (an open file: closing it lets go); raises if another holds it past
    _LOCK_WAIT_S."""
    import fcntl
    import time

    root.mkdir(parents=True, exist_ok=True)
    handle = (root / ".lock").open("a")
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise RuntimeError(
                    f"another reader still holds {what} {root} after {_LOCK_WAIT_S:.0f} s (is "
                    "the pipeline running twice, or do two queries read the table?)"
                ) from None
            time.sleep(0.1)


class StoppingWrapper(_SimpleStreamReaderWrapper):
    """PySpark's wrapper of a simple stream reader, which does not pass ``stop`` on: a spooled
    reader's subscriber must end with its query, not live on in a reused Python worker."""

    def stop(self) -> None:
        stop = getattr(self.simple_reader, "stop", None)
        if callable(stop):
            stop()


class DriverReads(SimpleDataSourceStreamReader):
    """A spooled reader for a Spark whose executors may not see the spool (on other
    machines): the driver reads each batch from the spool and hands it to Spark as a simple
    reader's batch (a third slower in Spark), a replayed one too (``DriverReadsWrapper``)."""

    def __init__(self, reader: SpooledReader) -> None:
        self.reader = reader

    def initialOffset(self) -> dict[str, int]:
        return self.reader.initialOffset()

    def read(self, start: dict[str, int]) -> tuple[Iterator[Any], dict[str, int]]:
        self.reader.planned_up_to(start["pos"])
        end = self.reader.latestOffset()
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[Any]:
        # A list: pyspark copies a simple reader's iterator to read it again.
        records = read_records(self.reader.root, start["pos"], end["pos"])
        return iter(list(spooled_batches(records, self.reader.decode)))

    def commit(self, end: dict[str, int]) -> None:
        self.reader.commit(end)

    def stop(self) -> None:
        self.reader.stop()


class DriverReadsWrapper(StoppingWrapper):
    """pyspark's wrapper of ``DriverReads``, which hands Spark every batch from the driver:
    a batch not in its cache (replayed after a restart, or one whose start the wrapper did not
    see, as after a clean stop Spark's next batch starts where the last one ended, past what was
    committed) is read then, not left to a task that may not see the spool."""

    def getCache(self, start: dict[str, int], end: dict[str, int]) -> Iterator[Any]:
        cached = super().getCache(start, end)
        if cached is not None:
            return cached
        return self.simple_reader.readBetweenOffsets(start, end)


# The Spark setting that says whether executors read a spooled source's files (default: when
# Spark runs locally, in one process).
EXECUTORS_READ_SPOOL = "spark.arroyo.spool.executorsRead"


class SpooledSource(DataSource):
    """A spooled source: its reader, ``reader_type``; options: ``spool``, ``options`` (the
    table's, as JSON), ``executors_read`` (whether Spark's tasks can read the spool's files),
    and the reader's own."""

    reader_type: ClassVar[type[SpooledReader]]

    def schema(self) -> str:
        decode = arrow_json.parse_option(self.options.get(arrow_json.OPTION))
        if decode:
            return f"{SPOOLED_SCHEMA}, {arrow_json.spark_fields(decode)}"
        return SPOOLED_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        reader = self.reader_type(dict(self.options))
        if self.options.get("executors_read", "true") == "true":
            return reader
        return DriverReadsWrapper(DriverReads(reader))


def spooled_batches(
    records: Iterator[tuple[str, int, bytes]], decode: arrow_json.Columns | None = None
) -> Iterator[Any]:
    """``records`` (a spool's) as Arrow batches of the spooled schema, of up to BATCH_ROWS
    rows each; with their JSON decoded into ``decode``'s columns, when given."""
    import pyarrow as pa

    from arroyo.connectors.runtime.arrow_rows import BATCH_ROWS, TIMESTAMP

    names = ["_topic", "_source_time", "value", "_eoi", "_meta_topic"]
    while True:
        topics, times, payloads = [], [], []
        for topic, at_ms, payload in records:
            topics.append(topic)
            times.append(at_ms * 1000)
            payloads.append(payload)
            if len(topics) == BATCH_ROWS:
                break
        if not topics:
            return
        topic_column = pa.array(topics, pa.string())
        columns = [
            topic_column,
            pa.array(times, TIMESTAMP),
            pa.array(payloads, pa.binary()),
            pa.repeat(pa.scalar(False), len(topics)),
            topic_column,
        ]
        batch = pa.RecordBatch.from_arrays(columns, names=names)
        yield arrow_json.with_decoded(batch, payloads, decode)
        if len(topics) < BATCH_ROWS:
            return


# The schema of a spooled source (SpooledReader's rows, arrow_batches's columns), and then
# the decoded columns of a source that decodes.
SPOOLED_SCHEMA = (
    "`_topic` STRING, `_source_time` TIMESTAMP, `value` BINARY, `_eoi` BOOLEAN, "
    "`_meta_topic` STRING"
)


def read_spooled(
    ctx: ReadContext, source: type[DataSource], table: TableSpec, options: str, **named: str
) -> DataFrame:
    """A spooled source's stream (``source``, a DataSource whose reader is a SpooledReader):
    its spool in the table's state, the table's ``options`` (JSON), and ``named`` options in
    which ``{ident}`` is a name stable for this pipeline and table (a persistent session's
    client id, a durable consumer's name). Its JSON records come decoded where the table's
    columns permit (``arroyo.formats.arrow_json``)."""
    import hashlib

    state = ctx.state_dir.resolve()
    ident = f"{table.name}-{hashlib.sha256(str(state).encode()).hexdigest()[:12]}"
    ctx.spark.dataSource.register(source)
    local = str(ctx.spark.conf.get("spark.master", "local")).startswith("local")
    executors_read = ctx.spark.conf.get(EXECUTORS_READ_SPOOL, str(local).lower())
    reader = (
        ctx.spark.readStream.format(source.name())
        .option("spool", str(state / "spool"))
        .option("options", options)
        .option("executors_read", str(executors_read).lower())
        .option(arrow_json.OPTION, arrow_json.option(table))
        .option("parallelism", str(ctx.parallelism))
    )
    for key, value in named.items():
        reader = reader.option(key, value.format(ident=ident))
    return reader.load()
