"""Each operator's metrics over time (arroyo.controller.history): bounded by time, whatever the
rate of reports, and a state that empties is recorded as empty."""

from __future__ import annotations

from arroyo.controller.history import MetricsHistory
from arroyo_rpc.v1 import controller_pb2 as pb

SECOND = 1_000_000


def _points(history: MetricsHistory, operator: str, name: str) -> list[tuple[int, float]]:
    for o in history.series():
        if o.operator_id == operator:
            for s in o.series:
                if s.name == name:
                    return [(p.time_micros, p.value) for p in s.points]
    return []


def test_buckets_older_than_the_retention_are_dropped_however_sparse_the_reports() -> None:
    history = MetricsHistory(retention_s=30, bucket_s=5)
    source = pb.NodeMetrics(operator_id="s", query="q", messages_sent=10, interval_seconds=2)
    # One report a minute for ten minutes: only the newest bucket is within the last 30 s.
    for minute in range(10):
        history.record(minute * 60 * SECOND, [source])
    assert _points(history, "s", "messages_sent") == [(9 * 60 * SECOND, 5.0)]


def test_a_state_that_empties_is_recorded_as_empty() -> None:
    history = MetricsHistory(retention_s=60, bucket_s=5)
    state = pb.NodeMetrics(operator_id="q/stateStoreSave0", query="q", stateful=True)
    state.state_rows, state.state_bytes = 4, 512
    history.record(0, [state])
    state.state_rows, state.state_bytes = 0, 0
    history.record(5 * SECOND, [state])
    assert _points(history, "q/stateStoreSave0", "state_bytes") == [(0, 512.0), (5 * SECOND, 0.0)]


def test_a_sink_has_its_querys_longest_batch_and_latest_watermark_lag() -> None:
    history = MetricsHistory(retention_s=60, bucket_s=5)
    sink = pb.NodeMetrics(operator_id="sink:out", query="q", messages_recv=1, interval_seconds=1)
    for duration, lag in ((2.0, 9.0), (0.5, 3.0)):
        sink.batch_duration_micros, sink.watermark_lag_micros = (
            int(duration * SECOND),
            int(lag * SECOND),
        )
        history.record(SECOND, [sink])
    assert _points(history, "sink:out", "batch_duration") == [(0, 2.0)]
    assert _points(history, "sink:out", "watermark_lag") == [(0, 3.0)]
    # A query without a watermark (-1), and a node that is no sink: no such series.
    sink.watermark_lag_micros = -1
    history.record(6 * SECOND, [sink, pb.NodeMetrics(operator_id="src", query="q")])
    assert _points(history, "sink:out", "watermark_lag") == [(0, 3.0)]
    assert _points(history, "src", "batch_duration") == []
