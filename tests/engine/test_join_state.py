"""A join without windows keeps rows only as long as they can still match: a condition between
the inputs' event times (an interval join, Nexmark q9's BETWEEN) lets the join drop a row once
the watermark is past it, where without one rows stay for ``updating_ttl`` (a day by default).
Such joins run through Arroyo's interval join (IntervalJoin.java), whose state holds a key's
rows together: its state counts keys, so the join here is keyed by order."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from tests.sql.harness import INPUTS, read_output, replay_changes

pytestmark = pytest.mark.spark

SELF_JOIN = f"""
CREATE TABLE a (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE b (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$out', format = 'json', type = 'sink');
INSERT INTO out SELECT a.order_id AS first, b.order_id AS next
FROM a JOIN b ON a.order_id = b.order_id $condition;
"""


def _peak_state_rows(spark: SparkSession, tmp_path: Path, condition: str) -> tuple[int, int]:
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = SELF_JOIN.replace("$out", str(out)).replace("$condition", condition)
    program = spark_planner(spark, state_dir=state).plan(sql)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=3)
    runner.start()
    assert runner.wait(timeout=300)
    (query,) = runner.queries
    peaks = [
        sum(op["numRowsTotal"] for op in p["stateOperators"])
        for p in query.recentProgress
        if p["numInputRows"]
    ]
    return max(peaks), len(read_output(out))


@pytest.mark.slow
def test_a_time_bounded_join_drops_rows_the_watermark_has_passed(
    spark: SparkSession, tmp_path: Path, counted_state: None
) -> None:
    bounded, matched = _peak_state_rows(
        spark, tmp_path / "bounded", "WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE"
    )
    unbounded, _ = _peak_state_rows(spark, tmp_path / "unbounded", "")
    assert matched == 30  # each order with itself
    # Unbounded, every order's rows are kept to the end (30 keys); bounded, only those of the
    # last minute or so (three orders a batch, 13 s apart).
    assert unbounded == 30
    assert bounded <= 10


@pytest.mark.slow
def test_q9_with_its_bids_dropped_as_the_watermark_passes_equals_the_batch_answer(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Nexmark q9's join states its time bound on the events' own fields (``bid.datetime``,
    ``auction.datetime``), which equal the source's event time: each bid leaves the join's
    state once the watermark passes it. The winning bids must be those of the same events
    computed as a batch (event times shift with the start; the answer does not)."""
    from arroyo.connectors.runtime.nexmark_generator import nexmark_batch

    rate, total = 20_000, 40_000
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = (
        f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{rate}', "
        f"runtime = '{total / rate}');\n"
        f"CREATE TABLE sink WITH (connector = 'single_file', path = '{out}', "
        "format = 'debezium_json', type = 'sink');\n"
        + (Path(__file__).parents[2] / "bench" / "nexmark" / "queries" / "q9.sql").read_text()
    )
    runner = PipelineRunner(
        spark, spark_planner(spark, state_dir=state).plan(sql), state, max_records_per_batch=4_000
    )
    runner.start()
    assert runner.wait(timeout=600)
    got = {r["id"]: r["price"] for r in replay_changes(read_output(out))}

    nexmark_batch(spark, event_rate=rate, start_ms=0, total=total).createOrReplaceTempView(
        "nexmark_q9_batch"
    )
    expected = {
        r.id: r.price
        for r in spark.sql("""
            SELECT A.auction.id AS id, max(B.bid.price) AS price
            FROM nexmark_q9_batch AS A JOIN nexmark_q9_batch AS B
            ON A.auction.id = B.bid.auction
            WHERE B.bid.datetime BETWEEN A.auction.datetime AND A.auction.expires
            GROUP BY A.auction.id""").collect()
    }
    assert len(expected) > 500
    assert got == expected
