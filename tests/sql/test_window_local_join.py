"""Which joins of windows the planner runs per micro-batch (their results are checked by the
golden case windowed_local_join and, for the streaming form, windowed_joins)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.sql.planner import Planner
from arroyo.sql.program import SinkQuery
from tests.sql.harness import QUERIES, render


def _plan(spark: SparkSession, tmp_path: Path, sql: str) -> SinkQuery:
    program = Planner(spark, state_dir=tmp_path).plan(sql)
    (query,) = program.queries
    return query


@pytest.mark.spark
def test_a_join_of_windows_derived_from_one_aggregate_runs_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    query = _plan(spark, tmp_path, render(QUERIES / "windowed_local_join.sql", Path("/dev/null")))
    assert query.batch_view == "counts__batch"
    assert query.sql == "SELECT * FROM `counts`"


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
