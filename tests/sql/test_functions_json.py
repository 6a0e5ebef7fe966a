"""JSON functions and operators on Spark, against Arroyo's answers (datafusion-functions-json
and Arroyo's JSONPath functions): ``->`` keeps a string's quotes and answers the text ``null``
for a missing key (golden json_operators.json); ``->>`` and the typed getters answer SQL NULL,
a getter also for a value of another JSON type."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.sql.functions import FunctionError
from tests.sql.functions_support import check, create_tables, evaluate_all, translated, values

# The rows' JSON (ordered by s):
#   {"a":{"b":[10,20]},"s":"x","f":1.5,"t":true,"i":-3,"n":null,"q":"12"}
#   {"a":{"b":[30]},"s":"y","f":2.5,"t":false}
#   {"a":{},"s":null,"f":0,"t":false}
CASES: list[tuple[str, Any]] = [
    # json_get and ->: JSON text, strings quoted, a missing value the text null
    ("j -> 's'", ['"x"', '"y"', "null"]),
    ("j -> 'missing'", ["null"] * 3),
    ("j -> 'a' -> 'b' -> 1", ["20", "null", "null"]),
    ("json_get(j, 'a', 'b', 1)", ["20", "null", "null"]),
    ("json_get(j, 'a', 'b', -1)", ["null"] * 3),
    ("j -> 'a'", ['{"b":[10,20]}', '{"b":[30]}', "{}"]),
    ("j -> 'f'", ["1.5", "2.5", "0"]),
    ("json_get('not json', 'a')", ["null"] * 3),
    ("json_get_json(j, 'a', 'b')", ["[10,20]", "[30]", None]),
    ("json_get_json(j, 's')", ['"x"', '"y"', "null"]),
    # ->> and json_as_text: strings unquoted, JSON null and missing values NULL
    ("j ->> 's'", ["x", "y", None]),
    ("j ->> 'f'", ["1.5", "2.5", "0"]),
    ("j ->> 'a'", ['{"b":[10,20]}', '{"b":[30]}', "{}"]),
    ("json_as_text(j, 'a', 'b', 0)", ["10", "30", None]),
    # typed getters: NULL for another JSON type (no failed cast)
    ("json_get_str(j, 's')", ["x", "y", None]),
    ("json_get_str(j, 'f')", [None] * 3),
    ("json_get_str(j, 'q')", ["12", None, None]),
    ("json_get_int(j, 'a', 'b', 0)", [10, 30, None]),
    ("json_get_int(j, 'q')", [None] * 3),
    ("json_get_int(j, 'f')", [None, None, 0]),
    ("json_get_int(j, 'i')", [-3, None, None]),
    ("json_get_float(j, 'f')", [1.5, 2.5, 0.0]),
    ("json_get_float(j, 'a', 'b', 0)", [10.0, 30.0, None]),
    ("json_get_float(j, 's')", [None] * 3),
    ("json_get_bool(j, 't')", [True, False, False]),
    ("json_get_bool(j, 'f')", [None] * 3),
    # a cast of json_get is the typed getter (datafusion-functions-json's rewrite)
    ("CAST(j -> 'i' AS INT)", [-3, None, None]),
    ("(j -> 'f')::double", [1.5, 2.5, 0.0]),
    ("json_get(j, 's')::text", ["x", "y", None]),
    # length, containment, keys
    ("json_length(j, 'a', 'b')", [2, 1, None]),
    ("json_length(j)", [7, 4, 4]),
    ("json_len(j, 'a')", [1, 1, 0]),
    ("json_length(j, 's')", [None] * 3),
    ("json_contains(j, 'a', 'b')", [True, True, False]),
    ("json_contains(j, 'a', 'b', 1)", [True, False, False]),
    ("json_contains(j, 'n')", [True, False, False]),
    ("j ? 'f'", [True] * 3),
    ("j ? 'missing'", [False] * 3),
    ("json_object_keys(j, 'a')", [["b"], ["b"], []]),
    # Arroyo's JSONPath functions: every match as JSON text, strings quoted
    ("extract_json(j, '$.a.b[*]')", [["10", "20"], ["30"], []]),
    ("extract_json(j, '$.a.b')", [["[10,20]"], ["[30]"], []]),
    ("extract_json(j, '$.s')", [['"x"'], ['"y"'], ["null"]]),
    ("extract_json(j, '$.a.b[-1]')", [["20"], ["30"], []]),
    ("extract_json(j, '$[''a''].*')", [["[10,20]"], ["[30]"], []]),
    ("extract_json('nope', '$.a')", [None] * 3),
    ("extract_json_string(j, '$.s')", ["x", "y", None]),
    ("extract_json_string(j, '$.f')", [None] * 3),
    ("get_first_json_object(j, '$.a.b[0]')", ["10", "30", None]),
    ("get_first_json_object(j, '$.s')", ['"x"', '"y"', "null"]),
    ("json_get_int('{\"it''s\": 3, \"a b[1]\": [1, 2, 3]}', 'it''s')", [3] * 3),
    ("json_get_int('{\"it''s\": 3, \"a b[1]\": [1, 2, 3]}', 'a b[1]', 2)", [3] * 3),
]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_json_function(results: dict[str, Any], expression: str, expected: Any) -> None:
    check(values(results, expression), expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("json_get(j, s)", "takes literal keys"),
        ("extract_json(j, '$..a')", "recursive descent"),
        ("extract_json(j, '$.a[?(@.b)]')", "filter"),
        ("extract_json(j, s)", "must be a literal"),
        ("json_get_int(j, 'it''s\"')", "both ' and"),
    ],
)
def test_unmappable_json_calls_are_refused(expression: str, message: str) -> None:
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t")
