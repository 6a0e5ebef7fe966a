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


def _top(spark: SparkSession, values_sql: str, order_type: str, n: int, largest: bool) -> list:
    """TopN (libs/arroyo/java/arroyo/sql/TopN.java) over rows (o, c0) of a VALUES list."""
    from pyspark.sql.types import LongType, StructField, StructType, _parse_datatype_string

    from arroyo.engine.build import register_aggregate
    from arroyo.program.spec import AggregateSpec

    input_type = StructType(
        [StructField("o", _parse_datatype_string(order_type)), StructField("c0", LongType())]
    )
    name = f"top_probe_{n}_{int(largest)}"
    register_aggregate(spark, AggregateSpec(name, input_type.json(), n, largest, "top_n"))
    (row,) = spark.sql(
        f"SELECT {name}(o, c0).rows AS r FROM VALUES {values_sql} AS t(o, c0)"
    ).collect()
    return [r.c0 for r in row.r]


@pytest.mark.spark
def test_top_n_orders_values_as_spark_does(spark: SparkSession) -> None:
    # strings by code point ('é' after 'z'), -0.0 equal to 0.0 and NaN above everything,
    # structs field by field; a null order value is left out; at most N rows, best first
    strings = "('b', 1), ('z', 2), ('é', 3), ('a', 4), (NULL, 5)"
    assert _top(spark, strings, "string", 2, largest=True) == [3, 2]
    assert _top(spark, strings, "string", 3, largest=False) == [4, 1, 2]
    doubles = "(CAST('NaN' AS DOUBLE), 1), (1.5D, 2), (-0.0D, 3), (-2.0D, 4)"
    assert _top(spark, doubles, "double", 2, largest=True) == [1, 2]
    assert _top(spark, doubles, "double", 2, largest=False) == [4, 3]
    # -0.0 and 0.0 tie, so the one met first stays ahead of the other, either way round
    zeros = "(0.0D, 1), (-0.0D, 2), (1.0D, 3)"
    assert _top(spark, zeros, "double", 2, largest=False) == [1, 2]
    assert _top(
        spark,
        zeros.replace("(0.0D, 1), (-0.0D, 2)", "(-0.0D, 1), (0.0D, 2)"),
        "double",
        2,
        largest=False,
    ) == [1, 2]
    structs = (
        "(named_struct('a', 1, 'b', 'y'), 1), (named_struct('a', 2, 'b', 'a'), 2), "
        "(named_struct('a', 1, 'b', 'z'), 3)"
    )
    assert _top(spark, structs, "struct<a:int,b:string>", 2, largest=True) == [2, 3]
    many = ", ".join(f"({i * 7 % 1000}L, {i})" for i in range(1000))
    assert _top(spark, many, "bigint", 5, largest=True) == [
        i for i in sorted(range(1000), key=lambda i: -(i * 7 % 1000))[:5]
    ]


@pytest.mark.spark
def test_a_top_n_by_a_binary_value_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    sql = (
        EVENTS + 'INSERT INTO out SELECT * FROM (SELECT id, "user", ROW_NUMBER() OVER '
        '(PARTITION BY "user" ORDER BY CAST("user" AS BYTEA) DESC) AS rn FROM events) '
        "WHERE rn <= 3;"
    )
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    (diagnostic,) = refused.value.diagnostics
    assert diagnostic.code == "unwindowed_top_n"
    assert "not binary" in diagnostic.message


@pytest.mark.spark
def test_a_top_n_by_a_struct_whose_field_is_named_map_plans(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The order's type is read from its tree, not its text: a field named "map" is a string.
    sql = (
        EVENTS + 'INSERT INTO out SELECT * FROM (SELECT id, "user", ROW_NUMBER() OVER '
        "(PARTITION BY \"user\" ORDER BY named_struct('map', \"user\", 'array', id) DESC) AS rn "
        "FROM events) WHERE rn <= 3;"
    )
    assert spark_planner(spark, state_dir=tmp_path).plan(sql).queries
