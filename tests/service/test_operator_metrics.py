"""The worker's metrics per operator (arroyo.worker.operator_metrics): what it sends the
controller with each batch, and what its Prometheus endpoint counts, under Arroyo's names."""

from __future__ import annotations

import re

from prometheus_client import generate_latest

from arroyo.engine.operators import OperatorReport
from arroyo.engine.runner import BatchReport
from arroyo.worker.operator_metrics import OperatorMetrics


def _report(query: str, *operators: OperatorReport) -> BatchReport:
    return BatchReport(
        query=query,
        batch_id=0,
        offsets={},
        watermark=None,
        rows_in=0,
        input_rows_per_second=0.0,
        processed_rows_per_second=0.0,
        duration_ms=250,
        state_rows=0,
        state_bytes=0,
        dropped_bad_records=0,
        operators=list(operators),
        interval_seconds=0.25,
    )


def _sample(name: str, job: str, operator: str) -> float:
    text = generate_latest().decode()
    pattern = (
        rf'^{name}{{job_id="{job}",operator_id="{re.escape(operator)}",'
        rf'operator_name="[^"]*",subtask_idx="0"}} (\S+)$'
    )
    [value] = re.findall(pattern, text, re.MULTILINE)
    return float(value)


def test_each_batch_counts_under_arroyos_names_and_reaches_the_controller() -> None:
    metrics = OperatorMetrics("job_prom")
    source = OperatorReport("impulse", "source", messages_sent=10, deserialization_errors=2)
    sink = OperatorReport("sink:out", "kafka", messages_recv=4, backpressure=0.5)
    state = OperatorReport(
        "sink:out/stateStoreSave0",
        "aggregate",
        stateful=True,
        state_rows=3,
        state_bytes=800,
        late_rows_dropped=1,
    )
    [first, *_] = metrics.nodes(_report("out_0", source, sink, state))
    assert (first.operator_id, first.messages_sent, first.interval_seconds) == ("impulse", 10, 0.25)
    nodes = metrics.nodes(_report("out_0", source, sink))
    assert all(n.query == "out_0" for n in nodes)
    # Another query reading the source reads all of it too: the total is not their sum.
    metrics.nodes(_report("other_1", OperatorReport("impulse", "source", messages_sent=15)))

    assert _sample("arroyo_worker_messages_sent", "job_prom", "impulse") == 20
    assert _sample("arroyo_worker_deserialization_errors", "job_prom", "impulse") == 4
    assert _sample("arroyo_worker_messages_recv", "job_prom", "sink:out") == 8
    assert _sample("arroyo_worker_backpressure", "job_prom", "sink:out") == 0.5
    assert _sample("arroyo_worker_state_bytes", "job_prom", "sink:out/stateStoreSave0") == 800
    assert _sample("arroyo_worker_late_rows_dropped", "job_prom", "sink:out/stateStoreSave0") == 1
