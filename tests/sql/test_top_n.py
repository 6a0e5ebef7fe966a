"""ROW_NUMBER() without windows as the planner states it (results: golden cases
updating_last_per_key and updating_top_n, checked against DuckDB in test_differential)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import PlanningError
from tests.sql.harness import INPUTS

EVENTS = f"""CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, amount DOUBLE,
    ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "events.json"}', format = 'json',
      type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '/dev/null',
      format = 'debezium_json', type = 'sink');
"""


@pytest.mark.spark
@pytest.mark.parametrize("n", [1, 3])
def test_select_star_keeps_the_inner_column_order(
    spark: SparkSession, tmp_path: Path, n: int
) -> None:
    sql = (
        EVENTS + 'INSERT INTO out SELECT * FROM (SELECT amount, id, "user", '
        'ROW_NUMBER() OVER (PARTITION BY "user" ORDER BY amount DESC) AS rn FROM events) '
        f"WHERE rn <= {n};"
    )
    (query,) = spark_planner(spark, state_dir=tmp_path).plan(sql).queries
    assert [c.name for c in query.sink.columns] == ["amount", "id", "user", "rn"]
    assert query.key_columns == (["user"] if n == 1 else ["user", "rn"])


@pytest.mark.spark
def test_ranking_a_changelog_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    sql = (
        "CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT) "
        f"WITH (connector = 'single_file', path = '{INPUTS / 'events.json'}', "
        "format = 'debezium_json', type = 'source');\n"
        "CREATE TABLE out WITH (connector = 'single_file', path = '/dev/null', "
        "format = 'debezium_json', type = 'sink');\n"
        "INSERT INTO out SELECT * FROM (SELECT id, name, qty, ROW_NUMBER() OVER "
        "(PARTITION BY name ORDER BY qty DESC) AS rn FROM products) WHERE rn <= 3;"
    )
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    assert [d.code for d in refused.value.diagnostics] == ["window_function_input"]
