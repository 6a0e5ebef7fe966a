"""The worker's metrics per operator (arroyo.engine.operators): sent to the controller with
each batch, which keeps their history for the API's ``operator_metric_groups``, and counted on
the worker's Prometheus endpoint under Arroyo's metric names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import Gauge

from arroyo_rpc.v1 import controller_pb2 as pb

if TYPE_CHECKING:
    from arroyo.engine.operators import OperatorReport
    from arroyo.engine.runner import BatchReport

# Arroyo's labels: a Spark query is one task here, so every subtask index is 0.
_LABELS = ("job_id", "operator_id", "operator_name", "subtask_idx")
# The totals are exposed under Arroyo's exact names, for its dashboards' queries
# (``rate(arroyo_worker_messages_recv[1m])``): prometheus_client would name a Counter
# ``..._total``, so they are gauges that only ever grow.
MESSAGES_RECV = Gauge("arroyo_worker_messages_recv", "Rows an operator received", _LABELS)
MESSAGES_SENT = Gauge("arroyo_worker_messages_sent", "Rows an operator sent", _LABELS)
DESERIALIZATION_ERRORS = Gauge(
    "arroyo_worker_deserialization_errors",
    "Records a source could not decode and dropped (bad_data = 'drop')",
    _LABELS,
)
BACKPRESSURE = Gauge(
    "arroyo_worker_backpressure",
    "0 to 1: how far the operator's query falls behind its input, at its last batch",
    _LABELS,
)
STATE_ROWS = Gauge(
    "arroyo_worker_state_rows",
    "Rows in a stateful operator's keyed state (-1: not counted)",
    _LABELS,
)
STATE_BYTES = Gauge("arroyo_worker_state_bytes", "Bytes of a stateful operator's state", _LABELS)
LATE_ROWS_DROPPED = Gauge(
    "arroyo_worker_late_rows_dropped",
    "Rows a stateful operator dropped as behind the watermark",
    _LABELS,
)


# The totals, by operator: each query reading a source reads all of it, so an operator's total
# is the largest any one query counted (as the job's dropped records are), not their sum.
_TOTALS = (
    ("messages_recv", MESSAGES_RECV),
    ("messages_sent", MESSAGES_SENT),
    ("deserialization_errors", DESERIALIZATION_ERRORS),
    ("late_rows_dropped", LATE_ROWS_DROPPED),
)


class OperatorMetrics:
    """Turns a job's batch reports into the controller's messages and Prometheus' figures."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        # (operator, total's name) -> query -> its count so far.
        self._totals: dict[tuple[str, str], dict[str, int]] = {}

    def nodes(self, report: BatchReport) -> list[pb.NodeMetrics]:
        self._count(report.query, report.operators)
        return [
            pb.NodeMetrics(
                operator_id=o.operator_id,
                label=o.label,
                query=report.query,
                messages_recv=o.messages_recv,
                messages_sent=o.messages_sent,
                interval_seconds=report.interval_seconds,
                backpressure=o.backpressure,
                stateful=o.stateful,
                state_rows=o.state_rows,
                state_bytes=o.state_bytes,
                state_rows_updated=o.state_rows_updated,
                late_rows_dropped=o.late_rows_dropped,
                deserialization_errors=o.deserialization_errors,
                batch_duration_micros=o.batch_duration_micros,
                watermark_lag_micros=o.watermark_lag_micros,
            )
            for o in report.operators
        ]

    def _count(self, query: str, operators: Iterable[OperatorReport]) -> None:
        for o in operators:
            labels = (self.job_id, o.operator_id, o.label, "0")
            for name, gauge in _TOTALS:
                by_query = self._totals.setdefault((o.operator_id, name), {})
                by_query[query] = by_query.get(query, 0) + getattr(o, name)
                gauge.labels(*labels).set(max(by_query.values()))
            BACKPRESSURE.labels(*labels).set(o.backpressure)
            if o.stateful:
                STATE_ROWS.labels(*labels).set(o.state_rows)
                STATE_BYTES.labels(*labels).set(o.state_bytes)
