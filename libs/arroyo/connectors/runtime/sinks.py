"""Sinks that write from the driver, one micro-batch at a time, exactly once per batch id."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Row

from arroyo.connectors.base import LineWriter
from arroyo.connectors.runtime.remote_state import durable
from arroyo.errors import ArroyoError
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql.streaming.readwriter import DataStreamWriter

_in_flight = 0
_idle = threading.Condition()
# Arroyo's own errors that foreachBatch functions raised, by the line a traceback shows of each
# ("KafkaUnavailableError: Kafka at ..."), the newest last. Spark hands the runner only the
# text of a failed query's exception, which loses the error's domain and retry hint: the runner
# looks the error up here (``raised_error``), so that a broker that went away mid-batch is
# retried from the checkpoint rather than failing the job.
_raised: dict[str, ArroyoError] = {}
_RAISED_KEPT = 16


@contextmanager
def batch_in_flight() -> Iterator[None]:
    """Mark a foreachBatch function as running.

    Spark runs these functions in this process, called from the JVM. Stopping a query interrupts
    the JVM thread, but not a Python call that is already running. That call must end before
    the pipeline runs again, or it would write the same batch at the same time as the replay.
    """
    global _in_flight  # noqa: PLW0603
    with _idle:
        _in_flight += 1
    try:
        yield
    except ArroyoError as err:
        with _idle:
            _raised.pop(_traceback_line(err), None)
            _raised[_traceback_line(err)] = err
            while len(_raised) > _RAISED_KEPT:
                del _raised[next(iter(_raised))]
        raise
    finally:
        with _idle:
            _in_flight -= 1
            _idle.notify_all()


def _traceback_line(err: BaseException) -> str:
    lines = str(err).splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def raised_error(causes: Iterable[str]) -> ArroyoError | None:
    """The error of Arroyo's that a foreachBatch function raised, if one of ``causes`` (a
    failed query's exception messages) quotes it; the newest such error."""
    texts = list(causes)
    with _idle:
        for line, err in reversed(_raised.items()):
            if any(line in text for text in texts):
                return err
    return None


def write_partitions(
    encoded: DataFrame, writer: Callable[[Iterator[Row]], None]
) -> DataStreamWriter:
    """A sink writing each micro-batch from the executors: ``writer`` (picklable) gets each
    partition's rows. At least once: a replayed batch is written again."""

    def write_batch(batch: DataFrame, _batch_id: int) -> None:
        with batch_in_flight():
            batch.foreachPartition(writer)

    return encoded.writeStream.foreachBatch(write_batch)


def error_summary(err: BaseException) -> str:
    """One line that says what went wrong: the first line of the message, and for an error of
    the JVM (py4j's, whose own first line only names the call that failed) the Java exception
    and its root cause."""
    java = getattr(err, "java_exception", None)
    if java is not None:
        outer = str(java.toString()).splitlines()[0]
        root = java
        while root.getCause() is not None:
            root = root.getCause()
        inner = str(root.toString()).splitlines()[0]
        return outer if root is java or inner in outer else f"{outer} (caused by {inner})"
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return repr(err)
    # "Got the following 1 errors when deleting objects in S3 bucket 'b':" says what next
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def sink_id(state_dir: Path) -> str:
    """A sink's own id, made at its first batch and kept in its state (``state_dir``): a
    pipeline restored elsewhere keeps it, one started afresh gets a new one."""
    path = state_dir / "sink_id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(uuid.uuid4().hex[:12])
        os.replace(tmp, path)
        durable(path)
    return path.read_text().strip()


def wait_for_batches(timeout: float) -> bool:
    """Block until no foreachBatch function is running (True), or ``timeout`` passes."""
    with _idle:
        return _idle.wait_for(lambda: _in_flight == 0, timeout)


class BatchCommitLog:
    """Remembers the last batch a sink committed and how long its output was then.

    A replayed batch (same id, after a crash) is not written again; a batch that crashed
    half-written is cut back to the committed length before it is written again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[int, int]:
        if not self.path.exists():
            return -1, 0
        data = json.loads(self.path.read_text())
        return int(data["batch_id"]), int(data["length"])

    def write(self, batch_id: int, length: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch_id": batch_id, "length": length}))
        os.replace(tmp, self.path)
        durable(self.path)


def lines_of(df: DataFrame) -> Iterable[bytes]:
    for row in df.toLocalIterator(prefetchPartitions=True):
        value = row[0]
        if value is None:
            continue
        yield (
            bytes(value) if isinstance(value, bytes | bytearray) else str(value).encode()
        ) + b"\n"


def consume(df: DataFrame) -> None:
    """Run a batch to its end without writing it anywhere.

    A batch that was already written before a crash must still run: its stateful operators
    commit their state only when the whole batch is consumed, and Spark fails the batch if they
    do not (STATE_STORE_COMMIT_VALIDATION_FAILED)."""
    df.write.format("noop").mode("overwrite").save()


class WriteBatches:
    """A foreachBatch function writing each encoded batch (one ``value`` column) through a
    LineWriter, once per batch id."""

    def __init__(self, writer: LineWriter) -> None:
        self.writer = writer

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if self.writer.committed(batch_id):
                consume(df)
                return
            self.writer.write(batch_id, lines_of(df))


def write_lines(writer: LineWriter, df: DataFrame, table: TableSpec) -> DataStreamWriter:
    """A streaming sink writing ``df``'s rows, encoded in the table's format, through
    ``writer`` on the driver, once per batch id."""
    from arroyo.formats.codec import encode

    return encode(df, table).writeStream.foreachBatch(WriteBatches(writer))
