"""Each operator's metrics over time, kept by the controller for a bounded time.

Workers report every micro-batch of every query (``NodeMetrics``: counts over the time since
the query's previous batch). The history sums them into buckets of ``bucket_s`` seconds and
keeps ``retention_s`` of them, so its size does not depend on how often batches commit. A
bucket's rates are per second over the time its batches cover, summed over the queries that
report an operator (two queries reading one source each read all of it); its gauges are the
last reported (state) or the highest (backpressure); its other counts are summed.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field

from arroyo_rpc.v1 import controller_pb2 as pb

# Rows per second.
RATES = ("messages_recv", "messages_sent")
# Values at the bucket's last report.
GAUGES = ("state_rows", "state_bytes")
# Counts within the bucket.
COUNTS = ("state_rows_updated", "late_rows_dropped", "deserialization_errors")
SERIES = (*RATES, "backpressure", *GAUGES, *COUNTS)


@dataclass
class _Bucket:
    start_micros: int
    # Per query: rows received, rows sent, the seconds they cover.
    rates: dict[str, list[float]] = field(default_factory=dict)
    backpressure: float = 0.0
    gauges: dict[str, float] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0.0))

    def add(self, n: pb.NodeMetrics) -> None:
        recv, sent, seconds = self.rates.setdefault(n.query, [0.0, 0.0, 0.0])
        self.rates[n.query] = [
            recv + n.messages_recv,
            sent + n.messages_sent,
            seconds + n.interval_seconds,
        ]
        self.backpressure = max(self.backpressure, n.backpressure)
        if n.state_rows or n.state_bytes:
            self.gauges = {"state_rows": n.state_rows, "state_bytes": n.state_bytes}
        for name in COUNTS:
            self.counts[name] += getattr(n, name)

    def values(self) -> dict[str, float]:
        recv = sum(r / s for r, _, s in self.rates.values() if s > 0)
        sent = sum(r / s for _, r, s in self.rates.values() if s > 0)
        return {
            "messages_recv": recv,
            "messages_sent": sent,
            "backpressure": self.backpressure,
            **self.gauges,
            **self.counts,
        }


@dataclass
class _Operator:
    label: str
    buckets: collections.deque[_Bucket]


class MetricsHistory:
    """One job's operators over time."""

    def __init__(self, retention_s: float, bucket_s: float) -> None:
        self.bucket_micros = max(1, int(bucket_s * 1_000_000))
        self.keep = max(1, int(retention_s / bucket_s))
        self._operators: dict[str, _Operator] = {}

    def record(self, time_micros: int, nodes: Iterable[pb.NodeMetrics]) -> None:
        start = time_micros - time_micros % self.bucket_micros
        for n in nodes:
            op = self._operators.get(n.operator_id)
            if op is None:
                op = _Operator(n.label, collections.deque(maxlen=self.keep))
                self._operators[n.operator_id] = op
            if not op.buckets or op.buckets[-1].start_micros < start:
                op.buckets.append(_Bucket(start))
            # A report older than the newest bucket (a retried call) joins the newest.
            op.buckets[-1].add(n)

    def series(self) -> list[pb.OperatorSeries]:
        out = []
        for operator_id, op in self._operators.items():
            points: dict[str, list[pb.MetricPoint]] = {name: [] for name in SERIES}
            for bucket in op.buckets:
                for name, value in bucket.values().items():
                    points[name].append(
                        pb.MetricPoint(time_micros=bucket.start_micros, value=value)
                    )
            out.append(
                pb.OperatorSeries(
                    operator_id=operator_id,
                    label=op.label,
                    series=[
                        pb.MetricSeries(name=name, points=p) for name, p in points.items() if p
                    ],
                )
            )
        return out
