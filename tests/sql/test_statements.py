"""Parsing Arroyo's DDL and splitting scripts: no Spark needed."""

from __future__ import annotations

import pytest

from arroyo.errors import PlanningError
from arroyo.sql.statements import CreateTable, CreateView, Insert, Query, parse_script
from arroyo.sql.time import DurationError, parse_duration_us
from arroyo.sql.types import parse_type, spark_type


def test_create_table_with_every_clause() -> None:
    _, [table] = parse_script(
        "CREATE TABLE t (\n"
        "  id BIGINT NOT NULL PRIMARY KEY,\n"
        "  tags TEXT[],\n"
        "  s STRUCT<x INT, y TEXT>,\n"
        "  k TEXT METADATA FROM 'key',\n"
        "  g BIGINT GENERATED ALWAYS AS (id + 1) STORED,\n"
        "  ts TIMESTAMP NOT NULL,\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '5 seconds'\n"
        ") WITH (connector = 'single_file', 'json.timestamp_format' = 'unix_millis', n = 3)"
    )
    assert isinstance(table, CreateTable)
    assert [c.name for c in table.columns] == ["id", "tags", "s", "k", "g", "ts"]
    assert table.columns[0].nullable is False
    assert table.primary_key == ["id"]
    assert table.columns[3].metadata_key == "key"
    assert table.columns[4].generated is not None
    assert table.watermark_column == "ts"
    assert [(o.key, o.value) for o in table.options] == [
        ("connector", "single_file"),
        ("json.timestamp_format", "unix_millis"),
        ("n", "3"),
    ]


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE o (k TEXT, v INT) PARTITIONED BY (k, \"V\") WITH (connector = 'filesystem')",
        "CREATE TABLE o (k TEXT, v INT) WITH (connector = 'filesystem') PARTITIONED BY (k, \"V\")",
    ],
    ids=["before_with", "after_with"],
)
def test_partitioned_by_names_the_partition_fields(ddl: str) -> None:
    _, [table] = parse_script(ddl)
    assert isinstance(table, CreateTable)
    assert ("partitioning.fields", "[k, V]") in [(o.key, o.value) for o in table.options]


@pytest.mark.parametrize(
    ("ddl", "column"),
    [
        ("CREATE TABLE o (k TEXT) WITH (connector = 'filesystem', "
         "'partitioning.fields' = [k]) PARTITIONED BY (k)", 86),
        ("CREATE TABLE o (k TEXT) PARTITIONED BY (k v) WITH (connector = 'filesystem')", 43),
        ("CREATE TABLE o (k TEXT) PARTITIONED BY (k.v) WITH (connector = 'filesystem')", 42),
        ("CREATE TABLE o (k TEXT) PARTITIONED BY () WITH (connector = 'filesystem')", 41),
        ("CREATE TABLE o (k INT) PARTITIONED BY (bucket(k, 4, 2)) WITH (connector = 'x')", 51),
        ("CREATE TABLE o (k INT) PARTITIONED BY (bucket(k, 1.5)) WITH (connector = 'x')", 50),
    ],
    ids=["given_twice", "no_comma", "dotted", "empty", "two_numbers", "fraction"],
)  # fmt: skip
def test_bad_partitioned_by_is_a_syntax_error_where_it_is(ddl: str, column: int) -> None:
    with pytest.raises(PlanningError) as caught:
        parse_script(ddl)
    [diagnostic] = caught.value.diagnostics
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.column) == (
        "syntax_error",
        1,
        column,
    ), diagnostic


def test_statement_kinds() -> None:
    _, statements = parse_script(
        "CREATE VIEW v AS SELECT 1;\nINSERT INTO o SELECT * FROM v;\nSELECT window.start FROM v"
    )
    assert [type(s) for s in statements] == [CreateView, Insert, Query]


@pytest.mark.parametrize(
    ("sql", "code", "line", "column"),
    [
        ("CREATE TABLE t (a NOTATYPE) WITH (connector = 'x')", "unknown_type", 1, 19),
        ("SELECT 1;\nDROP TABLE t", "unsupported_statement", 2, 1),
        ("CREATE TABLE t (a INT", "syntax_error", 1, 22),
    ],
)
def test_parse_errors_point_at_the_problem(sql: str, code: str, line: int, column: int) -> None:
    with pytest.raises(PlanningError) as caught:
        parse_script(sql)
    d = caught.value.diagnostics[0]
    assert (d.code, d.span and d.span.line, d.span and d.span.column) == (code, line, column)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TEXT[]", "ARRAY<STRING>"),
        ("BIGINT UNSIGNED", "DECIMAL(20,0)"),
        ("INT UNSIGNED", "BIGINT"),
        ("BYTEA", "BINARY"),
        ("JSON", "STRING"),
        ("DECIMAL(10,2)", "DECIMAL(10,2)"),
        ("STRUCT<a STRUCT<b INT>>", "STRUCT<`a`: STRUCT<`b`: INT>>"),
        ("VARCHAR", "STRING"),
    ],
)
def test_types(text: str, expected: str) -> None:
    assert spark_type(parse_type(text)) == expected


def test_durations() -> None:
    assert parse_duration_us("1 minute 30 seconds") == 90_000_000
    assert parse_duration_us("100 milliseconds") == 100_000
    # A month or a year has no fixed length: the message says what to write instead.
    with pytest.raises(DurationError, match=r"'months' has no fixed length.*30 days"):
        parse_duration_us("2 months")
    with pytest.raises(DurationError, match="unknown time unit 'fortnight'"):
        parse_duration_us("1 fortnight")
