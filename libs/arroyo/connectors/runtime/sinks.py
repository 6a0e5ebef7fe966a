"""Sinks that write from the driver, one micro-batch at a time, exactly once per batch id."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame

from arroyo.connectors.base import LineWriter

_in_flight = 0
_idle = threading.Condition()


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
    finally:
        with _idle:
            _in_flight -= 1
            _idle.notify_all()


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


class FileAppender:
    """Appends one line per record to a single file (a LineWriter)."""

    def __init__(self, path: str, log: BatchCommitLog) -> None:
        self.path = path
        self.log = log

    def committed(self, batch_id: int) -> bool:
        return batch_id <= self.log.read()[0]

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        _, length = self.log.read()
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        mode = "r+b" if os.path.exists(self.path) else "wb"
        with open(self.path, mode) as f:
            f.truncate(length)
            f.seek(length)
            for line in lines:
                f.write(line)
            f.flush()
            os.fsync(f.fileno())
            length = f.tell()
        self.log.write(batch_id, length)


# Where stdout sinks' rows go in this process, when not to standard output: (sink, rows) -> None.
LiveRoute = Callable[[str, list[str]], None]


class _Stdout:
    route: LiveRoute | None = None


def route_stdout(route: LiveRoute | None) -> None:
    """Send every stdout sink's rows of this process to ``route`` (called on the thread that
    runs the micro-batch, once per batch) instead of printing them. A cluster worker installs
    one that forwards them to the controller, where the api streams them to users."""
    _Stdout.route = route


def stdout_route() -> LiveRoute | None:
    return _Stdout.route


class LiveOutput:
    """Hands each batch's lines to a live-output route (a LineWriter). At least once."""

    def __init__(self, route: LiveRoute, sink: str) -> None:
        self.route = route
        self.sink = sink

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        rows = [line.decode().rstrip("\n") for line in lines]
        if rows:
            self.route(self.sink, rows)


class StdoutPrinter:
    """Prints one line per record (a LineWriter). At least once."""

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        out = sys.stdout.buffer
        for line in lines:
            out.write(line)
        out.flush()


class Discard:
    """A LineWriter that computes every record and keeps none (the blackhole sink)."""

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        for _ in lines:
            pass
