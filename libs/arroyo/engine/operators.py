"""Metrics per operator of the dataflow graph, from one query's micro-batch.

Spark reports a micro-batch per query: rows per source (each named only by Spark's description
of it, such as ``PythonMicroBatchStream@1f2e``), the rows its sink took (-1 for a
``foreachBatch`` sink), and each stateful operator's state. The graph the compiler draws has a
node per source table and per sink (``arroyo.compiler.compiler.dataflow_graph``), so:

- a source's rows are matched to its table through the query's plan, where each of Spark's
  streams sits under the view the runner registered for the table (``source_tables``), once
  per query;
- the rows reaching a sink are counted by an observation on the query's result
  (``ROWS_OUT_METRIC``), whatever the sink;
- each stateful operator (aggregate, join, deduplication, Arroyo's own state) is a node of its
  own, under the query's sink: ``<sink node>/<Spark's operator name><index>``, in the order
  Spark lists them (the plan's, from the sink down).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from arroyo.engine.plans import end_markers

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
    state_rows: int = 0
    state_bytes: int = 0
    state_rows_updated: int = 0
    late_rows_dropped: int = 0
    deserialization_errors: int = 0


def sink_node(sink: str, is_stage: bool) -> str:
    """The graph's id of the node a query writes into (as ``dataflow_graph`` names it)."""
    return sink if is_stage else f"sink:{sink}"


def source_tables(query: Any, tables: Collection[str]) -> dict[str, str]:
    """Spark's description of each stream ``query`` reads, to the source table it belongs to
    (the innermost view over it that is one of ``tables``). Walks the JVM's plan: call it once
    per query run, after its first batch."""
    found: dict[str, str] = {}
    plan = query._jsq.streamingQuery().logicalPlan()
    pending: list[tuple[Any, str | None]] = [(plan, None)]
    while pending:
        node, table = pending.pop()
        kind = str(node.nodeName())
        if kind == "View":
            name = str(node.desc().identifier().table())
            table = name if name in tables else table
        elif kind in _STREAM_RELATIONS and table is not None:
            stream = node.stream() if kind == _STREAM_RELATIONS[0] else node.source()
            found.setdefault(str(stream.toString()), table)
            continue
        children = node.children().iterator()
        while children.hasNext():
            pending.append((children.next(), table))
    return found


def reports(
    progress: Any,
    tables: dict[str, str],
    sink: str,
    sink_label: str,
    dropped: dict[str, int],
) -> list[OperatorReport]:
    """The graph's nodes over one batch of a query: ``tables`` from ``source_tables``,
    ``sink`` the node it writes into, ``dropped`` the undecodable records per source table."""
    backpressure = _behind(progress)
    by_table: dict[str, int] = {}
    for s in progress.sources or []:
        table = tables.get(str(s.description))
        if table is not None:
            rows = int(s.numInputRows or 0) - end_markers(s.startOffset, s.endOffset)
            by_table[table] = by_table.get(table, 0) + max(0, rows)
    out = [
        OperatorReport(
            table,
            "source",
            messages_sent=rows,
            backpressure=backpressure,
            deserialization_errors=dropped.get(table, 0),
        )
        for table, rows in by_table.items()
    ]
    operators = list(progress.stateOperators or [])
    for index, op in enumerate(operators):
        name = str(op.operatorName)
        out.append(
            OperatorReport(
                f"{sink}/{name}{index}",
                _STATE_LABELS.get(name, name),
                backpressure=backpressure,
                state_rows=int(op.numRowsTotal or 0),
                state_bytes=int(op.memoryUsedBytes or 0),
                state_rows_updated=int(op.numRowsUpdated or 0),
                late_rows_dropped=int(op.numRowsDroppedByWatermark or 0),
            )
        )
    observed = (progress.observedMetrics or {}).get(ROWS_OUT_METRIC)
    rows_out = int(_values(observed).get("rows") or 0) if observed is not None else 0
    if observed is None and progress.sink is not None:
        rows_out = max(0, int(progress.sink.numOutputRows or 0))
    out.append(OperatorReport(sink, sink_label, messages_recv=rows_out, backpressure=backpressure))
    return out


def _behind(progress: Any) -> float:
    """0 to 1: the query's input rate over the rate it processes rows at (Spark's own sign of a
    query falling behind its input); 0 for a batch without rows."""
    arriving = float(progress.inputRowsPerSecond or 0.0)
    processed = float(progress.processedRowsPerSecond or 0.0)
    # Spark's rate over no elapsed time is not a number.
    if not (math.isfinite(arriving) and math.isfinite(processed)):
        return 0.0
    if arriving <= 0.0 or processed <= 0.0:
        return 0.0
    return min(1.0, arriving / processed)


def _values(row: Any) -> dict[str, Any]:
    return row.asDict() if hasattr(row, "asDict") else dict(row)
