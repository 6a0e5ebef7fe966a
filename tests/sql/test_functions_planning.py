"""Functions through the planner: a refused call is a ``bad_function_call`` diagnostic at the
call, and the planner hands each SELECT's column types to the translation (so that an integer
column divided by an integer is an integer division, as in Arroyo)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import PlanningError
from tests.sql.harness import INPUTS

EVENTS = f"""CREATE TABLE events (
    id BIGINT NOT NULL, "user" TEXT, kind TEXT, amount DOUBLE, ts TIMESTAMP NOT NULL,
    tags TEXT[], WATERMARK FOR ts AS ts - INTERVAL '2 seconds'
) WITH (connector = 'single_file', path = '{INPUTS / "events.json"}', format = 'json',
        type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '/nonexistent/out.json', type = 'sink');
"""


@pytest.mark.spark
@pytest.mark.parametrize(
    ("select", "message"),
    [
        ("digest(\"user\", 'blake3')", "no blake3 digest"),
        ("metadata('offset_id')", "METADATA FROM"),
        ("extract_json(kind, '$..a')", "recursive descent"),
        ("date_part('nanosecond', ts)", "nanoseconds"),
    ],
)
def test_a_refused_function_is_a_diagnostic(
    spark: SparkSession, tmp_path: Path, select: str, message: str
) -> None:
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(
            f"{EVENTS}INSERT INTO out SELECT {select} FROM events;"
        )
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.code == "bad_function_call", diagnostic.render()
    assert message in diagnostic.message
    assert diagnostic.span is not None and diagnostic.span.line == 7, diagnostic.render()


@pytest.mark.spark
def test_the_planner_hands_over_column_types(spark: SparkSession, tmp_path: Path) -> None:
    program = spark_planner(spark, state_dir=tmp_path).plan(
        f"{EVENTS}INSERT INTO out SELECT id / 2 AS half, amount / 2 AS share, "
        "arrow_typeof(tags) AS t, array_ndims(tags) AS d FROM events;"
    )
    sql = program.queries[0].sql
    assert "id DIV 2" in sql
    assert "amount / 2" in sql
    assert "'List(Utf8)'" in sql
