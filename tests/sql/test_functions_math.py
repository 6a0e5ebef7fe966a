"""Math and conditional functions on Spark, against DataFusion's answers: decimal literals and
one-argument math are DOUBLE, an integer divided by an integer is an integer, ``log(x)`` is base
10, logarithms of 0 are -inf, ``ceil``/``floor``/``round`` answer DOUBLEs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.sql.functions_support import check, create_tables, evaluate_all, values

# Rows (ordered by s): x = 1.0, 2.0, 3.0; y = 2.0, 4.0, 6.5; n = 6, 3, 5.
CASES: list[tuple[str, Any]] = [
    # literals and arithmetic
    ("typeof(0.5 * n)", ["double"] * 3),
    ("0.5 * n", [3.0, 1.5, 2.5]),
    ("typeof(1e3)", ["double"] * 3),
    ("typeof(CAST(1.25 AS DECIMAL(4, 2)))", ["decimal(4,2)"] * 3),
    ("CAST(-1.25 AS DECIMAL(4, 2)) = -1.25", [True] * 3),
    ("7 / 2", [3] * 3),
    ("-7 / 2", [-3] * 3),
    ("n / 4", [1, 0, 1]),
    ("typeof(n / 4)", ["bigint"] * 3),
    ("x / 2", [0.5, 1.0, 1.5]),
    ("n % 4", [2, 3, 1]),
    # logarithms
    ("log(100)", [2.0] * 3),
    ("log(2, 8)", [3.0] * 3),
    ("log(0)", [-math.inf] * 3),
    ("log10(1000)", [3.0] * 3),
    ("log2(8)", [3.0] * 3),
    ("ln(0)", [-math.inf] * 3),
    ("ln(-1)", lambda got: all(math.isnan(v) for v in got)),
    ("ln(x)", [0.0, pytest.approx(math.log(2.0)), pytest.approx(math.log(3.0))]),
    # rounding
    ("ceil(0.5)", [1.0] * 3),
    ("typeof(ceil(x))", ["double"] * 3),
    ("floor(-0.5)", [-1.0] * 3),
    ("round(n)", [6.0, 3.0, 5.0]),
    ("typeof(round(n))", ["double"] * 3),
    ("round(2.5)", [3.0] * 3),
    ("round(-2.5)", [-3.0] * 3),
    ("round(1.2345, 2)", [1.23] * 3),
    ("trunc(-1.789, 1)", [-1.7] * 3),
    ("trunc(1.789)", [1.0] * 3),
    ("trunc(123.4, -1)", [120.0] * 3),
    # integers
    ("factorial(5)", [120] * 3),
    ("factorial(-3)", [1] * 3),
    ("gcd(n, 4)", [2, 1, 1]),
    ("gcd(0, 0)", [0] * 3),
    ("lcm(n, 4)", [12, 12, 20]),
    ("lcm(0, 5)", [0] * 3),
    ("power(2, 10)", [1024] * 3),
    ("typeof(pow(2, 10))", ["bigint"] * 3),
    ("power(3, 39)", [4052555153018976267] * 3),
    ("power(x, 2)", [1.0, 4.0, 9.0]),
    ("iszero(0.0)", [True] * 3),
    ("iszero(x - 1)", [True, False, False]),
    # the rest mean the same in Spark
    ("abs(-3)", [3] * 3),
    ("signum(-2.5)", [-1.0] * 3),
    ("signum(0)", [0.0] * 3),
    ("sqrt(16)", [4.0] * 3),
    ("cbrt(27)", [3.0] * 3),
    ("exp(0)", [1.0] * 3),
    ("degrees(pi())", [180.0] * 3),
    ("radians(180)", [math.pi] * 3),
    ("cot(1)", [pytest.approx(1 / math.tan(1))] * 3),
    ("atan2(1, 1)", [pytest.approx(math.pi / 4)] * 3),
    ("acos(1) + asin(0) + atan(0) + acosh(1) + asinh(0) + atanh(0)", [0.0] * 3),
    ("cos(0) + cosh(0) + sin(0) + sinh(0) + tan(0) + tanh(0)", [2.0] * 3),
    ("nanvl(CAST('NaN' AS DOUBLE), 1.0)", [1.0] * 3),
    ("isnan(CAST('NaN' AS DOUBLE))", [True] * 3),
    ("random() >= 0 AND random() < 1", [True] * 3),
    # conditionals
    ("coalesce(NULL, n, 0)", [6, 3, 5]),
    ("nullif(n, 3)", [6, None, 5]),
    ("nvl(NULL, 'x')", ["x"] * 3),
    ("ifnull(NULL, 1)", [1] * 3),
    ("nvl2(nullif(n, 3), 'set', 'unset')", ["set", "unset", "set"]),
    ("greatest(n, NULL, 4)", [6, 4, 5]),
    ("least(n, NULL, 4)", [4, 3, 4]),
]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_math_function(results: dict[str, Any], expression: str, expected: Any) -> None:
    check(values(results, expression), expected)
