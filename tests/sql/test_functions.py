"""Arroyo's function names, translated by the planner and evaluated by Spark: one case per family.

Each expression is read in Arroyo's dialect, rewritten by ``arroyo.sql.functions.translate`` and
written as Spark SQL, exactly as the planner does for a streaming query, then evaluated over a
small static table so that every function family is checked against a known answer.
"""

from __future__ import annotations

import datetime as dt
import statistics
from typing import Any

import pytest
import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from arroyo.sql.functions import FunctionError, translate
from arroyo.sql.statements import ArroyoDialect

ROWS = [
    # s, j, x, y, n, b, arr, ts
    ("ab-12", '{"a": {"b": [10, 20]}, "s": "x", "f": 1.5, "t": true}', 1.0, 2.0, 6, True,
     ["p", "q"], "2024-01-01 10:15:30"),
    ("cd-34", '{"a": {"b": [30]}, "s": "y", "f": 2.5, "t": false}', 2.0, 4.0, 3, True,
     ["r"], "2024-01-01 10:45:00"),
    ("ef", '{"a": {}, "s": null, "f": 0, "t": false}', 3.0, 6.5, 5, False,
     [], "2024-01-01 11:05:00"),
]  # fmt: skip


@pytest.fixture(scope="module")
def fn_input(spark: SparkSession) -> str:
    df = spark.createDataFrame(
        [(*r[:7], dt.datetime.fromisoformat(r[7])) for r in ROWS],
        "s STRING, j STRING, x DOUBLE, y DOUBLE, n BIGINT, b BOOLEAN, arr ARRAY<STRING>, "
        "ts TIMESTAMP",
    )
    df.createOrReplaceTempView("fn_input")
    return "fn_input"


def evaluate(spark: SparkSession, select: str) -> list[Any]:
    tree = sqlglot.parse_one(select, read=ArroyoDialect)
    translate(tree, lambda: exp.column("ts"))
    rows = spark.sql(tree.sql(dialect="spark")).collect()
    return [r[0] for r in rows]


SCALARS: list[tuple[str, list[Any]]] = [
    # time
    ("date_trunc('hour', ts)", [dt.datetime(2024, 1, 1, 10)] * 2 + [dt.datetime(2024, 1, 1, 11)]),
    ("date_part('minute', ts)", [15, 45, 5]),
    ("extract(hour FROM ts)", [10, 10, 11]),
    ("to_timestamp(1700000000.5) = TIMESTAMP '2023-11-14 22:13:20.5'", [True] * 3),
    ("row_time() = ts", [True] * 3),
    # numbers with a point are DOUBLE, as in Arroyo (Spark alone would compute in DECIMAL)
    ("typeof(0.5 * n)", ["double"] * 3),
    ("0.5 * n", [3.0, 1.5, 2.5]),
    ("typeof(1e3)", ["double"] * 3),
    ("typeof(CAST(1.25 AS DECIMAL(4, 2)))", ["decimal(4,2)"] * 3),
    ("CAST(-1.25 AS DECIMAL(4, 2)) = -1.25", [True] * 3),
    # regular expressions
    ("regexp_replace(s, '[0-9]', '#')", ["ab-##", "cd-##", "ef"]),
    ("regexp_match(s, '([a-z]+)-([0-9]+)')", [["ab", "12"], ["cd", "34"], None]),
    ("regexp_like(s, '^[a-z]+$')", [False, False, True]),
    # strings and hashes
    ("concat_ws('/', s, 'z')", ["ab-12/z", "cd-34/z", "ef/z"]),
    ("split_part(s, '-', 2)", ["12", "34", ""]),
    ("md5('abc')", ["900150983cd24fb0d6963f7d28e17f72"] * 3),
    (
        "sha256('abc')",
        ["ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"] * 3,
    ),
    ("digest('abc', 'md5')", ["900150983cd24fb0d6963f7d28e17f72"] * 3),
    # conditionals
    ("coalesce(json_get_str(j, 's'), 'none')", ["x", "y", "none"]),
    ("nullif(n, 3)", [6, None, 5]),
    # arrays
    ("make_array(1, 2)", [[1, 2]] * 3),
    # JSON
    ("json_get(j, 'a', 'b', 1)", ["20", None, None]),
    ("json_get_json(j, 'a')", ['{"b":[10,20]}', '{"b":[30]}', "{}"]),
    ("json_get_str(j, 's')", ["x", "y", None]),
    ("json_as_text(j, 's')", ["x", "y", None]),
    ("json_get_int(j, 'a', 'b', 0)", [10, 30, None]),
    ("json_get_float(j, 'f')", [1.5, 2.5, 0.0]),
    ("json_get_bool(j, 't')", [True, False, False]),
    ("json_length(j, 'a', 'b')", [2, 1, None]),
    ("json_length(j)", [4, 4, 4]),
    ("json_contains(j, 'a', 'b')", [True, True, False]),
    ("json_contains(j, 'a', 'b', 1)", [True, False, False]),
    ("j -> 's'", ["x", "y", None]),
    ("j ->> 's'", ["x", "y", None]),
    ("j ? 'f'", [True] * 3),
    ("j ? 'missing'", [False] * 3),
    ("extract_json(j, '$.a.b[*]')", [["10", "20"], ["30"], []]),
    ("extract_json_string(j, '$.s')", ["x", "y", None]),
    ("get_first_json_object(j, '$.a.b[0]')", ["10", "30", None]),
]


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), SCALARS, ids=[c[0] for c in SCALARS])
def test_scalar_function(
    spark: SparkSession, fn_input: str, expression: str, expected: list[Any]
) -> None:
    got = evaluate(spark, f"SELECT {expression} FROM {fn_input} ORDER BY s")
    assert got == expected


AGGREGATES: list[tuple[str, Any]] = [
    ("count(DISTINCT b)", 2),
    ("approx_distinct(s)", 3),
    ("median(x)", 2.0),
    ("stddev(x)", 1.0),
    ("var(x)", 1.0),
    ("stddev_pop(y)", pytest.approx(statistics.pstdev([2.0, 4.0, 6.5]))),
    ("corr(x, y)", pytest.approx(statistics.correlation([1.0, 2.0, 3.0], [2.0, 4.0, 6.5]))),
    ("covar_pop(x, y)", pytest.approx(1.5, rel=1e-6)),
    ("covar_samp(x, y)", pytest.approx(2.25, rel=1e-6)),
    ("regr_slope(y, x)", pytest.approx(2.25, rel=1e-6)),
    ("bit_and(n)", 6 & 3 & 5),
    ("bit_or(n)", 6 | 3 | 5),
    ("bit_xor(n)", 6 ^ 3 ^ 5),
    ("bool_and(b)", False),
    ("bool_or(b)", True),
    ("array_sort(array_agg(s))", ["ab-12", "cd-34", "ef"]),
    ("length(string_agg(s, ','))", len("ab-12,cd-34,ef")),
]


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), AGGREGATES, ids=[c[0] for c in AGGREGATES])
def test_aggregate_function(
    spark: SparkSession, fn_input: str, expression: str, expected: Any
) -> None:
    assert evaluate(spark, f"SELECT {expression} FROM {fn_input}") == [expected]


@pytest.mark.spark
def test_unnest_in_a_projection(spark: SparkSession, fn_input: str) -> None:
    got = evaluate(spark, f"SELECT unnest(arr) FROM {fn_input}")
    assert sorted(got) == ["p", "q", "r"]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("json_get(j, s)", "takes literal keys"),
        ("regexp_match(s, s)", "literal pattern"),
        ("digest(s, 'crc')", "unknown algorithm 'crc'"),
        ("row_time(1)", "takes no arguments"),
        ("json_get(j, 'it''s')", "keys containing ' are not supported"),
    ],
)
def test_unmappable_calls_are_refused(expression: str, message: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {expression} FROM t", read=ArroyoDialect)
    with pytest.raises(FunctionError, match=message):
        translate(tree, lambda: exp.column("ts"))


@pytest.mark.spark
def test_json_keys_with_spaces_and_brackets(spark: SparkSession) -> None:
    got = evaluate(spark, """SELECT json_get_int('{"a b[1]": [1, 2, 3]}', 'a b[1]', 2)""")
    assert got == [3]
