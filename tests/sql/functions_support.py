"""What the function tests share: two small tables, and the evaluation of Arroyo expressions
as the planner runs them (read in Arroyo's dialect, rewritten by
``arroyo.sql.functions.translate`` with the tables' column types, written as Spark SQL).

Each family's module asks for all its expressions at once (one Spark query per table and
family, not one per case) and checks each against the answer Arroyo (DataFusion) gives.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from arroyo.sql.functions import translate
from arroyo.sql.statements import ArroyoDialect

INPUT = "fn_input"
NUMBERS = "fn_numbers"

# Ordered by s. JSON texts are compact, as Arroyo's answers keep the text as written.
INPUT_ROWS = [
    ("ab-12", '{"a":{"b":[10,20]},"s":"x","f":1.5,"t":true,"i":-3,"n":null,"q":"12"}', 1.0, 2.0,
     6, True, ["p", "q"], "2024-01-01 10:15:30.123456", [3, 1, 2, 3], [[1, 2], [3, 4]]),
    ("cd-34", '{"a":{"b":[30]},"s":"y","f":2.5,"t":false}', 2.0, 4.0,
     3, True, ["r"], "2024-01-01 10:45:00", [], [[5]]),
    ("ef", '{"a":{},"s":null,"f":0,"t":false}', 3.0, 6.5,
     5, False, [], "2024-01-01 11:05:00", None, None),
]  # fmt: skip
INPUT_SCHEMA = (
    "s STRING, j STRING, x DOUBLE, y DOUBLE, n BIGINT, b BOOLEAN, arr ARRAY<STRING>, "
    "ts TIMESTAMP, ia ARRAY<BIGINT>, na ARRAY<ARRAY<BIGINT>>"
)

# Values for the aggregates: v BIGINT, f the same as DOUBLE, w weights, g groups.
NUMBER_ROWS = [
    (1, 1.0, 1, "a"),
    (2, 2.0, 1, "a"),
    (3, 3.0, 2, "b"),
    (4, 4.0, 1, "b"),
    (10, 10.0, 5, "b"),
    (None, None, 1, "b"),
]
NUMBER_SCHEMA = "v BIGINT, f DOUBLE, w BIGINT, g STRING"


def create_tables(spark: SparkSession) -> None:
    rows = [(*r[:7], dt.datetime.fromisoformat(r[7]), *r[8:]) for r in INPUT_ROWS]
    spark.createDataFrame(rows, INPUT_SCHEMA).createOrReplaceTempView(INPUT)
    spark.createDataFrame(NUMBER_ROWS, NUMBER_SCHEMA).createOrReplaceTempView(NUMBERS)


def columns_of(spark: SparkSession, table: str) -> dict[str, dict[str, str]]:
    schema = spark.table(table).schema
    return {table: {f.name: f.dataType.simpleString() for f in schema.fields}}


def translated(sql: str, columns: dict[str, dict[str, str]] | None = None) -> str:
    """``sql`` in Arroyo's dialect, as the Spark SQL the planner would run."""
    tree = sqlglot.parse_one(sql, read=ArroyoDialect)
    translate(tree, lambda: exp.column("ts"), None, columns)
    return tree.sql(dialect="spark")


def evaluate(spark: SparkSession, select: str, table: str = INPUT) -> list[Any]:
    """The first column of a query's rows."""
    sql = translated(select, columns_of(spark, table))
    return [row[0] for row in spark.sql(sql).collect()]


def evaluate_all(
    spark: SparkSession, expressions: Iterable[str], table: str = INPUT, order_by: str = "s"
) -> dict[str, list[Any] | BaseException]:
    """Each expression's values over ``table`` (in ``order_by`` order, or its one row for an
    aggregate when ``order_by`` is empty), from one query; when that query fails, from one
    query per expression, so that each failure is its own expression's."""
    expressions = list(expressions)
    columns = columns_of(spark, table)
    order = f" ORDER BY {order_by}" if order_by else ""

    def run(exprs: list[str]) -> list[list[Any]]:
        items = ", ".join(f"{e} AS __c{i}" for i, e in enumerate(exprs))
        sql = translated(f"SELECT {items} FROM {table}{order}", columns)
        rows = spark.sql(sql).collect()
        return [[row[i] for row in rows] for i in range(len(exprs))]

    try:
        return dict(zip(expressions, run(expressions), strict=True))
    except Exception:  # each expression is tried on its own below
        results: dict[str, list[Any] | BaseException] = {}
        for expression in expressions:
            try:
                results[expression] = run([expression])[0]
            except Exception as err:  # reported by the expression's test
                results[expression] = err
        return results


def values(results: dict[str, list[Any] | BaseException], expression: str) -> list[Any]:
    got = results[expression]
    if isinstance(got, BaseException):
        raise got
    return got


def check(got: list[Any], expected: Any) -> None:
    """``expected`` is the list of values, or a predicate over the list."""
    if callable(expected):
        assert expected(got), got
    else:
        assert got == expected, got
