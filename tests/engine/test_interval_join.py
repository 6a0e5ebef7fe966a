"""Aggregates over joins of two streams whose event times the condition bounds against each
other run the join through Arroyo's interval join (libs/arroyo/java/arroyo/sql/
IntervalJoin.java: a key's rows of both sides in one state value): the same pairs as Spark's
join, each side's rows dropped as the watermark passes them, and recoverable from its
checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.program.spec import PipelineProgram
from tests.sql.harness import INPUTS, read_output, replay_changes, run_case

pytestmark = pytest.mark.spark

TABLES = f"""
CREATE TABLE a (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE b (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$out', format = 'debezium_json',
      type = 'sink');
"""

# Each order with the later orders of its customer within a minute: several rows a key on
# both sides, pairs inside and outside the bound, a condition beyond the key and the times.
FOLLOWERS = """
INSERT INTO out SELECT a.order_id, count(*) AS followers, max(b.total) AS biggest
FROM a JOIN b ON a.customer = b.customer
WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE AND b.order_id <> a.order_id
GROUP BY a.order_id;
"""

BATCH = """
SELECT a.order_id, count(*) AS followers, max(b.total) AS biggest
FROM orders_batch AS a JOIN orders_batch AS b ON a.customer = b.customer
WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE AND b.order_id <> a.order_id
GROUP BY a.order_id
"""


def _expected(spark: SparkSession) -> dict[int, tuple[int, int]]:
    spark.read.schema("order_id BIGINT, customer STRING, total BIGINT, ts TIMESTAMP").json(
        str(INPUTS / "orders.json")
    ).createOrReplaceTempView("orders_batch")
    return {r.order_id: (r.followers, r.biggest) for r in spark.sql(BATCH).collect()}


def _got(out: Path) -> dict[int, tuple[int, int]]:
    return {r["order_id"]: (r["followers"], r["biggest"]) for r in replay_changes(read_output(out))}


def test_a_bounded_join_under_an_aggregate_is_planned_as_an_interval_join(
    spark: SparkSession, tmp_path: Path
) -> None:
    sql = TABLES.replace("$out", str(tmp_path / "out.json")) + FOLLOWERS
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    (join,) = [v for v in program.views if v.interval_join is not None]
    assert join.interval_join is not None
    # b.ts BETWEEN a.ts AND a.ts + 1 minute, restated on the event times.
    assert (join.interval_join.lower_us, join.interval_join.upper_us) == (0, 60_000_000)
    # Only the columns the query reads travel through the join's state.
    assert "total" in join.interval_join.right_sql
    assert "total" not in join.interval_join.left_sql
    assert join.interval_join.shared_sql is None  # two tables: each read on its own
    assert PipelineProgram.from_json(program.to_json()) == program


def test_keys_of_different_types_are_left_to_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's join compares a BIGINT with an INT as BIGINTs; the interval join takes keys of
    one type, so such a join stays Spark's."""
    tables = TABLES.replace("b (order_id BIGINT", "b (order_id INT")
    sql = tables.replace("$out", str(tmp_path / "out.json")) + (
        "INSERT INTO out SELECT a.order_id, count(*) AS n FROM a JOIN b "
        "ON a.order_id = b.order_id GROUP BY a.order_id;"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    assert not [v for v in program.views if v.interval_join is not None]


@pytest.mark.slow
@pytest.mark.parametrize("resume_part_way", [False, True])
def test_the_pairs_are_those_of_the_batch_join(
    spark: SparkSession, tmp_path: Path, resume_part_way: bool
) -> None:
    """Straight through, and once stopped after two batches of four rows (the watermark
    passing rows of both sides between them) and resumed from the checkpoint."""
    out = tmp_path / "out.json"
    run_case(
        spark,
        TABLES.replace("$out", str(out)) + FOLLOWERS,
        tmp_path,
        resume_part_way=resume_part_way,
    )
    expected = _expected(spark)
    assert len(expected) > 10
    assert _got(out) == expected


@pytest.mark.slow
def test_rows_leave_the_state_as_the_watermark_passes_them(
    spark: SparkSession, tmp_path: Path, counted_state: None
) -> None:
    """Keyed by order, each key's rows go once the watermark is a minute past them: the
    state holds a few keys at a time, where without the bound it keeps every key for
    ``updating_ttl`` (a day)."""

    def peak_keys(work: Path, condition: str) -> int:
        out, state = work / "out.json", work / "state"
        sql = TABLES.replace("$out", str(out)) + (
            "INSERT INTO out SELECT a.order_id, count(*) AS n FROM a JOIN b "
            f"ON a.order_id = b.order_id {condition} GROUP BY a.order_id;"
        )
        runner = PipelineRunner(
            spark, spark_planner(spark, state_dir=state).plan(sql), state, max_records_per_batch=3
        )
        runner.start()
        assert runner.wait(timeout=300)
        assert {r["order_id"] for r in replay_changes(read_output(out))} == set(range(30))
        # The join and the count run in one query (the join's operator, then the aggregate's).
        (query,) = runner.queries
        return max(
            sum(
                op["numRowsTotal"]
                for op in p["stateOperators"]
                if op["operatorName"] == "flatMapGroupsWithState"
            )
            for p in query.recentProgress
            if p["numInputRows"]
        )

    bounded = peak_keys(tmp_path / "bounded", "WHERE b.ts BETWEEN a.ts AND a.ts")
    unbounded = peak_keys(tmp_path / "unbounded", "")
    assert unbounded == 30  # every order's key, to the end
    assert bounded <= 10


@pytest.mark.slow
def test_a_view_over_a_joins_aggregate_feeds_two_sinks(spark: SparkSession, tmp_path: Path) -> None:
    """The join runs in the aggregate's own query, so each sink reading the view runs its
    own (a stage between them could be read by one query only)."""
    out, other = tmp_path / "out.json", tmp_path / "other.json"
    sql = (
        TABLES.replace("$out", str(out))
        + f"CREATE TABLE other WITH (connector = 'single_file', path = '{other}', "
        "format = 'debezium_json', type = 'sink');\n"
        + FOLLOWERS.replace("INSERT INTO out", "CREATE VIEW followers AS")
        + "INSERT INTO out SELECT * FROM followers;\n"
        + "INSERT INTO other SELECT * FROM followers WHERE followers > 1;"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    assert len(program.queries) == 2
    assert all(q.unchecked_chain for q in program.queries)
    run_case(spark, sql, tmp_path, resume_part_way=False)
    expected = _expected(spark)
    assert _got(out) == expected
    assert _got(other) == {k: v for k, v in expected.items() if v[0] > 1}
    assert len(_got(other)) < len(expected)


@pytest.mark.slow
def test_a_join_into_a_sink_filters_each_input_before_the_join(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A join written into a sink runs through the interval join too; conditions on one
    input's columns alone filter that input before its rows reach the join's state (the
    operator hides the join from Spark's own filter push-down)."""
    out = tmp_path / "out.json"
    condition = (
        "WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE AND a.total > 20 "
        "AND b.customer <> 'bob'"
    )
    sql = TABLES.replace("$out", str(out)).replace("'debezium_json'", "'json'") + (
        "INSERT INTO out SELECT a.order_id AS first, b.order_id AS next "
        f"FROM a JOIN b ON a.customer = b.customer {condition};"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    (join,) = [v.interval_join for v in program.views if v.interval_join is not None]
    assert "a.total > 20" in join.left_sql and "bob" not in join.left_sql
    assert "b.customer <> 'bob'" in join.right_sql and "total" not in join.right_sql
    run_case(spark, sql, tmp_path, resume_part_way=False)
    _expected(spark)  # registers orders_batch
    expected = sorted(
        (r.first, r.next)
        for r in spark.sql(
            "SELECT a.order_id AS first, b.order_id AS next FROM orders_batch AS a "
            f"JOIN orders_batch AS b ON a.customer = b.customer {condition}"
        ).collect()
    )
    assert len(expected) > 10
    assert sorted((r["first"], r["next"]) for r in read_output(out)) == expected


def test_a_column_named_as_the_other_input_is_that_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Unqualified, ``b`` is input a's column ``b`` (as in Spark's join), not input b's row,
    which the interval join's view holds as a column named ``b``."""
    out = tmp_path / "out.json"
    tables = TABLES.replace("$out", str(out)).replace("'debezium_json'", "'json'")
    tables = tables.replace("a (order_id BIGINT,", "a (order_id BIGINT, b TEXT,", 1)
    sql = tables + (
        "INSERT INTO out SELECT a.order_id, b FROM a JOIN b ON a.order_id = b.order_id;"
    )
    program = spark_planner(spark, state_dir=tmp_path / "state").plan(sql)
    assert [v for v in program.views if v.interval_join is not None]
    run_case(spark, sql, tmp_path, resume_part_way=False)
    rows = read_output(out)
    assert sorted(r["order_id"] for r in rows) == list(range(30))
    assert all(r["b"] is None for r in rows)


# The followers again, of one table joined with itself, each side filtered on its own columns.
SELF_JOIN = """
SELECT a.order_id, count(*) AS followers, max(b.total) AS biggest
FROM $a AS a JOIN $a AS b ON a.customer = b.customer
WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE AND b.order_id <> a.order_id
  AND a.total > 20 AND b.customer <> 'bob'
GROUP BY a.order_id
"""


@pytest.mark.slow
@pytest.mark.parametrize("resume_part_way", [False, True])
def test_a_self_join_reads_its_input_once(
    spark: SparkSession, tmp_path: Path, resume_part_way: bool
) -> None:
    """Both sides of a self-join come from one read of the table (each row goes to the sides
    whose filters it passes), with the pairs of the batch join, also when resumed."""
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = TABLES.replace("$out", str(out)) + f"INSERT INTO out {SELF_JOIN.replace('$a', 'a')};"
    program = spark_planner(spark, state_dir=state).plan(sql)
    (join,) = [v.interval_join for v in program.views if v.interval_join is not None]
    assert join.shared_sql is not None
    assert PipelineProgram.from_json(program.to_json()) == program
    run_case(spark, sql, tmp_path, resume_part_way=resume_part_way)
    _expected(spark)  # registers orders_batch
    expected = {
        r.order_id: (r.followers, r.biggest)
        for r in spark.sql(SELF_JOIN.replace("$a", "orders_batch")).collect()
    }
    assert len(expected) > 5
    assert _got(out) == expected
    if not resume_part_way:
        # The query (the join and its aggregate) reads the file's 30 orders in its first
        # batch, with their end-of-input marker, not 30 per side (60, before the sides shared
        # the read; the batch after reads the second marker).
        runner = PipelineRunner(spark, program, tmp_path / "again")
        runner.start()
        assert runner.wait(timeout=300)
        (query,) = runner.queries
        assert max(p["numInputRows"] for p in query.recentProgress) == 31
