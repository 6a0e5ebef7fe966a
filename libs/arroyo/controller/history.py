"""Each operator's metrics over time, kept by the controller for a bounded time.

Workers report every micro-batch of every query (``NodeMetrics``: counts over the time since
the query's previous batch). The history sums them into buckets of ``bucket_s`` seconds and
keeps ``retention_s`` of them, so its size does not depend on how often batches commit. A
bucket's rates are per second over the time each query's batches cover, the highest of the
queries that report an operator (each query reading a source reads all of it; a sink has one
writer); its gauges are the last reported (state) or the highest (backpressure); its other
counts are the highest of any one query's too. A sink also has its query's batch duration (the
longest in the bucket) and watermark lag (at the bucket's last report), in seconds. Buckets
older than the retention before the newest report are dropped.
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
# A sink's (its query's), in seconds: the longest batch in the bucket, and the watermark's lag
# behind the batch's start at the bucket's last report.
QUERY_SERIES = ("batch_duration", "watermark_lag")
SERIES = (*RATES, "backpressure", *GAUGES, *COUNTS, *QUERY_SERIES)


@dataclass
class _Bucket:
    start_micros: int
    # Per query: rows received, rows sent, the seconds they cover, then COUNTS.
    queries: dict[str, list[float]] = field(default_factory=dict)
    backpressure: float = 0.0
    gauges: tuple[float, float] | None = None
    batch_duration: float | None = None
    watermark_lag: float | None = None

    def add(self, n: pb.NodeMetrics) -> None:
        sums = self.queries.setdefault(n.query, [0.0] * (3 + len(COUNTS)))
        sums[0] += n.messages_recv
        sums[1] += n.messages_sent
        sums[2] += n.interval_seconds
        for i, name in enumerate(COUNTS):
            sums[3 + i] += getattr(n, name)
        self.backpressure = max(self.backpressure, n.backpressure)
        if n.stateful:
            self.gauges = (n.state_rows, n.state_bytes)
        if n.batch_duration_micros > 0:
            seconds = n.batch_duration_micros / 1e6
            self.batch_duration = max(self.batch_duration or 0.0, seconds)
        if n.watermark_lag_micros >= 0:
            self.watermark_lag = n.watermark_lag_micros / 1e6

    def values(self) -> dict[str, float]:
        sums = list(self.queries.values())
        out = {
            "messages_recv": max((s[0] / s[2] for s in sums if s[2] > 0), default=0.0),
            "messages_sent": max((s[1] / s[2] for s in sums if s[2] > 0), default=0.0),
            "backpressure": self.backpressure,
        }
        if self.gauges is not None:
            out["state_rows"], out["state_bytes"] = self.gauges
        for i, name in enumerate(COUNTS):
            out[name] = max((s[3 + i] for s in sums), default=0.0)
        if self.batch_duration is not None:
            out["batch_duration"] = self.batch_duration
        if self.watermark_lag is not None:
            out["watermark_lag"] = self.watermark_lag
        return out


@dataclass
class _Operator:
    label: str
    buckets: collections.deque[_Bucket]


class MetricsHistory:
    """One job's operators over time."""

    def __init__(self, retention_s: float, bucket_s: float) -> None:
        self.bucket_micros = max(1, int(bucket_s * 1_000_000))
        self.retention_micros = int(retention_s * 1_000_000)
        self._operators: dict[str, _Operator] = {}
        self._newest = 0

    def record(self, time_micros: int, nodes: Iterable[pb.NodeMetrics]) -> None:
        start = time_micros - time_micros % self.bucket_micros
        for n in nodes:
            op = self._operators.get(n.operator_id)
            if op is None:
                op = _Operator(n.label, collections.deque())
                self._operators[n.operator_id] = op
            if not op.buckets or op.buckets[-1].start_micros < start:
                op.buckets.append(_Bucket(start))
            # A report older than the newest bucket (a retried call) joins the newest.
            op.buckets[-1].add(n)
        self._newest = max(self._newest, time_micros)
        oldest = self._newest - self.retention_micros
        for op in self._operators.values():
            while op.buckets and op.buckets[0].start_micros + self.bucket_micros <= oldest:
                op.buckets.popleft()

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
