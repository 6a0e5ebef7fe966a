"""Updating results as change records: the sequence for one key, and what is refused."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import PlanningError
from arroyo.testing.kafka import KafkaBroker
from tests.sql.harness import QUERIES, kafka_clicks_sql, render
from tests.waiting import wait_until


@pytest.mark.spark
def test_a_key_is_created_updated_then_deleted_when_it_stops_qualifying(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    sql = render(QUERIES / "updating_having.sql", out)
    program = spark_planner(spark, state_dir=tmp_path).plan(sql)
    runner = PipelineRunner(spark, program, tmp_path / "state", max_records_per_batch=4)
    runner.start()
    assert runner.wait(timeout=300)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    clicks = [r for r in records if (r["before"] or r["after"])["kind"] == "click"]
    assert clicks[0] == {"before": None, "after": {"kind": "click", "n": clicks[0]["after"]["n"]},
                         "op": "c"}  # fmt: skip
    assert {r["op"] for r in clicks[1:-1]} == {"u"}
    for prev, rec in itertools.pairwise(clicks):
        assert rec["before"] == prev["after"]
        if rec["after"] is not None:
            assert rec["after"]["n"] > rec["before"]["n"]
    assert clicks[-1]["op"] == "d"
    assert clicks[-1]["before"]["n"] == 19


SRC = """CREATE TABLE src (k TEXT, v BIGINT) WITH (connector = 'single_file',
  path = '/nonexistent/in.json', format = 'json', type = 'source');
"""


@pytest.mark.spark
@pytest.mark.parametrize(
    ("sql", "code"),
    [
        (
            "CREATE TABLE o WITH (connector = 'single_file', path = '/x.json', type = 'sink');\n"
            "INSERT INTO o SELECT k, count(*) FROM src GROUP BY k;",
            "updating_into_append_sink",
        ),
        (
            "CREATE TABLE o WITH (connector = 'single_file', path = '/x.json', type = 'sink', "
            "format = 'debezium_json');\nINSERT INTO o SELECT k, count(*) FROM src GROUP BY k;\n"
            "INSERT INTO o SELECT k, sum(v) FROM src GROUP BY k;",
            "updating_union",
        ),
        (
            # An aggregate over an updating result is planned (golden case
            # updating_aggregate_of_aggregate) with aggregates that can retract; a join is not.
            "CREATE VIEW c AS SELECT k, count(*) AS n FROM src GROUP BY k;\n"
            "SELECT c.n FROM c JOIN src ON c.k = src.k;",
            "updating_input",
        ),
        (
            "CREATE VIEW c AS SELECT k, count(*) AS n FROM src GROUP BY k;\n"
            "SELECT DISTINCT n FROM c;",
            "updating_input",
        ),
        (
            "CREATE VIEW c AS SELECT k, count(*) AS n FROM src GROUP BY k;\n"
            "SELECT stddev(n) FROM c;",
            "changelog_aggregate",
        ),
        (
            "CREATE TABLE cdc (k TEXT, v BIGINT) WITH (connector = 'single_file', "
            "path = '/cdc.json', format = 'debezium_json', type = 'source');",
            "changelog_needs_primary_key",
        ),
        (
            "CREATE TABLE cdc (k TEXT PRIMARY KEY, v BIGINT) WITH (connector = 'single_file', "
            "path = '/cdc.json', format = 'debezium_json', type = 'source');\n"
            "SELECT array_agg(v) FROM cdc;",
            "changelog_aggregate",
        ),
        (
            "CREATE TABLE cdc (k TEXT PRIMARY KEY, v BIGINT) WITH (connector = 'single_file', "
            "path = '/cdc.json', format = 'debezium_json', type = 'source');\n"
            "SELECT k, bit_and(v) FROM cdc GROUP BY k;",
            "changelog_aggregate",
        ),
        (
            "CREATE TABLE cdc (k TEXT PRIMARY KEY, v BIGINT) WITH (connector = 'single_file', "
            "path = '/cdc.json', format = 'debezium_json', type = 'source');\n"
            "CREATE VIEW big AS SELECT k, v FROM cdc WHERE v > 1;\nSELECT median(v) FROM big;",
            "changelog_aggregate",
        ),
    ],
    ids=[
        "json_sink",
        "two_inserts",
        "join_of_updating",
        "distinct_of_updating",
        "stddev_of_updating",
        "changelog_without_key",
        "array_agg_of_changelog",
        "bit_and_of_changelog",
        "median_of_filtered_changelog",
    ],
)
def test_refused_updating_queries(spark: SparkSession, tmp_path: Path, sql: str, code: str) -> None:
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(SRC + sql)
    assert [d.code for d in caught.value.diagnostics] == [code]


@pytest.mark.spark
def test_retracting_aggregates_are_named_as_the_query_wrote_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """min, max and count(DISTINCT) over a changelog run as Arroyo's own functions; a column
    the query leaves unnamed is still named by what it wrote, as Spark names it."""
    sql = (
        "CREATE TABLE cdc (k TEXT PRIMARY KEY, v BIGINT) WITH (connector = 'single_file', "
        "path = '/cdc.json', format = 'debezium_json', type = 'source');\n"
        "SELECT k, min(v), max(v) + 1, count(DISTINCT v), max(v) AS top FROM cdc GROUP BY k;"
    )
    program = spark_planner(spark, state_dir=tmp_path).plan(sql)
    (query,) = program.queries
    names = [n for n in spark.sql(query.sql).columns if not n.startswith("__arroyo")]
    assert names == ["k", "min(v)", "max(v) + 1", "count(DISTINCT v)", "top"]
    assert sorted(a.kind for a in program.aggregates) == ["count_distinct", "max", "max", "min"]


def _changes(path: Path, count: int, runner: PipelineRunner, timeout: float = 120) -> list[dict]:
    """The first ``count`` change records in ``path``, once the running pipeline has written
    them (failing at once if it dies, and after ``timeout`` seconds)."""

    def lines() -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    def written() -> list[str]:
        assert all(q.isActive for q in runner.queries), runner.queries[0].exception()
        found = lines()
        return found if len(found) >= count else []

    def seen() -> str:
        progress = [(p.batchId, p.numInputRows) for p in runner.queries[0].recentProgress]
        return f": {lines()} {progress}"

    found = wait_until(f"{count} change records", written, timeout, detail=seen)
    return [json.loads(line) for line in found[:count]]


@pytest.mark.kafka
@pytest.mark.spark
def test_updating_ttl_drops_the_state_of_idle_keys_only(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    """With ``SET updating_ttl``, a key not updated for the TTL starts its aggregate afresh
    when it comes back; a key updated all along keeps counting."""
    out = tmp_path / "out.json"
    sql = (
        kafka_clicks_sql(kafka_broker.bootstrap_servers, kafka_topic, out, "8 seconds")
        + "INSERT INTO out SELECT k, count(*) AS n FROM clicks GROUP BY k;"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    runner = PipelineRunner(spark, program, tmp_path / "state", trigger_interval_ms=200)
    runner.start()
    try:
        kafka_broker.produce(kafka_topic, ['{"k": "idle"}', '{"k": "idle"}'])
        assert _changes(out, 1, runner)[-1]["after"] == {"k": "idle", "n": 2}
        idle_since = time.monotonic()
        # 'busy' is updated again as soon as its last update is written (a batch or two
        # apart, well under the TTL), until 'idle' has gone 1.5 TTLs without one.
        n = 0
        while time.monotonic() - idle_since < 12:
            n += 1
            kafka_broker.produce(kafka_topic, ['{"k": "busy"}'])
            assert _changes(out, 1 + n, runner)[-1]["after"] == {"k": "busy", "n": n}
        kafka_broker.produce(kafka_topic, ['{"k": "idle"}', '{"k": "busy"}'])
        last = {r["after"]["k"]: r for r in _changes(out, n + 3, runner)[n + 1 :]}
    finally:
        runner.stop()
        runner.wait(60)  # the queries stop here: later tests reuse their names
    assert last["idle"] == {"before": {"k": "idle", "n": 2}, "after": {"k": "idle", "n": 1},
                            "op": "u"}  # fmt: skip
    assert last["busy"]["after"] == {"k": "busy", "n": n + 1}
