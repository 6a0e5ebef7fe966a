"""A stateless query over file sources runs without its event-time operators and ends when its
sources' offsets say so (arroyo.engine.plans.without_event_time, EndByOffsets.java); a query
that keeps state, or reads another kind of stream, keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.plans import offsets_ended
from arroyo.engine.runner import PipelineRunner
from tests.sql.harness import INPUTS, read_output

_EVENTS = (
    'CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, amount DOUBLE, ts TIMESTAMP NOT NULL, '
    f"WATERMARK FOR ts) WITH (connector = 'filesystem', path = '{INPUTS}/events.json', "
    "format = 'json', type = 'source');\n"
)


def _run(spark: SparkSession, work: Path, sql: str) -> tuple[list[dict], list]:
    out = work / "out"
    script = (
        _EVENTS
        + f"CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', format = 'json', "
        "type = 'sink');\n" + sql
    )
    state = work / "state"
    program = spark_planner(spark, state_dir=state).plan(script)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=3)
    runner.start()
    assert runner.wait(timeout=300), "the run did not end by itself"
    (query,) = runner.queries
    return read_output(out), list(query.recentProgress)


@pytest.mark.spark
def test_a_stateless_query_over_files_runs_without_a_watermark_and_ends(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows, progress = _run(
        spark,
        tmp_path,
        "INSERT INTO out SELECT id, amount * 2 AS twice FROM events WHERE id % 2 = 0;",
    )
    expected = spark.read.json(str(INPUTS / "events.json")).where("id % 2 = 0")
    assert sorted((r["id"], r["twice"]) for r in rows) == sorted(
        (r["id"], r["amount"] * 2) for r in expected.collect()
    )
    assert len(progress) > 2, "small batches: the end is read from a later batch's offsets"
    assert not any((p.eventTime or {}).get("watermark") for p in progress)


@pytest.mark.spark
def test_a_windowed_query_over_files_keeps_its_watermark(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows, progress = _run(
        spark,
        tmp_path,
        "INSERT INTO out SELECT count(*) AS n FROM events GROUP BY tumble(interval '1 hour');",
    )
    assert sum(r["n"] for r in rows) == spark.read.json(str(INPUTS / "events.json")).count()
    assert any((p.eventTime or {}).get("watermark") for p in progress)


def test_offsets_end_when_every_file_source_has_read_its_marker() -> None:
    ended = '{"file": 2, "pos": 0, "eoi": 1}'
    reading = '{"file": 1, "pos": 40, "eoi": 0}'
    assert offsets_ended([ended, ended])
    assert not offsets_ended([ended, reading])
    assert not offsets_ended([])
    assert not offsets_ended([None, "not json", "[1]"])
