"""Which joins of windows the planner runs per micro-batch (their results are checked by the
golden cases windowed_local_join, windowed_top_rows and windowed_bottom_rows, and, for the
streaming form, windowed_joins)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.build import BuildSettings, register, register_aggregate
from arroyo.engine.catalog import spark_planner
from arroyo.program.spec import AggregateSpec, PipelineProgram, SinkQuery
from tests.sql.harness import QUERIES, render


def _plan(spark: SparkSession, tmp_path: Path, sql: str) -> SinkQuery:
    program = spark_planner(spark, state_dir=tmp_path).plan(sql)
    (query,) = program.queries
    return query


@pytest.mark.spark
def test_a_join_of_windows_derived_from_one_aggregate_runs_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    query = _plan(spark, tmp_path, render(QUERIES / "windowed_local_join.sql", Path("/dev/null")))
    assert query.batch_view == "counts__batch"
    # The count runs as Arroyo's window aggregate, whose partial results each batch sums
    # (tests/engine/test_window_aggregate.py).
    assert query.batch_merge is not None
    assert query.sql == f"SELECT * FROM `{query.batch_merge}`"


@pytest.mark.spark
@pytest.mark.parametrize("session", [False, True])
def test_the_maxima_per_window_are_broadcast_to_the_join(
    spark: SparkSession, tmp_path: Path, session: bool
) -> None:
    """The view grouped by the window alone has a row per window the batch closes, so the
    join takes it whole in each task; not over session windows, which a batch may close by
    the thousand (one per key), and which Arroyo's window aggregate does not run."""
    sql = render(QUERIES / "windowed_local_join.sql", Path("/dev/null"))
    if session:
        sql = sql.replace(
            "hop(interval '30 seconds', interval '2 minutes')", "session(interval '30 seconds')"
        )
    query = _plan(spark, tmp_path, sql)
    assert query.batch_sql is not None and query.batch_view == "counts__batch"
    assert ("/*+ BROADCAST(M) */" in query.batch_sql) is not session
    assert (query.batch_merge is None) is session


@pytest.mark.spark
@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("JOIN maxima AS M", "LEFT JOIN maxima AS M"), "an outer join"),
        (("ON C.window = M.window", "ON C.c = M.top"), "no equality of the windows"),
        (
            ("ON C.window = M.window", "ON C.window = M.window OR C.c = M.top"),
            "the equality of the windows under an OR",
        ),
        (
            ("SELECT C.window.start AS start", "SELECT * FROM (SELECT C.window.start AS start"),
            "a join inside a subquery",
        ),
        (
            ("format = 'json', type = 'sink'", "format = 'parquet', type = 'sink'"),
            "a sink that takes no per-batch results",
        ),
    ],
)
def test_other_joins_of_windows_stay_streaming_joins(
    spark: SparkSession, tmp_path: Path, change: tuple[str, str], why: str
) -> None:
    sql = render(QUERIES / "windowed_local_join.sql", Path("/dev/null"))
    if "parquet" in change[1]:
        sql = sql.replace(
            "connector = 'single_file', path = '/dev/null'",
            "connector = 'filesystem', path = '/dev/null'",
        )
    assert change[0] in sql
    sql = sql.replace(*change)
    if "subquery" in why:
        sql = sql.rstrip().rstrip(";") + ") AS j;"
    query = _plan(spark, tmp_path, sql)
    assert query.batch_view is None, why


@pytest.mark.spark
def test_a_join_of_two_aggregates_stays_a_streaming_join(
    spark: SparkSession, tmp_path: Path
) -> None:
    query = _plan(spark, tmp_path, render(QUERIES / "windowed_joins.sql", Path("/dev/null")))
    assert query.batch_view is None


@pytest.mark.spark
@pytest.mark.parametrize("case", ["windowed_top_rows", "windowed_bottom_rows"])
def test_the_rows_of_each_windows_extreme_keep_only_those_rows_in_state(
    spark: SparkSession, tmp_path: Path, case: str
) -> None:
    program = spark_planner(spark, state_dir=tmp_path).plan(
        render(QUERIES / f"{case}.sql", Path("/dev/null"))
    )
    (query,) = program.queries
    (aggregate,) = program.aggregates
    assert query.batch_view is not None and query.batch_view.startswith("seen__top_rows")
    assert query.sql == f"SELECT * FROM `{query.batch_view[: -len('__batch')]}`"
    assert aggregate.largest == (case == "windowed_top_rows")
    # The root it reads is keyed by the window alone: one state row per open window.
    root = {v.name: v.sql for v in program.views}[query.batch_view[: -len("__batch")]]
    assert root.endswith("GROUP BY WINDOW(_timestamp, '30000000 microseconds')) AS __agg0"), root
    # A worker gets the program as JSON, in a session of its own: the aggregate comes with it.
    restored = PipelineProgram.from_json(program.to_json())
    assert restored == program
    spark.sql(f"DROP TEMPORARY FUNCTION {aggregate.name}")
    assert not spark.catalog.functionExists(aggregate.name)
    register(spark, restored, BuildSettings(state_dir=tmp_path, planning=True))
    assert spark.catalog.functionExists(aggregate.name)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("WHERE S.version = N.top", "WHERE S.version >= N.top"), "no equality with the maximum"),
        (("WHERE S.version = N.top", "WHERE S.version = N.top OR S.kind = 'buy'"), "under an OR"),
        (
            ("max(version) AS top FROM seen", "max(version) AS top FROM seen WHERE kind = 'buy'"),
            "a maximum over some of the rows",
        ),
        (("max(version) AS top", "max(version) AS top, count(*) AS n"), "another aggregate"),
        (("device.version AS version", "amount AS version"), "a floating-point key"),
        (
            ("FROM events GROUP BY 1, 2, 3, 4", "FROM events GROUP BY 1, 2, 3, 4, id"),
            "rows not distinct over their columns",
        ),
        (("tumble(interval '30 seconds')", "session(interval '30 seconds')"), "session windows"),
    ],
)
def test_other_joins_with_a_windows_extreme_read_every_row(
    spark: SparkSession, tmp_path: Path, change: tuple[str, str], why: str
) -> None:
    sql = render(QUERIES / "windowed_top_rows.sql", Path("/dev/null"))
    assert change[0] in sql
    program = spark_planner(spark, state_dir=tmp_path).plan(sql.replace(*change))
    (query,) = program.queries
    assert not (query.batch_view or "").startswith("seen__top_rows"), why
    assert not program.aggregates, why


@pytest.mark.spark
@pytest.mark.parametrize("largest", [True, False])
def test_extreme_rows_are_the_distinct_rows_at_the_extreme(
    spark: SparkSession, largest: bool
) -> None:
    """The aggregate behind the top-rows root, over rows split across partitions (so partial
    results merge): ties kept, duplicates once (-0.0 and 0.0 being one value, as Spark groups
    them), rows with a NULL key left out, and a group of NULL keys alone gives no rows."""
    name = f"test_extreme_rows_{'max' if largest else 'min'}"
    register_aggregate(spark, AggregateSpec(name, "g INT, k BIGINT, v DOUBLE", 1, largest))
    rows = [
        (1, 7, 1.0), (1, 7, -0.0), (1, 3, 9.0), (1, 7, 0.0), (1, 7, 1.0),
        (1, 5, 2.0), (1, None, 3.0), (1, 5, 4.0), (2, None, 1.0),
    ]  # fmt: skip
    df = spark.createDataFrame(rows, "g INT, k BIGINT, v DOUBLE").repartition(3)
    df.createOrReplaceTempView("extreme_input")
    got = {
        r["g"]: sorted(tuple(x) for x in r["top"]["rows"])
        for r in spark.sql(
            f"SELECT g, {name}(g, k, v) AS top FROM extreme_input GROUP BY g"
        ).collect()
    }
    expected = [(1, 7, 0.0), (1, 7, 1.0)] if largest else [(1, 3, 9.0)]
    assert got == {1: expected, 2: []}
