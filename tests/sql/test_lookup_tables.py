"""Lookup tables (``type = 'lookup'``): static tables joined with streams. Results of the plain
cases are golden (lookup_join, lookup_windowed_join) and recomputed by DuckDB in
test_differential; these cover what a golden case cannot: a table edited while a pipeline is
stopped, and Parquet lookup tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from tests.sql.harness import INPUTS, read_output, replay_changes

EVENTS = f"""CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, amount DOUBLE,
    ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "events.json"}', format = 'json',
      type = 'source');
"""


EVENT_ROWS = [json.loads(line) for line in (INPUTS / "events.json").read_text().splitlines()]


def _events_of(user: str) -> int:
    return sum(e["user"] == user for e in EVENT_ROWS)


def _plan_and_run(
    spark: SparkSession, sql: str, state: Path, stop_after: int | None = None
) -> None:
    program = spark_planner(spark, state_dir=state).plan(sql)
    runner = PipelineRunner(
        spark, program, state, max_records_per_batch=10, stop_after_batches=stop_after
    )
    runner.start()
    finished = runner.wait(timeout=300)
    assert finished == (stop_after is None), "the run stopped at the wrong point"


@pytest.mark.spark
def test_a_lookup_table_edited_while_stopped_is_read_as_it_is_on_resuming(
    spark: SparkSession, tmp_path: Path
) -> None:
    users = tmp_path / "users.json"
    shutil.copy(INPUTS / "users.json", users)
    out = tmp_path / "out.json"
    sql = (
        EVENTS
        + f"""CREATE TABLE users (name TEXT, country TEXT) WITH (connector = 'single_file',
    path = '{users}', format = 'json', type = 'lookup');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json', type = 'sink');
INSERT INTO out SELECT e.id, u.country FROM events AS e JOIN users AS u ON e."user" = u.name;
"""
    )
    _plan_and_run(spark, sql, tmp_path / "state", stop_after=2)
    before = {r["id"]: r["country"] for r in read_output(out)}
    assert before and set(before.values()) <= {"fr", "us"}
    # Blank lines are no records (as in a source).
    users.write_text(
        json.dumps({"name": "alice", "country": "ch"}) + "\n\n"
        + json.dumps({"name": "bob", "country": "us"}) + "\n  \n"
    )  # fmt: skip
    _plan_and_run(spark, sql, tmp_path / "state")
    rows = read_output(out)
    alice = {e["id"] for e in EVENT_ROWS if e["user"] == "alice"}
    bob = {e["id"] for e in EVENT_ROWS if e["user"] == "bob"}
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(alice | bob), "each event of a known user exactly once"
    after = {r["id"]: r["country"] for r in rows if r["id"] not in before}
    assert after.keys() & alice and all(after[i] == "ch" for i in after.keys() & alice)
    assert before.keys() & alice and all(before[i] == "fr" for i in before.keys() & alice)


@pytest.mark.spark
def test_a_parquet_directory_as_a_lookup_table(spark: SparkSession, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.mkdir()
    pq.write_table(
        pa.table({"name": ["alice"], "tier": pa.array([1], pa.int32())}), users / "a.parquet"
    )
    pq.write_table(
        pa.table({"name": ["bob"], "tier": pa.array([2], pa.int32())}), users / "b.parquet"
    )
    out = tmp_path / "out.json"
    sql = (
        EVENTS
        + f"""CREATE TABLE users (name TEXT, tier INT) WITH (connector = 'filesystem',
    path = '{users}', format = 'parquet', type = 'lookup');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'debezium_json',
    type = 'sink');
INSERT INTO out SELECT u.tier, count(*) AS n FROM events AS e
JOIN users AS u ON e."user" = u.name GROUP BY u.tier;
"""
    )
    _plan_and_run(spark, sql, tmp_path / "state")
    final = {r["tier"]: r["n"] for r in replay_changes(read_output(out))}
    assert final == {1: _events_of("alice"), 2: _events_of("bob")}


@pytest.mark.spark
def test_views_and_subqueries_of_lookup_tables_are_lookup_tables(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A view, CTE or subquery reading lookup tables alone is static too: a stream may
    LEFT JOIN it (which a stream-stream join without windows may not)."""
    sql = (
        EVENTS
        + f"""CREATE TABLE users (name TEXT, country TEXT) WITH (connector = 'single_file',
    path = '{INPUTS / "users.json"}', format = 'json', type = 'lookup');
CREATE TABLE out WITH (connector = 'single_file', path = '/dev/null', type = 'sink');
CREATE VIEW french AS SELECT name FROM users WHERE country = 'fr';
INSERT INTO out
WITH countries AS (SELECT DISTINCT country FROM users)
SELECT e.id, f.name, c.country FROM events AS e
LEFT JOIN french AS f ON e."user" = f.name
LEFT JOIN (SELECT name, country FROM users) AS u ON e."user" = u.name
LEFT JOIN countries AS c ON u.country = c.country;
"""
    )
    (query,) = spark_planner(spark, state_dir=tmp_path).plan(sql).queries
    assert [c.name for c in query.sink.columns] == ["id", "name", "country"]


@pytest.mark.spark
def test_an_updating_aggregate_over_a_join_written_lookup_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    sql = (
        EVENTS
        + f"""CREATE TABLE users (name TEXT, country TEXT) WITH (connector = 'single_file',
    path = '{INPUTS / "users.json"}', format = 'json', type = 'lookup');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'debezium_json',
    type = 'sink');
INSERT INTO out SELECT u.country, count(*) AS n FROM users AS u
JOIN events AS e ON e."user" = u.name GROUP BY u.country;
"""
    )
    _plan_and_run(spark, sql, tmp_path / "state")
    final = {r["country"]: r["n"] for r in replay_changes(read_output(out))}
    assert final == {"fr": _events_of("alice"), "us": _events_of("bob")}
