"""Running a pipeline program on Spark: start its queries, watch them, stop them.

A bounded pipeline (every source ends) finishes by itself: each source emits an end-of-input
marker, the watermark passes everything, windows flush, and once every query has written its
last rows the run stops. An unbounded one runs until ``stop()``. Either way every committed
micro-batch is a checkpoint: running again on the same state directory resumes after it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from arroyo.connectors import AnyConnector, WriteContext, connector, secrets
from arroyo.connectors.base import ConnectorError, ConnectorOptions, table_of, table_state_dir
from arroyo.connectors.runtime.remote_state import RemoteState, attach, detach
from arroyo.connectors.runtime.sinks import error_summary, raised_error, wait_for_batches
from arroyo.engine import operators
from arroyo.engine.build import (
    BuildSettings,
    drop_temp_views,
    eoi_metric_source,
    is_end_of_time,
    register,
)
from arroyo.engine.changelog import Changelog
from arroyo.engine.per_batch import PerBatchQuery
from arroyo.engine.plans import (
    declare_column_use,
    end_of_input_sources,
    offset_json,
    offsets_ended,
    stateful_operator,
    without_event_time,
)
from arroyo.engine.progress import ProgressFeed
from arroyo.engine.session import (
    PROVIDER_CLASS,
    ROCKSDB_PROVIDER,
    UPDATING_TTL_PREFIX,
    state_rows_counted,
    temporary_settings,
)
from arroyo.errors import ErrorDomain, JobFailedError
from arroyo.program.spec import PipelineProgram, SinkQuery, TableSpec
from arroyo.udfs import UDF_ERROR
from arroyo.udfs import load as load_udfs
from arroyo.udfs import register as register_udfs

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
    # Bad records dropped, once per record: every query reading a table decodes (and drops)
    # its records, so a table's count is the largest any one query saw.
    dropped_bad_records: int = 0
    dropped_by_table: dict[str, dict[str, int]] = field(default_factory=dict)
    # Files a source skipped as unreadable under bad_data = 'drop' (a corrupt Parquet file).
    dropped_files: set[str] = field(default_factory=set)
    # Messages a source discarded past its buffer's bound (``buffer.overflow = 'drop'``),
    # counted once per table as bad records are.
    dropped_overflow_messages: int = 0
    overflow_by_table: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BatchReport:
    """One committed micro-batch of one query: a consistent checkpoint of that query.

    Handed to ``on_batch`` on the thread that runs ``wait``, in commit order."""

    query: str
    batch_id: int
    # Each source's end offset after the batch, as Spark's JSON.
    offsets: dict[str, str]
    watermark: str | None
    rows_in: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: int
    # Rows in the query's keyed state, or -1 when the state store does not count them.
    state_rows: int
    state_bytes: int
    dropped_bad_records: int
    dropped_overflow_messages: int = 0
    # The dataflow graph's nodes over this batch (arroyo.engine.operators), and the seconds
    # since the query's previous batch began (what the batch's counts cover).
    operators: list[operators.OperatorReport] = field(default_factory=list)
    interval_seconds: float = 0.0


@dataclass
class _Watched:
    spec: SinkQuery
    query: StreamingQuery
    sources: set[str]
    context: WriteContext
    # The sink table's options, as its connector's model.
    sink_options: ConnectorOptions
    # The query's nodes of the dataflow graph, over its batches.
    nodes: operators.QueryOperators
    ended_sources: set[str] = field(default_factory=set)
    # A stateless query over files runs without its event-time operators: its sources' offsets
    # say when they have ended (arroyo.engine.plans.without_event_time).
    ends_by_offsets: bool = False
    stateful: bool = False
    flushed: bool = False
    last_batch: int = -1
    batches: int = 0
    # Whether the sink was told it has its last rows (Connector.sink_finished).
    told_finished: bool = False
    # The query's checkpoint directory, as Spark was given it.
    checkpoint: str = ""

    @property
    def done(self) -> bool:
        if not self.sources or self.ended_sources < self.sources:
            return False
        return self.flushed or not self.stateful


class PipelineRunner:
    """Runs one program in a SparkSession. Call ``start`` then ``wait``; ``stop`` from any thread.

    ``max_records_per_batch`` caps source batches (tests use it to stop part-way), and
    ``stop_after_batches`` makes ``wait`` return, stopping gracefully, once some query has
    committed that many batches in this run. ``real_time_batch_ms`` runs the queries in Spark's
    real-time mode (rows reach the sink as they arrive; a checkpoint every so many ms) instead of
    micro-batches every ``trigger_interval_ms``.
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
        on_batch: Callable[[BatchReport], None] | None = None,
        trigger_interval_ms: int = 0,
        real_time_batch_ms: int | None = None,
        remote: RemoteState | None = None,
    ) -> None:
        self.spark = spark
        # The state's object-store copy (arroyo.connectors.runtime.remote_state), with
        # ``state_dir`` its local working directory.
        self.remote = remote
        self.program = program
        self.state_dir = state_dir
        self.settings = BuildSettings(state_dir, program.parallelism, max_records_per_batch)
        self.stop_after_batches = stop_after_batches
        self.on_progress = on_progress
        self.on_batch = on_batch
        self.trigger_interval_ms = trigger_interval_ms
        self.real_time_batch_ms = real_time_batch_ms
        self.progress = Progress()
        self._watched: list[_Watched] = []
        # Each source table with its connector and options (told of each committed batch).
        self._sources: list[tuple[AnyConnector, TableSpec, ConnectorOptions]] = []
        self._stop_requested = threading.Event()
        self._graceful_stop = True
        self._progress = ProgressFeed(spark)
        self._state_rows_counted = state_rows_counted(spark)

    def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.remote is not None:
            from arroyo.connectors.storage import configure

            configure(self.spark, self.remote.location)
            self.remote.restore()
            attach(self.remote)
        self._progress.attach()
        try:
            self._prepare()
        except BaseException:
            self._progress.detach()
            if self.remote is not None:
                detach(self.remote)
            raise

    def _prepare(self) -> None:
        # With references where its secret options' values are (arroyo.connectors.secrets).
        on_disk = secrets.without(secrets.take(self.program))
        (self.state_dir / "program.json").write_text(on_disk.to_json())
        drop_temp_views(self.spark)
        if self.program.udfs is not None:
            library = load_udfs(self.program.udfs, self.program.udfs_path or "<udfs>", install=True)
            register_udfs(self.spark, library)
        register(self.spark, self.program, self.settings)
        for table in self.program.sources:
            conn = connector(table.connector)
            assert conn is not None
            self._sources.append((conn, table, conn.table_options(table)))
        try:
            for index, spec in enumerate(self.program.queries):
                self._watched.append(self._start_query(index, spec))
        except Exception:
            # A query refused at start leaves none of the pipeline's others running.
            for w in self._watched:
                w.query.stop()
            raise

    def _state_per_query(self) -> bool:
        return any(conn.capabilities.state_per_query for conn, _, _ in self._sources)

    def _start_query(self, index: int, spec: SinkQuery) -> _Watched:
        sink = spec.sink
        conn = connector(sink.connector)
        assert conn is not None
        options = conn.table_options(sink)
        if index > 0 and self._state_per_query():
            # Sources, and the views over them, built for this query (ReadContext.query).
            register(self.spark, self.program, replace(self.settings, query=index))
        df = self.spark.sql(spec.sql)
        sources = end_of_input_sources(df)
        stripped = None
        if (
            sources
            and spec.batch_sql is None
            and spec.output_mode == "append"
            and self.real_time_batch_ms is None
        ):
            stripped = without_event_time(df)
            df = stripped if stripped is not None else df
        query_dir = self.state_dir / "queries" / f"{index}-{sink.name}"
        if self.remote is not None:
            checkpoint = self.remote.checkpoint_uri(f"queries/{index}-{sink.name}/checkpoint")
            checkpoint_key = RemoteState.checkpoint_key(checkpoint)
        else:
            checkpoint = checkpoint_key = os.path.abspath(query_dir / "checkpoint")
        declare_column_use(df, checkpoint)
        context = WriteContext(self.spark, query_dir / "sink", self.state_dir)
        if self.real_time_batch_ms is None:
            # The rows the sink takes, whatever the sink (a foreachBatch one reports none).
            rows = F.count(F.lit(1)).alias("rows")
            df = df.observe(operators.ROWS_OUT_METRIC, rows)
        if spec.updating_ttl_ms is not None:
            # Read by the state store of this query's aggregate (the state directory Spark
            # keeps under the checkpoint), at every batch: arroyo.engine.session.
            state = f"{checkpoint_key}/state"
            self.spark.conf.set(UPDATING_TTL_PREFIX + state, str(spec.updating_ttl_ms))
        if spec.output_mode == "update" and conn.capabilities.needs_format:
            # Change records for a sink that writes them (a blackhole takes the rows as they are).
            assert spec.key_columns is not None
            changelog = Changelog(
                query_dir / "sink" / "changelog.sqlite",
                conn.line_writer(context, sink, options),
                sink,
                spec.key_columns,
                spec.keep_column,
            )
            writer = df.writeStream.foreachBatch(changelog)
        elif spec.batch_sql is not None:
            assert spec.batch_view is not None
            merge = next(
                (v.window_aggregate for v in self.program.views if v.name == spec.batch_merge),
                None,
            )
            per_batch = PerBatchQuery(
                spec.batch_view,
                spec.batch_sql,
                sink,
                conn.line_writer(context, sink, options),
                merge,
            )
            writer = df.writeStream.foreachBatch(per_batch)
        else:
            writer = conn.write(context, df, sink, options)
        writer = (
            writer.option("checkpointLocation", checkpoint)
            .outputMode(spec.output_mode)
            .queryName(f"{sink.name}_{index}")
        )
        with _stateful_chain_checks(self.spark, enabled=not spec.unchecked_chain):
            if self.real_time_batch_ms is None:
                trigger = writer.trigger(processingTime=f"{self.trigger_interval_ms} milliseconds")
                query = _start_or_refuse(trigger, sink.name)
            else:
                query = self._start_real_time(writer, df, spec)
        log.info("query_started", sink=sink.name, query_id=str(query.id))
        nodes = operators.QueryOperators(query, self.program, sink, self._state_rows_counted)
        return _Watched(
            spec,
            query,
            sources,
            context,
            options,
            nodes,
            ends_by_offsets=stripped is not None,
            checkpoint=checkpoint,
        )

    def _start_real_time(
        self, writer: DataStreamWriter, df: DataFrame, spec: SinkQuery
    ) -> StreamingQuery:
        """Spark's real-time mode: long-running tasks pass each row on as it arrives, and
        offsets are committed every ``real_time_batch_ms``. It takes only Spark's update mode,
        which for a stateless query gives the same rows as append; a window or join emitting
        once in append mode would become updates, so those are refused rather than changed.
        Spark itself refuses (naming them) sources, operators and sinks it cannot run so."""
        from pyspark.errors import PySparkException

        stateful = stateful_operator(df)
        if spec.output_mode == "append" and stateful:
            raise JobFailedError(
                f"real-time mode runs stateless queries; the query into {spec.sink.name!r} has "
                f"a stateful operator ({stateful}): run it with micro-batches",
                code="real_time_unsupported",
            )
        batch = f"{self.real_time_batch_ms} milliseconds"
        try:
            real_time = _real_time_trigger(self.spark, writer.outputMode("update"), batch)
            # Real-time mode takes only Spark's own RocksDB store, which a stateless query
            # loses nothing by: the query keeps the setting it starts with (its own session).
            provider = self.spark.conf.get(PROVIDER_CLASS)
            self.spark.conf.set(PROVIDER_CLASS, ROCKSDB_PROVIDER)
            try:
                query: StreamingQuery = real_time.start()
            finally:
                if provider is None:
                    self.spark.conf.unset(PROVIDER_CLASS)
                else:
                    self.spark.conf.set(PROVIDER_CLASS, provider)
            return query
        except PySparkException as err:
            message = str(err).split(" SQLSTATE")[0]
            raise JobFailedError(
                f"real-time mode cannot run the query into {spec.sink.name!r}: {message}",
                code="real_time_unsupported",
            ) from err

    @property
    def queries(self) -> list[StreamingQuery]:
        """The running Spark queries, one per sink (after ``start``)."""
        return [w.query for w in self._watched]

    def stop(self, *, graceful: bool = True) -> None:
        """Ask the run to stop (safe from signal handlers and any thread): ``graceful`` after
        in-flight batches commit, else at once (a batch cut short is replayed on restart)."""
        self._graceful_stop = graceful
        self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the pipeline finishes, is stopped, or fails (raises JobFailedError).

        Returns True when every query finished on its own (all input consumed and flushed).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        graceful = False
        try:
            while True:
                self._check_failures()
                self._poll_progress()
                self._tell_finished()
                if self.program.bounded and self._watched and all(w.done for w in self._watched):
                    return True
                if self._stop_requested.is_set():
                    graceful = self._graceful_stop
                    return False
                if self.stop_after_batches is not None and any(
                    w.batches >= self.stop_after_batches for w in self._watched
                ):
                    graceful = True
                    return False
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("pipeline did not finish in time")
                self._await_progress(_POLL_SECONDS)
        finally:
            self._stop_all(graceful)

    def _tell_finished(self) -> None:
        """Tell each sink whose query is done that it has its last rows: a stage's reader
        then ends too (arroyo.connectors.stage). And its file sources: they then give no
        more batches of end-of-input markers alone while the pipeline's other queries finish
        (libs/arroyo/java/arroyo/files/FinishedQueries.java)."""
        for w in self._watched:
            if w.done and not w.told_finished:
                conn = connector(w.spec.sink.connector)
                assert conn is not None
                conn.sink_finished(w.context, w.spec.sink, w.sink_options)
                w.told_finished = True
                if self.program.bounded and len(self._watched) > 1:
                    jvm = self.spark._jvm
                    assert jvm is not None
                    jvm.arroyo.files.FinishedQueries.finish(w.checkpoint)

    def _check_failures(self) -> None:
        for w in self._watched:
            if w.query.isActive:
                continue
            error = w.query.exception()
            if error is not None:
                causes = _java_causes(w.query)
                log.error(
                    "query_failed",
                    sink=w.spec.sink.name,
                    causes=[c.splitlines()[0][:300] for c in causes],
                )
                raise _job_failed(causes) from error

    def _await_progress(self, seconds: float) -> None:
        self._progress.wait(seconds)

    def _poll_progress(self) -> None:
        self._take_progress(self._progress.take())

    def _catch_up_progress(self) -> None:
        """Spark's listener bus delivers progress asynchronously, so when the queries have
        stopped, the last batches' progress may not have reached the listener yet: take it from
        each query's own record instead (what a run reports, e.g. its dropped records, must
        not depend on that race)."""
        self._take_progress(p for w in self._watched for p in w.query.recentProgress)

    def _take_progress(self, events: Iterable[Any]) -> None:
        # By run id: a query resumed from its checkpoint keeps its id, and an earlier run's last
        # events can still be on Spark's listener bus when this run starts.
        by_run = {str(w.query.runId): w for w in self._watched}
        changed = False
        for p in events:
            w = by_run.get(str(p.runId))
            if w is None or p.batchId <= w.last_batch or _idle(p):
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
        dropped = overflowed = 0
        dropped_now: dict[str, int] = {}
        if w.ended_sources >= w.sources and is_end_of_time(watermark):
            w.flushed = True
        if w.ends_by_offsets and offsets_ended(s.endOffset for s in p.sources or []):
            w.ended_sources = set(w.sources)
        for s in p.sources or []:
            named = (getattr(s, "metrics", None) or {}).get("droppedFileNames")
            if new := set(named.split("\n")) - self.progress.dropped_files if named else set():
                log.warning("bad_files_dropped", sink=w.spec.sink.name, files=sorted(new))
                self.progress.dropped_files |= new
        for name, row in (p.observedMetrics or {}).items():
            source = eoi_metric_source(name)
            values = row.asDict() if hasattr(row, "asDict") else dict(row)
            if source is not None and values.get("eoi"):
                w.ended_sources.add(source)
            elif name.startswith(("bad_data:", "overflow:")):
                kind, table = name.split(":", 1)
                count = int(values.get("dropped") or 0)
                tables = self.progress.dropped_by_table
                if kind == "overflow":
                    tables = self.progress.overflow_by_table
                    overflowed += count
                else:
                    dropped += count
                    dropped_now[table] = dropped_now.get(table, 0) + count
                by_query = tables.setdefault(table, {})
                by_query[w.spec.sink.name] = by_query.get(w.spec.sink.name, 0) + count
        self.progress.dropped_bad_records = sum(
            max(by_query.values()) for by_query in self.progress.dropped_by_table.values()
        )
        self.progress.dropped_overflow_messages = sum(
            max(by_query.values()) for by_query in self.progress.overflow_by_table.values()
        )
        if overflowed:
            log.warning("source_overflow_dropped", sink=w.spec.sink.name, messages=overflowed)
        self.progress.batches += 1
        self.progress.rows_in += int(p.numInputRows or 0)
        self.progress.rows_per_second = float(p.processedRowsPerSecond or 0.0)
        if watermark and not is_end_of_time(watermark):
            self.progress.watermark = watermark
        report = _report(w, p, watermark, (dropped, overflowed), self._state_rows_counted)
        nodes, interval = w.nodes.batch(p, dropped_now, report.duration_ms)
        report = replace(report, operators=nodes, interval_seconds=interval)
        for conn, table, options in self._sources:
            conn.source_committed(
                table_state_dir(self.settings.state_dir, table.name), table, options, report.offsets
            )
        if self.on_batch is not None:
            self.on_batch(report)
        log.debug(
            "batch_committed",
            sink=w.spec.sink.name,
            batch_id=p.batchId,
            rows=p.numInputRows,
            watermark=watermark,
        )

    def _stop_all(self, graceful: bool) -> None:
        """Stop every query; ``graceful`` first lets a batch in flight commit, so the stop leaves
        a checkpoint at that batch. A batch cut short is replayed on restart anyway (every sink
        is idempotent per batch), so the wait is bounded."""
        deadline = time.monotonic() + _GRACEFUL_STOP_SECONDS
        for w in self._watched:
            if graceful and _batch_in_flight(w.query):
                in_flight = w.last_batch
                while (
                    w.last_batch == in_flight
                    and _batch_in_flight(w.query)
                    and time.monotonic() < deadline
                ):
                    self._await_progress(_POLL_SECONDS)
                    self._poll_progress()
            w.query.stop()
        idle = wait_for_batches(_GRACEFUL_STOP_SECONDS)
        if not idle:
            log.warning("sink_still_writing", waited_s=_GRACEFUL_STOP_SECONDS)
        self._poll_progress()
        self._catch_up_progress()
        self._progress.detach()
        tables = [*self.program.sources, *(q.sink for q in self.program.queries)]
        for name in {t.connector for t in tables}:
            conn = connector(name)
            assert conn is not None
            conn.release()
        if self.remote is not None and idle:
            # A sink still writing keeps writing its state through (detached, its last
            # record would stay local, and the replay would find its files unaccounted for).
            detach(self.remote)


# Spark's status message while it runs a batch without new input: a watermark moved, so
# stateful operators close windows and evict state, and the rows they emit reach the sink.
_NO_DATA_BATCH = "No new data but cleaning up state"


def _idle(progress: Any) -> bool:
    """Whether a progress record is Spark's note that the query has been idle a while (no
    batch ran: it carries the next batch's id). The listener is not sent these, but a query's
    ``recentProgress`` keeps them."""
    return not progress.numInputRows and "addBatch" not in (progress.durationMs or {})


def _batch_in_flight(query: StreamingQuery) -> bool:
    """Whether ``query`` is running a batch: a trigger that found new data, or a batch Spark
    runs without new data because the watermark moved (it emits the windows that closed, so
    cutting it short would write them twice to an at-least-once sink). A trigger that found
    nothing to do (a source polled between batches) runs no batch, and is not waited for."""
    if not query.isActive:
        return False
    status = query.status
    if not status.get("isTriggerActive"):
        return False
    return bool(status.get("isDataAvailable")) or status.get("message") == _NO_DATA_BATCH


# Spark's checks of a query's chain of stateful operators (SinkQuery.unchecked_chain): of one
# that reads rows another may emit behind the watermark, and of the query's operators as a
# whole (among them: more than one flatMapGroupsWithState only into an append-mode sink).
_CHAIN_CHECKS = (
    "spark.sql.streaming.statefulOperator.checkCorrectness.enabled",
    "spark.sql.streaming.unsupportedOperationCheck",
)


@contextmanager
def _stateful_chain_checks(spark: SparkSession, enabled: bool) -> Iterator[None]:
    """Spark's checks of the chain of stateful operators, for the queries started inside. A
    query keeps the settings it started with (it runs in a copy of the session made at its
    start)."""
    if enabled:
        yield
        return
    with temporary_settings(spark, dict.fromkeys(_CHAIN_CHECKS, "false")):
        yield


def _report(
    w: _Watched, p: Any, watermark: str | None, dropped: tuple[int, int], rows_counted: bool
) -> BatchReport:
    """``dropped``: the batch's bad records and overflowed messages."""
    state_rows = sum(int(op.numRowsTotal or 0) for op in p.stateOperators or [])
    if p.stateOperators and not rows_counted:
        state_rows = -1
    state_bytes = sum(int(op.memoryUsedBytes or 0) for op in p.stateOperators or [])
    return BatchReport(
        query=w.query.name or w.spec.sink.name,
        batch_id=int(p.batchId),
        offsets={str(s.description): str(offset_json(str(s.endOffset))) for s in p.sources or []},
        watermark=None if is_end_of_time(watermark) else watermark,
        rows_in=int(p.numInputRows or 0),
        input_rows_per_second=float(p.inputRowsPerSecond or 0.0),
        processed_rows_per_second=float(p.processedRowsPerSecond or 0.0),
        duration_ms=int((p.durationMs or {}).get("triggerExecution") or 0),
        state_rows=state_rows,
        state_bytes=state_bytes,
        dropped_bad_records=dropped[0],
        dropped_overflow_messages=dropped[1],
    )


_JVM_SINK_ERROR = "arroyo.files.UploadsSink$SinkError: "
# Spark's own Python processes failing, not the pipeline: one that did not start within Spark's
# ten seconds (a machine under load), or one killed (out of memory). A run again from the last
# checkpoint may well succeed, so the controller restarts the job rather than fail it.
_TRANSIENT = ("Python worker failed to connect back", "Python worker exited unexpectedly")


def _job_failed(causes: list[str]) -> JobFailedError:
    failure = JobFailedError(_user_message(causes))
    raised = raised_error(causes)
    if raised is not None:
        # A sink's own error (Kafka unreachable, say) keeps its domain and retry hint.
        failure.domain = raised.domain
        failure.retryable = raised.retryable
    elif any(marker in cause for cause in causes for marker in _TRANSIENT):
        failure.domain = ErrorDomain.INTERNAL
        failure.retryable = True
    return failure


def _java_causes(query: StreamingQuery) -> list[str]:
    """The message of each exception in the JVM's cause chain, outermost first."""
    causes: list[str] = []
    failure = query._jsq.exception()
    current = failure.get() if failure.isDefined() else None
    while current is not None and len(causes) < 10:
        causes.append(str(current.toString()))
        current = current.getCause()
    return causes


def _python_exception(text: str) -> str | None:
    """The exception line of a Python traceback that a foreachBatch function (a sink on the
    driver) raised into the JVM, without its module path, or None."""
    if "Traceback (most recent call last):" not in text:
        return None
    lines = text.split("Traceback (most recent call last):", 1)[1].splitlines()
    raised = [line for line in lines if line.strip() and not line.startswith((" ", "\t"))]
    if not raised:
        return None
    name, sep, message = raised[-1].partition(": ")
    return f"{name.rsplit('.', 1)[-1]}{sep}{message}"


def _user_message(causes: list[str]) -> str:
    """The root cause a user can act on, without the JVM stack: a bad record or a raised error
    when there is one, else the innermost cause's first line."""
    # A query's exception message ends with its plan, which quotes the markers too: cut it.
    causes = [c.split("\n=== Streaming Query ===")[0] for c in causes]
    for text in causes:
        raised = _python_exception(text)
        if raised is not None:
            return raised
    for marker in (UDF_ERROR, "bad data in table", "USER_RAISED_EXCEPTION"):
        for text in causes:
            idx = text.find(marker)
            if idx >= 0:
                line = text[idx:].splitlines()[0]
                return line.replace("[USER_RAISED_EXCEPTION] ", "")
    for text in causes:
        if text.startswith(_JVM_SINK_ERROR):
            # A sink run in the JVM (arroyo.files.UploadsSink) names what and where itself.
            return text.removeprefix(_JVM_SINK_ERROR).splitlines()[0]
    for text in reversed(causes):
        first = text.splitlines()[0] if text else ""
        if first.strip():
            return first.split(": ", 1)[-1] if first.startswith(("org.", "java.")) else first
    return "streaming query failed"


def _real_time_trigger(
    spark: SparkSession, writer: DataStreamWriter, batch: str
) -> DataStreamWriter:
    """``writer.trigger(realTime=batch)``. PySpark 4.1 has no ``realTime`` argument, though its
    JVM has the trigger (``Trigger.RealTime``): set it there, as later PySpark does."""
    jvm = spark._jvm
    assert jvm is not None
    trigger = jvm.org.apache.spark.sql.streaming.Trigger.RealTime(batch)
    writer._jwrite = writer._jwrite.trigger(trigger)
    return writer


def _start_or_refuse(writer: DataStreamWriter, sink: str) -> StreamingQuery:
    """Start the query; Spark's refusal to start a plan it cannot stream (one its
    unsupported-operation checks find, past the planner's own) becomes the job's error, with
    Spark's reason and without the plan it prints after it."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    table = table_of(writer)
    try:
        return writer.toTable(table) if table is not None else writer.start()
    except Py4JJavaError as err:
        # A catalog the table is in that cannot be reached or refuses the table.
        if table is None:
            raise
        raise ConnectorError(
            f"sink '{sink}': cannot start writing the table {table}: {error_summary(err)}"
        ) from err
    except AnalysisException as err:
        reason = str(err.getMessage() if hasattr(err, "getMessage") else err).split(";\n")[0]
        raise JobFailedError(
            f"Spark cannot run the query into {sink!r}: {reason.splitlines()[0]}",
            code="query_refused",
        ) from err
