"""A spool: messages of a source that cannot replay (MQTT, NATS), written to files in the
table's state before the system's delivery is acknowledged, so that Spark's offsets (positions
in the spool) replay a micro-batch exactly.

A record is flushed to the operating system (not fsynced, as Kafka's own log is not) before
``append`` returns. Segment files are named by their first byte's position; positions run on
across segments and restarts, and segments wholly before a committed position are removed.
A record may carry the system's own sequence number (JetStream's), so that a message delivered
again after a crash between the spool write and the acknowledgement is recognised
(``sequences``) and not spooled twice.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext

_HEADER = struct.Struct("<IqqI")  # topic length, time in ms, sequence (-1: none), payload length
_SEGMENT_BYTES = 64 * 1024 * 1024
# The most a micro-batch takes of the spool (the rest waits for the next batch).
BATCH_BYTES = 64 * 1024 * 1024


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
        elif not root.is_dir():
            raise RuntimeError(
                f"the spool {root} is not here: a spooled source's batches are read where its "
                "pipeline's driver runs (local mode or a single machine)"
            )
        self.lock = threading.Lock()
        starts = self.segments()
        self.start = starts[0] if starts else 0
        last = starts[-1] if starts else 0
        self.end = last + (_whole_records(self._path(last), writer) if starts else 0)
        self._file: Any = None
        self._file_start = last

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
        name = topic.encode()
        record = _HEADER.pack(len(name), at_ms, sequence, len(payload)) + name + payload
        with self.lock:
            if self._file is None or self.end - self._file_start >= self.segment_bytes:
                if self._file is not None:
                    self._file.close()
                self._file_start = self.end
                self._file = self._path(self.end).open("ab")
            self._file.write(record)
            if flush:
                self._file.flush()
            self.end += len(record)

    def flush(self) -> int:
        """What was appended without ``flush``, handed to the operating system; the end of
        the whole records flushed (a record appended after it may be partly written)."""
        with self.lock:
            if self._file is not None:
                self._file.flush()
            return self.end

    def read(self, start: int, end: int) -> Iterator[tuple[str, int, bytes]]:
        """The messages in [start, end)."""
        for first in self.segments():
            path = self._path(first)
            size = path.stat().st_size
            if first + size <= start or first >= end:
                continue
            with path.open("rb") as f:
                pos = first
                if start > first:
                    f.seek(start - first)
                    pos = start
                while pos < min(end, first + size):
                    head = f.read(_HEADER.size)
                    topic_len, at_ms, _sequence, length = _HEADER.unpack(head)
                    topic = f.read(topic_len).decode("utf-8", "replace")
                    payload = f.read(length)
                    pos += _HEADER.size + topic_len + length
                    yield topic, at_ms, payload

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
        """Makes what was appended durable (fsync), before a system is told it was received."""
        with self.lock:
            if self._file is not None:
                os.fsync(self._file.fileno())

    @staticmethod
    def size(topic: str, payload: bytes) -> int:
        """The bytes a record of ``topic`` and ``payload`` takes."""
        return _HEADER.size + len(topic.encode()) + len(payload)

    def cut(self, committed: int) -> None:
        """Removes the segments wholly before ``committed``."""
        with self.lock:
            starts = self.segments()
            for i, first in enumerate(starts):
                following = starts[i + 1] if i + 1 < len(starts) else self.end
                if following <= committed and first != self._file_start:
                    self._path(first).unlink(missing_ok=True)


class SpooledReader(SimpleDataSourceStreamReader):
    """A streaming reader over a spool: ``connect`` starts the system's subscriber, which
    appends to the spool (on first read, never while planning); batches are spool positions.
    Rows: ``_topic``, ``_source_time`` (when the message reached the spool), ``value``,
    ``_eoi``, ``_meta_topic``. Options: ``spool`` (its directory)."""

    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it: the spool and the client are made there.
        self.root = Path(options["spool"])
        self._spool: Spool | None = None
        self.client: Any = None
        self._lock: Any = None
        self._failure: BaseException | None = None

    def connect(self, spool: Spool) -> Any:
        raise NotImplementedError

    def disconnect(self, client: Any) -> None:
        raise NotImplementedError

    @property
    def spool(self) -> Spool:
        if self._spool is None:
            self._spool = Spool(self.root, writer=self._lock is not None)
        return self._spool

    def fail(self, err: BaseException) -> None:
        """Records that the subscriber stopped for good: the next read raises it."""
        if self._failure is None:
            self._failure = err

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spool": None, "client": None, "_lock": None, "_failure": None}

    def initialOffset(self) -> dict[str, int]:
        return {"pos": self.spool.start if self.root.is_dir() else 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[Any], dict[str, int]]:
        begin, end = self.available(start)
        batches, end = arrow_batches(self.spool, begin, end)
        return iter(batches), {"pos": end}

    def available(self, start: dict[str, int]) -> tuple[int, int]:
        """The spool's range a read from ``start`` takes (up to BATCH_BYTES); the subscriber
        started on the first call, and its failure raised."""
        if self.client is None:
            self._lock = _hold(self.root)
            self._spool = None  # read again, now that no other reader writes to it
            self._failure = None
            self.client = self.connect(self.spool)
        failure = self._failure
        if failure is not None:
            raise RuntimeError(f"the source's subscriber stopped: {failure}") from failure
        if start["pos"] > self.spool.end:
            raise RuntimeError(
                f"the checkpoint is at position {start['pos']} of the spool {self.root}, which "
                f"ends at {self.spool.end}: the spool lost what the checkpoint counts"
            )
        begin = max(start["pos"], self.spool.start)
        return begin, min(self.spool.end, begin + BATCH_BYTES)

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[Any]:
        return iter(arrow_batches(self.spool, start["pos"], end["pos"])[0])

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


def _hold(root: Path) -> Any:
    """The spool's lock, held by the one reader that writes to it; raises if another holds it
    past _LOCK_WAIT_S."""
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
                    f"another reader still writes to the spool {root} after "
                    f"{_LOCK_WAIT_S:.0f} s (is the pipeline running twice?)"
                ) from None
            time.sleep(0.1)


class StoppingWrapper(_SimpleStreamReaderWrapper):
    """PySpark's wrapper of a simple stream reader, which does not pass ``stop`` on: a spooled
    reader's subscriber must end with its query, not live on in a reused Python worker."""

    def stop(self) -> None:
        stop = getattr(self.simple_reader, "stop", None)
        if callable(stop):
            stop()


def arrow_batches(spool: Spool, begin: int, end: int) -> tuple[list[Any], int]:
    """The messages in [begin, end) as an Arrow batch of the spooled schema (none if there are
    none: Spark takes a batch ten times quicker than rows; arroyo.connectors.runtime.arrow_rows),
    and the position after the last."""
    import pyarrow as pa

    from arroyo.connectors.runtime.arrow_rows import TIMESTAMP

    topics, times, payloads = [], [], []
    position = begin
    for topic, at_ms, payload in spool.read(begin, end):
        topics.append(topic)
        times.append(at_ms * 1000)
        payloads.append(payload)
        position += Spool.size(topic, payload)
    if not topics:
        return [], begin
    topic_column = pa.array(topics, pa.string())
    columns = [
        topic_column,
        pa.array(times, TIMESTAMP),
        pa.array(payloads, pa.binary()),
        pa.repeat(pa.scalar(False), len(topics)),
        topic_column,
    ]
    names = ["_topic", "_source_time", "value", "_eoi", "_meta_topic"]
    return [pa.RecordBatch.from_arrays(columns, names=names)], position


# The schema of a spooled source (SpooledReader's rows, arrow_batches's columns).
SPOOLED_SCHEMA = (
    "`_topic` STRING, `_source_time` TIMESTAMP, `value` BINARY, `_eoi` BOOLEAN, "
    "`_meta_topic` STRING"
)


def read_spooled(
    ctx: ReadContext, source: type[DataSource], table: str, options: str, **named: str
) -> DataFrame:
    """A spooled source's stream (``source``, a DataSource whose reader is a SpooledReader):
    its spool in the table's state, the table's ``options`` (JSON), and ``named`` options in
    which ``{ident}`` is a name stable for this pipeline and table (a persistent session's
    client id, a durable consumer's name)."""
    import hashlib

    state = ctx.state_dir.resolve()
    ident = f"{table}-{hashlib.sha256(str(state).encode()).hexdigest()[:12]}"
    ctx.spark.dataSource.register(source)
    reader = (
        ctx.spark.readStream.format(source.name())
        .option("spool", str(state / "spool"))
        .option("options", options)
    )
    for key, value in named.items():
        reader = reader.option(key, value.format(ident=ident))
    return reader.load()
