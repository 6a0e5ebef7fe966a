"""Metrics per operator of the dataflow graph, from one query's micro-batch.

Spark reports a micro-batch per query: rows per source (each named only by Spark's description
of it, such as ``PythonMicroBatchStream@1f2e``), the rows its sink took (-1 for a
``foreachBatch`` sink), and each stateful operator's state. The graph the compiler draws has a
node per source table and per sink (``arroyo.compiler.compiler.dataflow_graph``), so:

- a source's rows are matched to its table through the query's plan, where each of Spark's
  streams sits under the view the runner registered for the table (``source_tables``), once
  per query; a bounded source's are counted without its end-of-input marker;
- the rows reaching a sink are counted by an observation on the query's result
  (``ROWS_OUT_METRIC``), whatever the sink;
- each stateful operator (aggregate, join, deduplication, Arroyo's own state) is a node of its
  own, under the query's sink: ``<sink node>/<Spark's operator name><index>``, in the order
  Spark lists them (the plan's, from the sink down).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from arroyo.connectors.stage import STAGE_CONNECTOR
from arroyo.engine.build import EOI_METRIC
from arroyo.program.names import signed_view
from arroyo.program.spec import PipelineProgram, TableSpec

log = structlog.get_logger(__name__)

# Observed on every query's result: the rows it hands its sink in a batch.
ROWS_OUT_METRIC = "rows_out"

# Spark's names of stateful operators, as a user reads them.
_STATE_LABELS = {
    "stateStoreSave": "aggregate",
    "sessionWindowStateStoreSaveExec": "session window",
    "symmetricHashJoin": "join",
    "dedupe": "deduplicate",
    "dedupeWithinWatermark": "deduplicate",
    "flatMapGroupsWithState": "stateful operator",
    "applyInPandasWithState": "stateful operator (Python)",
    "transformWithStateExec": "stateful operator",
    "globalLimit": "limit",
}
# Spark's plan nodes over a stream: version 2 sources, and version 1 (file sources).
_STREAM_RELATIONS = ("StreamingDataSourceV2ScanRelation", "StreamingExecutionRelation")


@dataclass(frozen=True, slots=True)
class OperatorReport:
    """One graph node over one micro-batch (the counts are the batch's)."""

    operator_id: str
    label: str
    messages_recv: int = 0
    messages_sent: int = 0
    backpressure: float = 0.0
    stateful: bool = False
    # -1: the state store does not count its rows.
    state_rows: int = 0
    state_bytes: int = 0
    state_rows_updated: int = 0
    late_rows_dropped: int = 0
    deserialization_errors: int = 0
    # A sink: its query's batch duration, and its watermark's lag behind the batch's start
    # (-1: no watermark).
    batch_duration_micros: int = 0
    watermark_lag_micros: int = -1


def sink_node(sink: str, is_stage: bool) -> str:
    """The graph's id of the node a query writes into (as ``dataflow_graph`` names it)."""
    return sink if is_stage else f"sink:{sink}"


def source_tables(query: Any, views: dict[str, str]) -> dict[str, str]:
    """Spark's description of each stream ``query`` reads, to the source table it belongs to:
    the innermost of ``views`` (a view's name to its table's) over it. Walks the JVM's plan:
    call it once per query run, after its first batch."""
    found: dict[str, str] = {}
    plan = query._jsq.streamingQuery().logicalPlan()
    pending: list[tuple[Any, str | None]] = [(plan, None)]
    while pending:
        node, table = pending.pop()
        kind = str(node.nodeName())
        if kind == "View":
            table = views.get(str(node.desc().identifier().table()), table)
        elif kind in _STREAM_RELATIONS and table is not None:
            stream = node.stream() if kind == _STREAM_RELATIONS[0] else node.source()
            found.setdefault(str(stream.toString()), table)
            continue
        children = node.children().iterator()
        while children.hasNext():
            pending.append((children.next(), table))
    return found


@dataclass(frozen=True, slots=True)
class QueryGraph:
    """What ``reports`` needs to know of a query besides its progress."""

    # From ``source_tables``.
    streams: dict[str, str]
    # The node the query writes into, and its label.
    sink: str
    sink_label: str
    # Each source table's connector: its node's label.
    labels: dict[str, str]
    # Whether the state store counts its rows.
    rows_counted: bool


def reports(
    progress: Any, graph: QueryGraph, dropped: dict[str, int], backpressure: float = 0.0
) -> list[OperatorReport]:
    """The graph's nodes over one batch of a query; ``dropped``: the undecodable records of
    each source table in the batch; ``backpressure``: the query's busy fraction (BusyTime)."""
    observed = {name: _values(row) for name, row in (progress.observedMetrics or {}).items()}
    by_table: dict[str, int] = {}
    for s in progress.sources or []:
        table = graph.streams.get(str(s.description))
        if table is not None:
            # Each stream of a table (one per view of it the query reads) reads all of it.
            by_table[table] = max(by_table.get(table, 0), int(s.numInputRows or 0))
    for table in by_table:
        # A bounded source's rows without its end-of-input marker (arroyo.engine.build).
        counted = observed.get(f"{EOI_METRIC}{table}", {}).get("rows")
        if counted is not None:
            by_table[table] = int(counted)
    out = [
        OperatorReport(
            table,
            graph.labels.get(table, "source"),
            messages_sent=rows,
            backpressure=backpressure,
            deserialization_errors=dropped.get(table, 0),
        )
        for table, rows in by_table.items()
    ]
    for index, op in enumerate(progress.stateOperators or []):
        name = str(op.operatorName)
        out.append(
            OperatorReport(
                f"{graph.sink}/{name}{index}",
                _STATE_LABELS.get(name, name),
                backpressure=backpressure,
                stateful=True,
                state_rows=int(op.numRowsTotal or 0) if graph.rows_counted else -1,
                state_bytes=int(op.memoryUsedBytes or 0),
                state_rows_updated=int(op.numRowsUpdated or 0),
                late_rows_dropped=int(op.numRowsDroppedByWatermark or 0),
            )
        )
    rows_out = observed.get(ROWS_OUT_METRIC, {}).get("rows")
    if rows_out is None:
        rows_out = max(0, int(progress.sink.numOutputRows or 0)) if progress.sink else 0
    out.append(
        OperatorReport(
            graph.sink,
            graph.sink_label,
            messages_recv=int(rows_out),
            backpressure=backpressure,
            batch_duration_micros=int((progress.durationMs or {}).get("triggerExecution") or 0)
            * 1000,
            watermark_lag_micros=_watermark_lag(progress),
        )
    )
    return out


# Seconds over which a query's busy fraction (its backpressure) is taken.
BUSY_WINDOW_S = 10.0


class BusyTime:
    """The fraction of the last ``BUSY_WINDOW_S`` a query spent running batches, 0 to 1: near
    1 when batches run back to back (the query is falling behind its input), near 0 when it
    waits for its triggers. Spark's own ratio of input to processing rate is not that: it takes
    the input rate since the previous batch began, so a batch that follows the one Spark runs
    without new input to close windows looks as fast as its input however idle the query is."""

    def __init__(self) -> None:
        self.batches: collections.deque[tuple[float, float]] = collections.deque()

    def add(self, began: float, seconds: float) -> float:
        """Record a batch that began at ``began`` and ran ``seconds``; the busy fraction."""
        end = began + max(seconds, 0.0)
        self.batches.append((began, end))
        since = end - BUSY_WINDOW_S
        while self.batches and self.batches[0][1] <= since:
            self.batches.popleft()
        busy = sum(e - max(b, since) for b, e in self.batches)
        return min(1.0, max(0.0, busy / BUSY_WINDOW_S))


def _watermark_lag(progress: Any) -> int:
    """Microseconds from the query's watermark to the batch's start; -1 without a watermark
    (Spark reports the epoch) or past the end of a bounded input (the end of time)."""
    watermark = (progress.eventTime or {}).get("watermark")
    began = _began(progress)
    if not watermark or began is None:
        return -1
    try:
        at = datetime.fromisoformat(str(watermark).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return -1
    if at <= 0 or at > began:
        return -1
    return int((began - at) * 1_000_000)


def _values(row: Any) -> dict[str, Any]:
    return row.asDict() if hasattr(row, "asDict") else dict(row)


# Tries at reading a query's plan before its batches go without operators.
_GRAPH_ATTEMPTS = 3


class QueryOperators:
    """One query's nodes of the graph, batch after batch: its plan is read at its first batch
    (again at the next, up to ``_GRAPH_ATTEMPTS``, should that fail), and each batch's counts
    cover the time since the previous batch began (Spark's ``timestamp``)."""

    def __init__(
        self, query: Any, program: PipelineProgram, sink: TableSpec, rows_counted: bool
    ) -> None:
        self.query = query
        self.program = program
        self.sink = sink
        self.rows_counted = rows_counted
        self.graph: QueryGraph | None = None
        self.attempts = 0
        self.last_began: float | None = None
        self.busy = BusyTime()

    def batch(
        self, progress: Any, dropped: dict[str, int], duration_ms: int
    ) -> tuple[list[OperatorReport], float]:
        """The batch's nodes (none where they cannot be read: metrics only, the query runs on
        without them), and the seconds they cover."""
        began = _began(progress)
        if began is not None and self.last_began is not None and began > self.last_began:
            interval = began - self.last_began
        else:
            interval = max(duration_ms / 1000, 0.001)
        self.last_began = began
        busy = self.busy.add(began if began is not None else time.time(), duration_ms / 1000)
        try:
            if self.graph is None and self.attempts < _GRAPH_ATTEMPTS:
                self.attempts += 1
                self.graph = self._graph()
            nodes = reports(progress, self.graph, dropped, busy) if self.graph is not None else []
        except Exception as err:
            log.warning("operator_metrics_unread", sink=self.sink.name, error=str(err))
            nodes = []
        return nodes, interval

    def _graph(self) -> QueryGraph:
        sources = self.program.sources
        views = {s.name: s.name for s in sources}
        views.update({signed_view(s.name): s.name for s in sources})
        is_stage = self.sink.connector == STAGE_CONNECTOR
        labels = {s.name: _label(s.connector) for s in sources}
        return QueryGraph(
            streams=source_tables(self.query, views),
            sink=sink_node(self.sink.name, is_stage),
            sink_label=_label(self.sink.connector),
            labels=labels,
            rows_counted=self.rows_counted,
        )


def _label(connector: str) -> str:
    return "stage" if connector == STAGE_CONNECTOR else connector


def _began(progress: Any) -> float | None:
    """When a batch began (Spark's ``timestamp``), in seconds since the epoch."""
    try:
        return datetime.fromisoformat(str(progress.timestamp).replace("Z", "+00:00")).timestamp()
    except (TypeError, ValueError):
        return None
