"""Metrics per operator of the dataflow graph (arroyo.engine.operators): each source table's
rows, named by the table although Spark names its streams otherwise; each stateful operator's
state; the rows each sink takes, even where Spark's sink reports none."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.operators import BUSY_WINDOW_S, BusyTime, OperatorReport
from arroyo.engine.runner import BatchReport, PipelineRunner
from tests.sql.harness import INPUTS, read_output

pytestmark = pytest.mark.spark

# Two sources in one query (a window over their union), and a second query reading one of them
# into a sink written by foreachBatch (an updating result: Spark counts no rows for it).
QUERY = f"""
CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "payments.json"}', format = 'json',
      type = 'source');
CREATE TABLE windows WITH (connector = 'single_file', path = '$windows', format = 'json',
      type = 'sink');
CREATE TABLE totals WITH (connector = 'single_file', path = '$totals',
      format = 'debezium_json', type = 'sink');
INSERT INTO windows SELECT tumble(interval '1 minute') AS w, count(*) AS n FROM (
    SELECT order_id, ts FROM orders UNION ALL SELECT order_id, ts FROM payments
) GROUP BY 1;
INSERT INTO totals SELECT customer, sum(total) AS total FROM orders GROUP BY customer;
"""


SINKS = ("sink:windows", "sink:totals")


def _lines(name: str) -> int:
    return len((INPUTS / name).read_text().splitlines())


def test_each_node_of_the_graph_gets_its_rows(spark: SparkSession, tmp_path: Path) -> None:
    windows, totals, state = tmp_path / "windows.json", tmp_path / "totals.json", tmp_path / "s"
    sql = QUERY.replace("$windows", str(windows)).replace("$totals", str(totals))
    program = spark_planner(spark, state_dir=state).plan(sql)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=8)
    reports: list[BatchReport] = []
    runner.on_batch = reports.append
    runner.start()
    assert runner.wait(timeout=300)

    by_query: dict[str, list[OperatorReport]] = defaultdict(list)
    for report in reports:
        by_query[report.query].extend(report.operators)
    (union,) = [q for q in by_query if q.startswith("windows")]
    (totals_query,) = [q for q in by_query if q.startswith("totals")]

    def sent(query: str, node: str) -> int:
        return sum(o.messages_sent for o in by_query[query] if o.operator_id == node)

    def received(query: str, node: str) -> int:
        return sum(o.messages_recv for o in by_query[query] if o.operator_id == node)

    # Each source's rows under its table's name, in the query that reads it.
    assert sent(union, "orders") == _lines("orders.json")
    assert sent(union, "payments") == _lines("payments.json")
    assert sent(totals_query, "orders") == _lines("orders.json")
    assert sent(totals_query, "payments") == 0
    assert {o.label for o in by_query[union] if o.operator_id == "orders"} == {"single_file"}
    # Every row each sink was handed: the windows written, and the updating result's changes
    # (whose foreachBatch sink Spark counts as -1).
    assert received(union, "sink:windows") == len(read_output(windows))
    assert received(totals_query, "sink:totals") == len(read_output(totals)) > 0
    # The stateful operators, under the sink of their query, with their state.
    stateful = [o for o in by_query[totals_query] if o.operator_id.startswith("sink:totals/")]
    assert stateful, by_query[totals_query]
    assert all(o.stateful for o in stateful)
    assert sum(o.state_rows_updated for o in stateful) > 0
    assert max(o.state_bytes for o in stateful) > 0
    # RocksDB's rows are not counted by default (arroyo.engine.session): said, not shown as 0.
    assert {o.state_rows for o in stateful} == {-1}
    assert all(r.interval_seconds > 0 for r in reports)
    # Each sink has its query's batch duration, and its watermark's lag behind the batch (the
    # events are of 2024: years), which no other node has.
    sinks = [o for q in by_query.values() for o in q if o.operator_id in SINKS]
    assert sinks and all(o.batch_duration_micros > 0 for o in sinks)
    lags = [o.watermark_lag_micros for o in by_query[union] if o.operator_id == "sink:windows"]
    assert max(lags) > 365 * 24 * 3600 * 1_000_000
    others = [o for q in by_query.values() for o in q if o.operator_id not in SINKS]
    assert {(o.batch_duration_micros, o.watermark_lag_micros) for o in others} == {(0, -1)}
    assert all(0.0 <= o.backpressure <= 1.0 for q in by_query.values() for o in q)


def test_backpressure_is_the_share_of_the_last_seconds_spent_in_batches() -> None:
    # A query that keeps up: a batch of 0.15 s a second, each followed at once by one that
    # closes windows without new input (Spark's input rate over processing rate says 1 here).
    idle = BusyTime()
    busy = 0.0
    for second in range(30):
        busy = idle.add(second, 0.15)
        busy = idle.add(second + 0.15, 0.15)
    assert busy == pytest.approx(0.3)
    # One falling behind: batches back to back.
    behind = BusyTime()
    for n in range(30):
        busy = behind.add(n * 2.0, 2.0)
    assert busy == pytest.approx(1.0)
    # A batch longer than the window counts the window's part of it only.
    assert BusyTime().add(0.0, 3 * BUSY_WINDOW_S) == 1.0
    # After a pause, the old batches no longer count.
    assert behind.add(1000.0, 0.5) == pytest.approx(0.5 / BUSY_WINDOW_S)
