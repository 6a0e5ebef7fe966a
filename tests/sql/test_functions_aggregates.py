"""Aggregates on Spark, against DataFusion's answers, over static tables and through a
streaming query. ``median`` of integers is an integer; ``array_agg`` keeps NULLs and honours
ORDER BY; ``approx_percentile_cont`` is DataFusion's t-digest estimate, which for a few values
(one centroid each) is worked out here by hand from ``TDigest::estimate_quantile``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.sql.functions import FunctionError
from tests.sql.functions_support import (
    INPUT,
    NUMBER_ROWS,
    NUMBER_SCHEMA,
    NUMBERS,
    columns_of,
    create_tables,
    evaluate,
    evaluate_all,
    translated,
    values,
)

X, Y = [1.0, 2.0, 3.0], [2.0, 4.0, 6.5]

# Over fn_input: x = 1, 2, 3; y = 2, 4, 6.5; n = 6, 3, 5; b = true, true, false.
INPUT_CASES: list[tuple[str, Any]] = [
    ("avg(x)", 2.0),
    ("mean(x)", 2.0),
    ("count(*)", 3),
    ("count(DISTINCT b)", 2),
    # Rows with a NULL among the values are not counted: (true, NULL) is left out.
    ("count(DISTINCT b, CASE WHEN x > 1 THEN x END)", 2),
    ("max(n) + min(n) + sum(n)", 23),
    ("bit_and(n)", 6 & 3 & 5),
    ("bit_or(n)", 6 | 3 | 5),
    ("bit_xor(n)", 6 ^ 3 ^ 5),
    ("bool_and(b)", False),
    ("bool_or(b)", True),
    ("median(x)", 2.0),
    ("stddev(x)", 1.0),
    ("stddev_samp(x)", 1.0),
    ("stddev_pop(y)", pytest.approx(statistics.pstdev(Y))),
    ("var(x)", 1.0),
    ("var_samp(x)", 1.0),
    ("var_sample(x)", 1.0),
    ("var_pop(x)", pytest.approx(2 / 3)),
    ("var_population(x)", pytest.approx(2 / 3)),
    ("corr(x, y)", pytest.approx(statistics.correlation(X, Y))),
    ("covar(x, y)", pytest.approx(2.25)),
    ("covar_samp(x, y)", pytest.approx(2.25)),
    ("covar_pop(x, y)", pytest.approx(1.5)),
    ("regr_slope(y, x)", pytest.approx(2.25)),
    ("regr_intercept(y, x)", pytest.approx(12.5 / 3 - 4.5)),
    ("regr_count(y, x)", 3),
    ("regr_r2(y, x)", pytest.approx(statistics.correlation(X, Y) ** 2)),
    ("regr_avgx(y, x)", 2.0),
    ("regr_avgy(y, x)", pytest.approx(12.5 / 3)),
    ("regr_sxx(y, x)", pytest.approx(2.0)),
    ("regr_syy(y, x)", pytest.approx(sum((v - 12.5 / 3) ** 2 for v in Y))),
    ("regr_sxy(y, x)", pytest.approx(4.5)),
    ("approx_distinct(s)", 3),
    ("array_sort(array_agg(s))", ["ab-12", "cd-34", "ef"]),
    ("array_agg(s ORDER BY s DESC)", ["ef", "cd-34", "ab-12"]),
    ("string_agg(s, ',' ORDER BY s)", "ab-12,cd-34,ef"),
    ("length(string_agg(s, ','))", len("ab-12,cd-34,ef")),
    ("first_value(s ORDER BY x)", "ab-12"),
    ("last_value(s ORDER BY x)", "ef"),
    ("first_value(s ORDER BY x DESC)", "ef"),
]

# Over fn_numbers: v = 1, 2, 3, 4, 10, NULL (f the same as DOUBLE); w = 1, 1, 2, 1, 5, 1.
NUMBER_CASES: list[tuple[str, Any]] = [
    ("count(v)", 5),
    ("bit_xor(v)", 1 ^ 2 ^ 3 ^ 4 ^ 10),
    ("approx_distinct(v)", 5),
    ("median(v)", 3),
    ("typeof(median(v))", "bigint"),
    ("median(f)", 3.0),
    # t-digest, one centroid per value: rank q*n, interpolated between neighbours
    ("approx_median(f)", 3.0),
    ("approx_percentile_cont(f, 0.25)", 1.75),
    ("approx_percentile_cont(f, 0.75)", 4.875),
    ("approx_percentile_cont(f, 0.9)", 10.0),
    ("approx_percentile_cont(f, 0)", 1.0),
    ("approx_percentile_cont(f, 1)", 10.0),
    ("approx_percentile_cont(f, 0.75, 200)", 4.875),
    ("approx_percentile_cont(v, 0.75)", 4),
    ("typeof(approx_percentile_cont(v, 0.75))", "bigint"),
    ("approx_percentile_cont(0.75) WITHIN GROUP (ORDER BY f)", 4.875),
    # weighted: DataFusion's digest counts rows, its centroids carry the weights
    ("approx_percentile_cont_with_weight(f, w, 0.5)", 2.75),
    ("approx_percentile_cont_with_weight(f, w, 0.3)", 2.0),
    ("approx_percentile_cont_with_weight(f, w, 0.9)", 10.0),
    ("approx_percentile_cont_with_weight(w, 0.5) WITHIN GROUP (ORDER BY f)", 2.75),
    ("array_agg(v ORDER BY v)", [1, 2, 3, 4, 10, None]),
    ("array_agg(v ORDER BY v DESC)", [None, 10, 4, 3, 2, 1]),
    ("array_agg(v ORDER BY g DESC, v)", [3, 4, 10, None, 1, 2]),
    ("array_sort(array_agg(DISTINCT g))", ["a", "b"]),
    ("first_value(v ORDER BY f)", 1),
    ("first_value(v ORDER BY f DESC)", 10),
    ("last_value(v ORDER BY f)", 10),
    ("string_agg(g, '' ORDER BY g)", "aabbbb"),
]


@pytest.fixture(scope="module")
def input_results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in INPUT_CASES], INPUT, order_by="")


@pytest.fixture(scope="module")
def number_results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in NUMBER_CASES], NUMBERS, order_by="")


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), INPUT_CASES, ids=[c[0] for c in INPUT_CASES])
def test_aggregate(input_results: dict[str, Any], expression: str, expected: Any) -> None:
    assert values(input_results, expression) == [expected]


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_aggregate_of_numbers(
    number_results: dict[str, Any], expression: str, expected: Any
) -> None:
    assert values(number_results, expression) == [expected]


@pytest.mark.spark
def test_median_of_integers_truncates(spark: SparkSession, number_results: dict[str, Any]) -> None:
    # DataFusion: (2 + 3) / 2 in integers; Spark alone answers 2.5.
    assert evaluate(spark, f"SELECT median(v) FROM {NUMBERS} WHERE v < 10", NUMBERS) == [2]


@pytest.mark.spark
def test_aggregates_in_a_streaming_query(
    spark: SparkSession, number_results: dict[str, Any], tmp_path: Path
) -> None:
    """The rewritten aggregates run as a streaming aggregation (complete mode, state kept
    across micro-batches), each group's answer Arroyo's."""
    source = tmp_path / "input"
    source.mkdir()
    names = [f.split()[0] for f in NUMBER_SCHEMA.split(", ")]
    for i, half in enumerate((NUMBER_ROWS[:3], NUMBER_ROWS[3:])):
        lines = "\n".join(json.dumps(dict(zip(names, row, strict=True))) for row in half)
        (source / f"part-{i}.json").write_text(lines + "\n")
    stream = (
        spark.readStream.schema(NUMBER_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    )
    stream.createOrReplaceTempView("fn_numbers_stream")
    columns = {"fn_numbers_stream": columns_of(spark, NUMBERS)[NUMBERS]}
    sql = translated(
        "SELECT g, median(v) AS m, approx_percentile_cont(f, 0.75) AS p, "
        "array_agg(v ORDER BY v) AS a, approx_distinct(v) AS d, count(DISTINCT v) AS c, "
        "first_value(v ORDER BY f DESC) AS top "
        "FROM fn_numbers_stream GROUP BY g",
        columns,
    )
    query = (
        spark.sql(sql)
        .writeStream.format("memory")
        .queryName("fn_numbers_out")
        .outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    rows = {r["g"]: r.asDict() for r in spark.table("fn_numbers_out").collect()}
    assert rows == {
        "a": {"g": "a", "m": 1, "p": 2.0, "a": [1, 2], "d": 2, "c": 2, "top": 2},
        "b": {"g": "b", "m": 4, "p": 8.5, "a": [3, 4, 10, None], "d": 3, "c": 3, "top": 10},
    }


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("approx_percentile_cont(f, 1.5)", "between 0.0 and 1.0"),
        ("approx_percentile_cont(f, w)", "must be a literal"),
        ("first_value(v ORDER BY f, w DESC)", "mixed directions"),
        ("approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY f DESC)", "ascending ORDER BY"),
    ],
)
def test_unmappable_aggregates_are_refused(expression: str, message: str) -> None:
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t")
