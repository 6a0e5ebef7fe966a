"""How ``arroyo.sql.functions.translate`` goes about a query, whatever the function: calls are
rewritten innermost first, a rewritten tree is left alone by a second translation, the column
types the planner hands over choose DataFusion's typed answers, and a refusal names the
function. Each family's functions are checked on Spark in ``test_functions_<family>.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from arroyo.sql.functions import FunctionError, translate
from arroyo.sql.statements import ArroyoDialect
from tests.sql.functions_support import INPUT, create_tables, evaluate, translated


def test_a_translated_tree_is_left_alone_by_a_second_translation() -> None:
    tree = sqlglot.parse_one(
        "SELECT regexp_replace(s, 'a(b)', '\\1', 'g'), j -> 'k', median(n), 0.5, arr[1] FROM t",
        read=ArroyoDialect,
    )
    columns = {"t": {"n": "bigint"}}
    translate(tree, lambda: exp.column("ts"), None, columns)
    once = tree.sql(dialect="spark")
    translate(tree, lambda: exp.column("ts"), None, columns)
    assert tree.sql(dialect="spark") == once


def test_column_types_choose_the_typed_answers() -> None:
    columns = {"t": {"n": "bigint", "x": "double"}}
    assert "DIV" in translated("SELECT n / 2 FROM t", columns)
    assert "DIV" not in translated("SELECT x / 2 FROM t", columns)
    assert "DIV" in translated("SELECT t.n / t.n FROM t", columns)
    # Unknown types keep Spark's answer rather than guess.
    assert "DIV" not in translated("SELECT m / 2 FROM t", columns)


@pytest.mark.spark
def test_calls_inside_calls(spark: SparkSession) -> None:
    create_tables(spark)
    got = evaluate(
        spark,
        f"SELECT json_get_int(json_get_json(j, 'a'), 'b', 0) + array_length(regexp_match(s, "
        f"'([a-z])([a-z])')) FROM {INPUT} ORDER BY s",
    )
    assert got == [12, 32, None]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("row_time(1)", r"row_time\(\): takes 0 arguments"),
        ("json_get(j, s)", r"json_get\(\): takes literal keys"),
        ("regexp_match(s, s)", r"regexp_match\(\): the pattern must be a literal"),
    ],
)
def test_refusals_name_the_function(expression: str, message: str) -> None:
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t")


def test_every_documented_function_is_tested() -> None:
    """docs/functions.md lists Arroyo's functions; each one's name (aliases aside) appears in a
    function test or a golden query."""
    root = Path(__file__).resolve().parents[2]
    here = Path(__file__).parent
    corpus = "\n".join(
        p.read_text() for p in [*here.glob("test_functions*.py"), *here.glob("queries/*.sql")]
    ).lower()
    names = set()
    for line in (root / "docs" / "functions.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = re.sub(r"\(alias(?:es)? [^)]*\)", "", line.split(" | ")[0])
        names.update(re.findall(r"`([a-z_][a-z0-9_]*)", first_cell))
    assert len(names) > 180
    untested = sorted(n for n in names if not re.search(rf"\b{n}\b", corpus))
    assert not untested
