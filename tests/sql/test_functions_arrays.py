"""Array, struct and Arrow-type functions on Spark, against DataFusion's answers (its function
reference's examples where it gives them): 1-based indexes answering NULL out of range,
``array_remove``/``array_replace`` of the first match, ``array_distinct`` sorted, ``list_*``
aliases, ``struct`` fields named ``c0``, ``c1``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql import Row, SparkSession

from arroyo.sql.functions import FunctionError
from tests.sql.functions_support import (
    check,
    create_tables,
    evaluate,
    evaluate_all,
    translated,
    values,
)

# Rows (ordered by s): ia = [3, 1, 2, 3], [], NULL; na = [[1, 2], [3, 4]], [[5]], NULL;
# arr = ['p', 'q'], ['r'], [].
EIGHT = "make_array(1, 2, 3, 4, 5, 6, 7, 8)"
CASES: list[tuple[str, Any]] = [
    ("arr[1]", ["p", "r", None]),
    ("arr[3]", [None] * 3),
    ("ia[-1]", [3, None, None]),
    ("array_element(ia, 2)", [1, None, None]),
    ("array_extract(ia, 0)", [None] * 3),
    ("list_element(make_array(1, 2, 3, 4), 3)", [3] * 3),
    ("array_append(ia, 9)", [[3, 1, 2, 3, 9], [9], [9]]),
    ("array_push_back(make_array(1, 2, 3), 4)", [[1, 2, 3, 4]] * 3),
    ("list_append(arr, 'z')", [["p", "q", "z"], ["r", "z"], ["z"]]),
    ("array_prepend(0, ia)", [[0, 3, 1, 2, 3], [0], [0]]),
    ("array_push_front(1, make_array(2, 3, 4))", [[1, 2, 3, 4]] * 3),
    ("array_concat(ia, make_array(7))", [[3, 1, 2, 3, 7], [7], [7]]),
    ("array_cat(make_array(1, 2), make_array(3, 4), make_array(5, 6))", [[1, 2, 3, 4, 5, 6]] * 3),
    ("array_has(ia, 2)", [True, False, None]),
    ("array_has(make_array(1, NULL), 2)", [False] * 3),
    ("array_contains(arr, 'r')", [False, True, False]),
    ("array_has_all(ia, make_array(1, 3))", [True, False, None]),
    ("array_has_any(ia, make_array(9, 2))", [True, False, None]),
    ("array_dims(na)", [[2, 2], [1, 1], None]),
    ("array_ndims(na)", [2, 2, None]),
    ("array_ndims(ia)", [1, 1, None]),
    ("array_distinct(ia)", [[1, 2, 3], [], None]),
    ("array_distinct(make_array(1, 3, 2, 3, 1, 2, 4))", [[1, 2, 3, 4]] * 3),
    ("flatten(na)", [[1, 2, 3, 4], [5], None]),
    ("flatten(ia)", [[3, 1, 2, 3], [], None]),
    ("array_intersect(ia, make_array(3, 5))", [[3], [], None]),
    ("array_union(make_array(1, 2, 3, 4), make_array(5, 6, 3, 4))", [[1, 2, 3, 4, 5, 6]] * 3),
    ("array_except(make_array(1, 2, 3, 4), make_array(5, 6, 3, 4))", [[1, 2]] * 3),
    ("array_to_string(ia, ',')", ["3,1,2,3", "", None]),
    ("array_to_string(na, '-')", ["1-2-3-4", "5", None]),
    ("array_join(make_array('a', NULL, 'b'), ',')", ["a,b"] * 3),
    ("list_to_string(make_array('a', NULL), ',', '?')", ["a,?"] * 3),
    ("array_length(ia)", [4, 0, None]),
    ("array_length(na, 2)", [2, 1, None]),
    ("array_pop_front(ia)", [[1, 2, 3], [], None]),
    ("array_pop_back(ia)", [[3, 1, 2], [], None]),
    ("array_position(ia, 3)", [1, None, None]),
    ("array_position(ia, 3, 2)", [4, None, None]),
    ("array_indexof(ia, 9)", [None] * 3),
    ("array_positions(ia, 3)", [[1, 4], [], None]),
    ("array_repeat(1, 3)", [[1, 1, 1]] * 3),
    ("list_repeat('a', 2)", [["a", "a"]] * 3),
    ("array_remove(ia, 3)", [[1, 2, 3], [], None]),
    ("array_remove(make_array(1, 2, 2, 3, 2, 1, 4), 2)", [[1, 2, 3, 2, 1, 4]] * 3),
    ("array_remove_n(make_array(1, 2, 2, 3, 2, 1, 4), 2, 2)", [[1, 3, 2, 1, 4]] * 3),
    ("array_remove_all(ia, 3)", [[1, 2], [], None]),
    ("array_replace(ia, 3, 0)", [[0, 1, 2, 3], [], None]),
    ("array_replace_n(make_array(1, 2, 2, 3, 2, 1, 4), 2, 5, 2)", [[1, 5, 5, 3, 2, 1, 4]] * 3),
    ("array_replace_all(ia, 3, 0)", [[0, 1, 2, 0], [], None]),
    ("array_resize(make_array(1, 2, 3), 5, 0)", [[1, 2, 3, 0, 0]] * 3),
    ("array_resize(ia, 2)", [[3, 1], [None, None], None]),
    ("array_reverse(ia)", [[3, 2, 1, 3], [], None]),
    (f"array_slice({EIGHT}, 3, 6)", [[3, 4, 5, 6]] * 3),
    (f"array_slice({EIGHT}, -3, -1)", [[6, 7, 8]] * 3),
    (f"array_slice({EIGHT}, 1, 8, 2)", [[1, 3, 5, 7]] * 3),
    (f"array_slice({EIGHT}, 6, 2, -2)", [[6, 4, 2]] * 3),
    (f"array_slice({EIGHT}, 0, 2)", [[1, 2]] * 3),
    ("array_slice(ia, 2, 3)", [[1, 2], [], None]),
    ("array_sort(ia)", [[1, 2, 3, 3], [], None]),
    ("array_sort(ia, 'DESC')", [[3, 3, 2, 1], [], None]),
    ("array_sort(make_array(3, NULL, 1))", [[None, 1, 3]] * 3),
    ("array_sort(make_array(3, NULL, 1), 'DESC')", [[None, 3, 1]] * 3),
    ("list_sort(make_array(3, NULL, 1), 'ASC', 'NULLS LAST')", [[1, 3, None]] * 3),
    ("cardinality(na)", [4, 1, None]),
    ("cardinality(ia)", [4, 0, None]),
    ("empty(ia)", [False, True, None]),
    ("array_empty(make_array(1))", [False] * 3),
    ("generate_series(1, 3)", [[1, 2, 3]] * 3),
    ("generate_series(1, 10, 3)", [[1, 4, 7, 10]] * 3),
    ("generate_series(3, 1)", [[]] * 3),
    ("range(1, 5)", [[1, 2, 3, 4]] * 3),
    ("range(2, 10, 3)", [[2, 5, 8]] * 3),
    ("range(3)", [[0, 1, 2]] * 3),
    ("range(5, 1)", [[]] * 3),
    ("make_array(1, 2)", [[1, 2]] * 3),
    ("make_list('a')", [["a"]] * 3),
    ("string_to_array('abc##def', '##')", [["abc", "def"]] * 3),
    ("string_to_array('abc def', ' ', 'def')", [["abc", None]] * 3),
    ("string_to_array('a.b', '.')", [["a", "b"]] * 3),
    ("string_to_list(s, '-')", [["ab", "12"], ["cd", "34"], ["ef"]]),
    ("trim_array(make_array(1, 2, 3), 1)", [[1, 2]] * 3),
    ("array_fill(7, make_array(2))", [[7, 7]] * 3),
    # structs
    ("struct(x, n AS k)", [Row(c0=1.0, k=6), Row(c0=2.0, k=3), Row(c0=3.0, k=5)]),
    ("named_struct('a', n)", [Row(a=6), Row(a=3), Row(a=5)]),
    # Arrow types: names as Arrow gives them for the types Arroyo holds
    ("arrow_typeof(n)", ["Int64"] * 3),
    ("arrow_typeof(1)", ["Int64"] * 3),
    ("arrow_typeof('foo')", ["Utf8"] * 3),
    ("arrow_typeof(x)", ["Float64"] * 3),
    ("arrow_typeof(ts)", ["Timestamp(Nanosecond, None)"] * 3),
    ("arrow_typeof(ia)", ["List(Int64)"] * 3),
    ("arrow_cast(-5, 'Int8')", [-5] * 3),
    ("typeof(arrow_cast(-5, 'Int8'))", ["tinyint"] * 3),
    ("arrow_cast('foo', 'Dictionary(Int32, Utf8)')", ["foo"] * 3),
    (
        "arrow_cast('2023-01-02T12:53:02.5', 'Timestamp(Second, None)')",
        [dt.datetime(2023, 1, 2, 12, 53, 2)] * 3,
    ),
    # Arroyo's own
    ("row_time() = ts", [True] * 3),
    ("typeof(wallclock())", ["timestamp"] * 3),
]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_array_function(results: dict[str, Any], expression: str, expected: Any) -> None:
    check(values(results, expression), expected)


@pytest.mark.spark
def test_unnest_in_a_projection(spark: SparkSession, results: dict[str, Any]) -> None:
    got = evaluate(spark, "SELECT unnest(arr) FROM fn_input")
    assert sorted(got) == ["p", "q", "r"]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("metadata('offset_id')", "METADATA FROM"),
        ("arrow_cast(x, 'Duration(Second)')", "no Spark equivalent"),
        ("array_fill(1, ia)", "array literal"),
        ("array_ndims(split(s, '-'))", "type is not known"),
        ("array_length(ia, n)", "must be a literal"),
    ],
)
def test_unmappable_array_calls_are_refused(expression: str, message: str) -> None:
    columns = {"t": {"ia": "array<bigint>", "n": "bigint", "x": "double", "s": "string"}}
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t", columns)
