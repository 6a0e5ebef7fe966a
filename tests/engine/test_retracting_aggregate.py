"""An aggregate over an updating aggregate in one query: the inner aggregate runs as Arroyo's
retracting aggregate (libs/arroyo/java/arroyo/sql/RetractingAggregate.java), whose changes the
outer one reads as signed rows, without a stage. What it computes is checked by the golden
cases updating_aggregate_of_aggregate, updating_aggregate_of_aggregate_functions and
updating_join_nested_aggregate (straight and stopped-and-resumed, the last two recomputed by
DuckDB); here, which inner aggregates it takes, and Nexmark q4 unbounded."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.program.spec import PipelineProgram
from arroyo.testing.kafka import KafkaBroker
from tests.sql.harness import INPUTS, kafka_clicks_sql, nexmark_q4_sql, replay_changes
from tests.waiting import wait_until

pytestmark = pytest.mark.spark

EVENTS = f"""
CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, kind TEXT, amount DOUBLE,
    price DECIMAL(10, 2), ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "events.json"}', format = 'json',
      type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
"""


def _plan(spark: SparkSession, tmp_path: Path, inner: str, outer: str) -> PipelineProgram:
    return spark_planner(spark, state_dir=tmp_path).plan(
        f"{EVENTS}CREATE VIEW inner_agg AS {inner};\nINSERT INTO out {outer};"
    )


def _runs_in_one_query(program: PipelineProgram) -> bool:
    changes = [v for v in program.views if v.changes is not None]
    stages = [s for s in program.sources if s.connector == "__stage"]
    assert bool(changes) != bool(stages), (changes, stages)
    if changes:
        (query,) = program.queries
        assert query.unchecked_chain
    return bool(changes)


@pytest.mark.parametrize(
    ("inner", "fused"),
    [
        ('SELECT "user", count(*) AS v FROM events GROUP BY "user"', True),
        (
            'SELECT "user", kind, sum(id) AS v, min(kind) AS k FROM events GROUP BY "user", kind',
            True,
        ),
        (
            'SELECT upper("user") AS u, avg(amount) AS v, max(ts) AS t FROM events '
            'GROUP BY upper("user")',
            True,
        ),
        ('SELECT "user", max(price) AS v FROM events WHERE amount > 10 GROUP BY "user"', True),
        # A HAVING deletes rows; the retracting aggregate has no way to say so.
        ('SELECT "user", count(*) AS v FROM events GROUP BY "user" HAVING count(*) > 2', False),
        # Functions it does not run: a distinct count, a sum of decimals (Spark widens them).
        ('SELECT "user", count(DISTINCT kind) AS v FROM events GROUP BY "user"', False),
        ('SELECT "user", sum(price) AS v FROM events GROUP BY "user"', False),
        # An expression over an aggregate.
        ('SELECT "user", count(*) + 1 AS v FROM events GROUP BY "user"', False),
    ],
)
def test_plain_inner_aggregates_run_in_the_outer_query_others_through_a_stage(
    spark: SparkSession, tmp_path: Path, inner: str, fused: bool
) -> None:
    program = _plan(spark, tmp_path, inner, "SELECT count(*) AS n, sum(v) AS s FROM inner_agg")
    assert _runs_in_one_query(program) == fused


def test_two_sinks_may_read_one_aggregate_of_an_aggregate(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Each sink's query runs its own inner aggregate (a stage would have one reader)."""
    program = spark_planner(spark, state_dir=tmp_path).plan(
        EVENTS
        + "CREATE TABLE out2 WITH (connector = 'blackhole');\n"
        + 'CREATE VIEW v AS SELECT count(*) AS n, sum(c) AS s FROM (SELECT "user", '
        + 'count(*) AS c FROM events GROUP BY "user") AS per_user;\n'
        + "INSERT INTO out SELECT * FROM v;\nINSERT INTO out2 SELECT * FROM v;"
    )
    assert len(program.queries) == 2
    assert all(q.unchecked_chain for q in program.queries)
    assert not [s for s in program.sources if s.connector == "__stage"]


def test_nexmark_q4_runs_unbounded_as_one_query(spark: SparkSession, tmp_path: Path) -> None:
    """The join, each auction's maximum and the average per category, in one streaming query;
    the averages at the sink, replayed, are one row per category (the changes' before-images
    checked by replay_changes)."""
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = nexmark_q4_sql(out)
    program = spark_planner(spark, state_dir=state).plan(sql)
    assert _runs_in_one_query(program)
    runner = PipelineRunner(spark, program, state)
    runner.start()
    waiter = threading.Thread(target=runner.wait, kwargs={"timeout": 300})
    waiter.start()

    def records() -> list[dict[str, Any]]:
        return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []

    try:
        # An update: an average that retracted what an auction's earlier maximum counted.
        wait_until("an updated average", lambda: any(r["op"] == "u" for r in records()), 240)
    finally:
        runner.stop()
        waiter.join()
    (query,) = runner.queries
    assert query.exception() is None
    averages = replay_changes(records())
    assert averages and all(r["avg_price"] > 0 for r in averages)
    assert len({r["category"] for r in averages}) == len(averages)


@pytest.mark.kafka
def test_a_key_idle_for_the_ttl_leaves_the_outer_aggregate(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    """With ``SET updating_ttl``, an inner key not updated for the TTL is dropped and its last
    row retracted: the outer aggregate stops counting it, and counts it afresh, once, when it
    comes back."""
    out = tmp_path / "out.json"
    sql = (
        kafka_clicks_sql(kafka_broker.bootstrap_servers, kafka_topic, out, "8 seconds")
        + "CREATE VIEW per_key AS SELECT k, count(*) AS n FROM clicks GROUP BY k;\n"
        "INSERT INTO out SELECT count(*) AS keys, sum(n) AS clicks FROM per_key;"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    assert _runs_in_one_query(program)
    runner = PipelineRunner(spark, program, tmp_path / "state", trigger_interval_ms=200)

    def totals() -> list[dict[str, Any] | None]:
        lines = out.read_text().splitlines() if out.exists() else []
        assert all(q.isActive for q in runner.queries), runner.queries[0].exception()
        return [json.loads(line)["after"] for line in lines]

    def reaches(after: dict[str, Any]) -> None:
        wait_until(f"{after} at the sink", lambda: totals() and totals()[-1] == after, 120)

    runner.start()
    try:
        kafka_broker.produce(kafka_topic, ['{"k": "idle"}', '{"k": "idle"}'])
        reaches({"keys": 1, "clicks": 2})
        idle_since = time.monotonic()
        # 'busy' is updated again as soon as its last update is written (a batch or two
        # apart, well under the TTL), until 'idle' has gone 1.5 TTLs without one.
        n = 0
        while time.monotonic() - idle_since < 12:
            n += 1
            kafka_broker.produce(kafka_topic, ['{"k": "busy"}'])
            wait_until(
                f"busy's click {n} at the sink",
                lambda n=n: any(t and t["clicks"] in (n, n + 2) for t in totals()[-2:]),
                120,
            )
        seen = totals()
        kafka_broker.produce(kafka_topic, ['{"k": "idle"}'])
        reaches({"keys": 2, "clicks": n + 1})
    finally:
        runner.stop()
        runner.wait(60)  # the queries stop here: later tests reuse their names
    # While 'idle' was gone, the totals were 'busy's alone.
    assert {"keys": 1, "clicks": n} in seen


def test_min_and_max_order_values_as_spark_does(spark: SparkSession, tmp_path: Path) -> None:
    """Strings by code point (an emoji above U+FFFF sorts after U+FFFD, where Java's UTF-16
    order puts it before), NaN above every double: the inner minima and maxima, read through
    the outer aggregate, equal Spark's own batch aggregate over the same rows."""
    data, out = tmp_path / "t.json", tmp_path / "out.json"
    values = [("a", 1.5), ("\ufffd", -0.0), ("\U0001f600", 0.0), ("z", -2.0), ("b", 3.0)]
    data.write_text(
        "".join(
            json.dumps({"k": i % 2, "s": s, "d": d, "ts": f"2024-01-01T00:00:{i:02d}"}) + "\n"
            for i, (s, d) in enumerate(values * 2)
        )
    )
    inner = (
        "SELECT k, max(s) AS ms, min(s) AS ns, "
        "max(CASE WHEN d < -1 THEN CAST('NaN' AS DOUBLE) ELSE d END) AS md, min(d) AS nd, "
        "count(*) AS c FROM t GROUP BY k"
    )
    outer = "SELECT ms, ns, md, nd, sum(c) AS c FROM inner_agg GROUP BY ms, ns, md, nd"
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(
        f"CREATE TABLE t (k INT, s TEXT, d DOUBLE, ts TIMESTAMP NOT NULL, WATERMARK FOR ts) "
        f"WITH (connector = 'single_file', path = '{data}', format = 'json', type = 'source');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', "
        "format = 'debezium_json', type = 'sink');\n"
        f"CREATE VIEW inner_agg AS {inner};\nINSERT INTO out {outer};"
    )
    assert _runs_in_one_query(program)
    runner = PipelineRunner(spark, program, tmp_path / "state")
    runner.start()
    assert runner.wait(timeout=300)
    got = replay_changes([json.loads(line) for line in out.read_text().splitlines()])

    batch = spark.read.schema("k INT, s STRING, d DOUBLE, ts TIMESTAMP").json(str(data))
    batch.createOrReplaceTempView("t_batch")
    spark.sql(inner.replace("FROM t ", "FROM t_batch ")).createOrReplaceTempView("inner_batch")
    expected = [
        row.asDict() for row in spark.sql(outer.replace("inner_agg", "inner_batch")).collect()
    ]

    def normal(rows: list[dict[str, Any]]) -> list[str]:
        # The JSON sink writes NaN as Spark's to_json does, as the string "NaN".
        def value(v: Any) -> Any:
            return "NaN" if isinstance(v, float) and math.isnan(v) else v

        return sorted(repr(sorted((k, value(v)) for k, v in r.items())) for r in rows)

    assert normal(got) == normal(expected)
    assert {r["ms"] for r in got} == {"\U0001f600"}  # the emoji is each group's maximum
