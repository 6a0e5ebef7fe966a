"""Running a pipeline program on Spark: start its queries, watch them, stop them.

A bounded pipeline (every source ends) finishes by itself: each source emits an end-of-input
marker, the watermark passes everything, windows flush, and once every query has written its
last rows the run stops. An unbounded one runs until ``stop()``. Either way every committed
micro-batch is a checkpoint: running again on the same state directory resumes after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from arroyo.connectors import WriteContext, connector
from arroyo.engine.build import (
    BuildSettings,
    drop_temp_views,
    end_of_input_sources,
    eoi_metric_source,
    is_end_of_time,
    register,
)
from arroyo.errors import JobFailedError
from arroyo.sql.program import PipelineProgram, SinkQuery

log = structlog.get_logger(__name__)

_POLL_SECONDS = 0.05
_GRACEFUL_STOP_SECONDS = 30.0


@dataclass
class Progress:
    """What the run has done so far, summed over its queries."""

    batches: int = 0
    rows_in: int = 0
    rows_per_second: float = 0.0
    watermark: str | None = None
    dropped_bad_records: int = 0


@dataclass
class _Watched:
    spec: SinkQuery
    query: StreamingQuery
    sources: set[str]
    ended_sources: set[str] = field(default_factory=set)
    stateful: bool = False
    flushed: bool = False
    last_batch: int = -1
    batches: int = 0

    @property
    def done(self) -> bool:
        if not self.sources or self.ended_sources < self.sources:
            return False
        return self.flushed or not self.stateful


class PipelineRunner:
    """Runs one program in a SparkSession. Call ``start`` then ``wait``; ``stop`` from any thread.

    ``max_records_per_batch`` caps source batches (tests use it to stop part-way), and
    ``stop_after_batches`` makes ``wait`` return, stopping gracefully, once some query has
    committed that many batches in this run.
    """

    def __init__(
        self,
        spark: SparkSession,
        program: PipelineProgram,
        state_dir: Path,
        *,
        max_records_per_batch: int | None = None,
        stop_after_batches: int | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.spark = spark
        self.program = program
        self.state_dir = state_dir
        self.settings = BuildSettings(state_dir, program.parallelism, max_records_per_batch)
        self.stop_after_batches = stop_after_batches
        self.on_progress = on_progress
        self.progress = Progress()
        self._watched: list[_Watched] = []
        self._stop_requested = threading.Event()

    def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "program.json").write_text(self.program.to_json())
        drop_temp_views(self.spark)
        register(self.spark, self.program, self.settings)
        for index, spec in enumerate(self.program.queries):
            self._watched.append(self._start_query(index, spec))

    def _start_query(self, index: int, spec: SinkQuery) -> _Watched:
        sink = spec.sink
        conn = connector(sink.connector)
        assert conn is not None
        df = self.spark.sql(spec.sql)
        sources = end_of_input_sources(df)
        query_dir = self.state_dir / "queries" / f"{index}-{sink.name}"
        writer = conn.write(WriteContext(self.spark, query_dir / "sink"), df, sink)
        query = (
            writer.option("checkpointLocation", str(query_dir / "checkpoint"))
            .outputMode(spec.output_mode)
            .queryName(f"{sink.name}_{index}")
            .trigger(processingTime="0 seconds")
            .start()
        )
        log.info("query_started", sink=sink.name, query_id=str(query.id))
        return _Watched(spec, query, sources)

    @property
    def queries(self) -> list[StreamingQuery]:
        """The running Spark queries, one per sink (after ``start``)."""
        return [w.query for w in self._watched]

    def stop(self) -> None:
        """Ask the run to stop after in-flight batches commit (safe from signal handlers)."""
        self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the pipeline finishes, is stopped, or fails (raises JobFailedError).

        Returns True when every query finished on its own (all input consumed and flushed).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                self._check_failures()
                self._poll_progress()
                if self._watched and all(w.done for w in self._watched):
                    return True
                if self._stop_requested.is_set() or (
                    self.stop_after_batches is not None
                    and any(w.batches >= self.stop_after_batches for w in self._watched)
                ):
                    return False
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("pipeline did not finish in time")
                time.sleep(_POLL_SECONDS)
        finally:
            self._stop_all()

    def _check_failures(self) -> None:
        for w in self._watched:
            if w.query.isActive:
                continue
            error = w.query.exception()
            if error is not None:
                raise JobFailedError(_user_message(error)) from error

    def _poll_progress(self) -> None:
        changed = False
        for w in self._watched:
            for p in w.query.recentProgress:
                if p.batchId <= w.last_batch:
                    continue
                w.last_batch = p.batchId
                w.batches += 1
                changed = True
                self._record(w, p)
        if changed and self.on_progress:
            self.on_progress(self.progress)

    def _record(self, w: _Watched, p: Any) -> None:
        if p.stateOperators:
            w.stateful = True
        watermark = (p.eventTime or {}).get("watermark")
        if w.ended_sources >= w.sources and is_end_of_time(watermark):
            w.flushed = True
        for name, row in (p.observedMetrics or {}).items():
            source = eoi_metric_source(name)
            values = row.asDict() if hasattr(row, "asDict") else dict(row)
            if source is not None and values.get("eoi"):
                w.ended_sources.add(source)
            elif name.startswith("bad_data:"):
                self.progress.dropped_bad_records += int(values.get("dropped") or 0)
        self.progress.batches += 1
        self.progress.rows_in += int(p.numInputRows or 0)
        self.progress.rows_per_second = float(p.processedRowsPerSecond or 0.0)
        if watermark and not is_end_of_time(watermark):
            self.progress.watermark = watermark
        log.debug(
            "batch_committed",
            sink=w.spec.sink.name,
            batch_id=p.batchId,
            rows=p.numInputRows,
            watermark=watermark,
        )

    def _stop_all(self) -> None:
        deadline = time.monotonic() + _GRACEFUL_STOP_SECONDS
        for w in self._watched:
            # Let an in-flight batch commit so the stop leaves a clean checkpoint; a batch cut
            # short is replayed on restart anyway, and every sink is idempotent per batch.
            while (
                w.query.isActive
                and w.query.status.get("isTriggerActive")
                and time.monotonic() < deadline
            ):
                time.sleep(_POLL_SECONDS)
            w.query.stop()
        self._poll_progress()


def _user_message(error: StreamingQueryException) -> str:
    """The root cause a user can act on, without the JVM stack."""
    text = str(error.getMessage() if hasattr(error, "getMessage") else error)
    for marker in ("bad data in table", "USER_RAISED_EXCEPTION"):
        idx = text.find(marker)
        if idx >= 0:
            line = text[idx:].splitlines()[0]
            return line.replace("[USER_RAISED_EXCEPTION] ", "")
    return text.splitlines()[0] if text else "streaming query failed"
