"""Every construct the planner refuses gives a diagnostic with a stable code and a position."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import PlanningError
from tests.sql.harness import INPUTS

SRC = """CREATE TABLE src (id BIGINT, name TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '/nonexistent/in.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '/nonexistent/out.json', type = 'sink');
"""

USERS = (
    "CREATE TABLE users (name TEXT, country TEXT) WITH (connector = 'single_file', "
    f"path = '{INPUTS / 'users.json'}', format = 'json', type = 'lookup');\n"
)

# (case, SQL appended after SRC, expected code, line, column of the diagnostic). Clauses that
# carry no position of their own (ORDER BY, LIMIT, an aggregate SELECT) point at their first
# operand.
CASES = [
    (
        "unknown_option",
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = '1', speed = 'x');\n"
        "INSERT INTO out SELECT counter FROM i;",
        "unknown_option",
        4,
        63,
    ),
    (
        "missing_option",
        "CREATE TABLE i WITH (connector = 'impulse');\nINSERT INTO out SELECT counter FROM i;",
        "missing_option",
        4,
        14,
    ),
    (
        "bad_option_value",
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = 'fast');\n"
        "INSERT INTO out SELECT counter FROM i;",
        "bad_option",
        4,
        45,
    ),
    ("unknown_column", "INSERT INTO out SELECT id, nme FROM src;", "unknown_column", 4, 28),
    ("read_from_sink", "INSERT INTO out SELECT * FROM out;", "read_from_sink", 4, 31),
    ("insert_into_source", "INSERT INTO src SELECT * FROM src;", "insert_into_source", 4, 13),
    ("unknown_table", "INSERT INTO out SELECT * FROM nowhere;", "unknown_table", 4, 31),
    (
        "window_outside_group_by",
        "INSERT INTO out SELECT tumble(interval '1 minute') AS w, id FROM src;",
        "window_outside_group_by",
        4,
        24,
    ),
    (
        "window_in_where",
        "INSERT INTO out SELECT count(*) FROM src WHERE tumble(interval '1 minute') IS NULL "
        "GROUP BY tumble(interval '1 minute');",
        "window_outside_group_by",
        4,
        48,
    ),
    (
        "aggregate_without_window",
        "CREATE VIEW w AS SELECT tumble(interval '1 minute') AS window, id, count(*) AS c "
        "FROM src GROUP BY 1, 2;\nINSERT INTO out SELECT id, sum(c) FROM w GROUP BY id;",
        "aggregate_without_window",
        5,
        None,
    ),
    (
        "hop_not_multiple",
        "INSERT INTO out SELECT count(*) FROM src "
        "GROUP BY hop(interval '7 seconds', interval '1 minute');",
        "bad_hop",
        4,
        51,
    ),
    (
        "mismatched_nested_windows",
        "CREATE VIEW w AS SELECT tumble(interval '1 minute') AS window, count(*) AS c "
        "FROM src GROUP BY 1;\n"
        "INSERT INTO out SELECT tumble(interval '1 hour') AS window, sum(c) FROM w GROUP BY 1;",
        "mismatched_windows",
        5,
        24,
    ),
    (
        "top_level_order_by",
        "INSERT INTO out SELECT id FROM src ORDER BY id;",
        "unsupported_order",
        4,
        45,
    ),
    ("top_level_limit", "SELECT id FROM src LIMIT 10;", "unsupported_limit", 4, 26),
    (
        "unknown_connector",
        "CREATE TABLE k WITH (connector = 'kafkaa', topic = 't');\nSELECT * FROM k;",
        "unknown_connector",
        4,
        22,
    ),
    (
        "unknown_format",
        "CREATE TABLE f (a TEXT) WITH (connector = 'single_file', path = '/x', "
        "format = 'xml', type = 'source');\nSELECT * FROM f;",
        "unknown_format",
        4,
        71,
    ),
    (
        "format_not_supported",
        "CREATE TABLE f (a TEXT) WITH (connector = 'single_file', path = '/x', "
        "format = 'parquet', type = 'source');\nSELECT * FROM f;",
        "unknown_format",
        4,
        71,
    ),
    (
        "unknown_type",
        "CREATE TABLE f (a VARCHA) WITH (connector = 'single_file', path = '/x',"
        " type = 'source');\nSELECT * FROM f;",
        "unknown_type",
        4,
        19,
    ),
    ("syntax_error", "SELECT id FROM src WHERE (id > ;", "syntax_error", 4, None),
    (
        "row_number_over_unwindowed_input",
        "INSERT INTO out SELECT id, ROW_NUMBER() OVER (PARTITION BY name ORDER BY id) FROM src;",
        "window_function_input",
        4,
        28,
    ),
    (
        "top_n_too_large",
        "INSERT INTO out SELECT id FROM (SELECT id, name,\n"
        "ROW_NUMBER() OVER (PARTITION BY name ORDER BY id DESC) AS rn FROM src) WHERE rn < 200000;",
        "unwindowed_top_n",
        5,
        78,
    ),
    (
        "top_one_not_selecting_its_partition",
        "INSERT INTO out SELECT id FROM (SELECT id,\n"
        "ROW_NUMBER() OVER (PARTITION BY name ORDER BY id DESC) AS rn FROM src) WHERE rn = 1;",
        "unwindowed_top_n",
        5,
        1,
    ),
    (
        "top_one_in_mixed_directions",
        "INSERT INTO out SELECT id FROM (SELECT id, name,\n"
        "ROW_NUMBER() OVER (PARTITION BY name ORDER BY id DESC, ts) AS rn FROM src) WHERE rn = 1;",
        "unwindowed_top_n",
        5,
        1,
    ),
    (
        "row_number_not_partitioned_by_window",
        "INSERT INTO out SELECT c, ROW_NUMBER() OVER (ORDER BY c) FROM (SELECT tumble("
        "interval '1 minute') AS w, count(*) AS c FROM src GROUP BY w) AS t;",
        "window_function_partition",
        4,
        27,
    ),
    (
        "unwindowed_left_join",
        "INSERT INTO out SELECT a.id FROM src AS a LEFT JOIN src AS b ON a.id = b.id;",
        "unwindowed_outer_join",
        4,
        None,
    ),
    (
        "unwindowed_join_without_equality",
        "INSERT INTO out SELECT a.id FROM src AS a JOIN src AS b ON a.id < b.id;",
        "join_without_equality",
        4,
        None,
    ),
    (
        "memory_table_written_twice",
        "CREATE TABLE m (id BIGINT);\nINSERT INTO m SELECT id FROM src;\n"
        "INSERT INTO m SELECT id FROM src;",
        "memory_table_written_twice",
        6,
        13,
    ),
    (
        "memory_table_read_before_write",
        "CREATE TABLE m (id BIGINT);\nINSERT INTO out SELECT id FROM m;",
        "memory_table_read_before_write",
        5,
        None,
    ),
    ("unknown_setting", "SET speed = 'fast';\nSELECT id FROM src;", "unknown_setting", 4, 1),
    (
        "bad_updating_ttl",
        "SET updating_ttl = INTERVAL '1 fortnight';\nSELECT id FROM src;",
        "bad_setting",
        4,
        1,
    ),
    (
        "updating_into_json_sink",
        "INSERT INTO out SELECT count(*) FROM src;",
        "updating_into_append_sink",
        4,
        13,
    ),
    (
        "missing_type",
        "CREATE TABLE f (a TEXT) WITH (connector = 'single_file', path = '/x');\nSELECT * FROM f;",
        "missing_option",
        4,
        14,
    ),
    (
        "bad_data_value",
        "CREATE TABLE f (a TEXT) WITH (connector = 'single_file', path = '/x', "
        "type = 'source', bad_data = 'ignore');\nSELECT * FROM f;",
        "bad_option",
        4,
        88,
    ),
    (
        "lookup_only",
        USERS + "INSERT INTO out SELECT name FROM users;",
        "lookup_only",
        5,
        24,
    ),
    (
        "lookup_left_join_stream",
        USERS + "INSERT INTO out SELECT u.name, s.id FROM users AS u\nLEFT JOIN src AS s "
        "ON s.name = u.name;",
        "lookup_outer_join",
        6,
        11,
    ),
    (
        "stream_full_join_lookup",
        USERS + "INSERT INTO out SELECT u.name, s.id FROM src AS s\nFULL JOIN users AS u "
        "ON s.name = u.name;",
        "lookup_outer_join",
        6,
        11,
    ),
    (
        "stream_right_join_lookup",
        USERS + "INSERT INTO out SELECT u.name, s.id FROM src AS s\nRIGHT JOIN users AS u "
        "ON s.name = u.name;",
        "lookup_outer_join",
        6,
        12,
    ),
    (
        "lookup_semi_join_stream",
        USERS + "INSERT INTO out SELECT u.name FROM users AS u\nSEMI JOIN src AS s "
        "ON s.name = u.name;",
        "lookup_outer_join",
        6,
        11,
    ),
    (
        "union_of_stream_and_lookup",
        USERS + "INSERT INTO out SELECT name FROM src\nUNION ALL SELECT name FROM users;",
        "lookup_union",
        5,
        None,
    ),
    (
        "lookup_with_watermark",
        "CREATE TABLE users (name TEXT, at TIMESTAMP, WATERMARK FOR at) WITH (connector = "
        f"'single_file', path = '{INPUTS / 'users.json'}', type = 'lookup');\nSELECT 1;",
        "lookup_table",
        4,
        46,
    ),
    (
        "lookup_without_files",
        "CREATE TABLE users (name TEXT) WITH (connector = 'filesystem',\n"
        "path = '/nonexistent/users', type = 'lookup');\n"
        "INSERT INTO out SELECT s.id, u.name FROM src AS s JOIN users AS u ON s.name = u.name;",
        "lookup_table",
        4,
        14,
    ),
    (
        "lookup_of_change_records",
        "CREATE TABLE users (name TEXT) WITH (connector = 'single_file', "
        f"path = '{INPUTS / 'users.json'}', format = 'debezium_json', type = 'lookup');\n"
        "SELECT 1;",
        "lookup_table",
        4,
        14,
    ),
    (
        "lookup_connector_cannot",
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = '1', type = 'lookup');\n"
        "SELECT 1;",
        "bad_option",
        4,
        63,
    ),
    (
        # Each reader of a view over an interval join runs the join in its own query; a join
        # Spark runs (keys of two types) goes through a stage, which one query can read.
        "updating_join_shared",
        "CREATE TABLE src2 (id INT, name TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts) "
        "WITH (connector = 'single_file', path = '/nonexistent/2.json', format = 'json', "
        "type = 'source');\n"
        "CREATE TABLE o1 WITH (connector = 'single_file', path = '/nonexistent/1.json', "
        "format = 'debezium_json', type = 'sink');\n"
        "CREATE TABLE o2 WITH (connector = 'single_file', path = '/nonexistent/2.json', "
        "format = 'debezium_json', type = 'sink');\n"
        "CREATE VIEW v AS SELECT s.name, count(*) AS c FROM src AS s JOIN src2 AS t "
        "ON s.id = t.id GROUP BY s.name;\n"
        "INSERT INTO o1 SELECT * FROM v;\nINSERT INTO o2 SELECT * FROM v;",
        "updating_join_shared",
        9,
        13,
    ),
    (
        "updating_result_aggregate_shared",
        "CREATE TABLE o1 WITH (connector = 'single_file', path = '/nonexistent/1.json', "
        "format = 'debezium_json', type = 'sink');\n"
        "CREATE TABLE o2 WITH (connector = 'single_file', path = '/nonexistent/2.json', "
        "format = 'debezium_json', type = 'sink');\n"
        "CREATE VIEW v AS SELECT count(*) AS c FROM "
        "(SELECT name, max(id) AS top FROM src GROUP BY name HAVING max(id) > 0) AS m;\n"
        "INSERT INTO o1 SELECT * FROM v;\nINSERT INTO o2 SELECT * FROM v;",
        "updating_join_shared",
        8,
        13,
    ),
    (
        "updating_outer_join",
        "INSERT INTO out SELECT s.name, count(*) AS c FROM src AS s\n"
        "LEFT JOIN src AS t ON s.id = t.id GROUP BY s.name;",
        "unwindowed_outer_join",
        5,
        None,
    ),
    (
        "virtual_column_unknown_function",
        "CREATE TABLE v (a TEXT, b TEXT GENERATED ALWAYS AS (no_such_fn(a)) STORED) WITH ("
        "connector = 'single_file', path = '/nonexistent/v.json', format = 'json', "
        "type = 'source');\nINSERT INTO out SELECT b FROM v;",
        "unknown_function",
        4,
        14,
    ),
    # Arroyo reserves names starting with __arroyo (any case), declared or aliased.
    ("reserved_alias", "INSERT INTO out SELECT id AS __arroyo_x FROM src;", "reserved_name", 4, 30),
    (
        "reserved_column",
        "CREATE TABLE c (\"__Arroyo_Custom\" TEXT) WITH (connector = 'single_file', "
        "path = '/nonexistent/c.json', format = 'json', type = 'source');\n"
        "INSERT INTO out SELECT * FROM c;",
        "reserved_name",
        4,
        17,
    ),
    (
        "internal_connector",
        "CREATE TABLE x (a BIGINT) WITH (connector = '__stage', type = 'source');\n"
        "INSERT INTO out SELECT a FROM x;",
        "unknown_connector",
        4,
        None,
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("sql", "code", "line", "column"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_refused_with_diagnostic(
    spark: SparkSession,
    tmp_path: Path,
    sql: str,
    code: str,
    line: int | None,
    column: int | None,
) -> None:
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(SRC + sql)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.code == code, diagnostic.render()
    assert diagnostic.span is not None, diagnostic.render()
    if line is not None:
        assert diagnostic.span.line == line, diagnostic.render()
    if column is not None:
        assert diagnostic.span.column == column, diagnostic.render()


@pytest.mark.spark
def test_all_statement_errors_are_reported_together(spark: SparkSession, tmp_path: Path) -> None:
    sql = SRC + "INSERT INTO out SELECT nope FROM src;\nINSERT INTO src SELECT * FROM src;"
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    assert [d.code for d in caught.value.diagnostics] == ["unknown_column", "insert_into_source"]


@pytest.mark.spark
def test_a_rewrite_spark_cannot_parse_is_a_diagnostic_with_a_message(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Found by tests/fuzz: Spark's ParseException text starts with a newline, and the
    diagnostic took its (empty) first line as the message."""
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(
            SRC + "INSERT INTO out SELECT id FROM src GROUP BY ();"
        )
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "invalid_query"
    assert diagnostic.message
