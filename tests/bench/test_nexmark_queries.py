"""Every Nexmark query in bench/nexmark/queries plans, except those marked NOT YET, which the
engine must refuse with a diagnostic (so the note in the file stays true)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import PlanningError

QUERIES = Path(__file__).parents[2] / "bench" / "nexmark" / "queries"
TABLES = (
    "CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000');\n"
    "CREATE TABLE sink WITH (connector = 'blackhole');\n"
)


def _cases() -> list[str]:
    return sorted((p.stem for p in QUERIES.glob("q*.sql")), key=lambda q: int(q[1:]))


def test_every_query_is_there() -> None:
    assert _cases() == [f"q{i}" for i in range(23)]


@pytest.mark.spark
@pytest.mark.parametrize("query", _cases())
def test_query_plans_or_is_refused_as_noted(
    spark: SparkSession, tmp_path: Path, query: str
) -> None:
    text = (QUERIES / f"{query}.sql").read_text()
    tables = TABLES
    if "side_input" in text:  # q13's static table, as bench/nexmark.py declares it
        side = tmp_path / "side_input.json"
        side.write_text('{"key": 1, "value": "side-input-1"}\n')
        tables += (
            "CREATE TABLE side_input (key BIGINT, value TEXT) WITH (connector = 'single_file', "
            f"path = '{side}', format = 'json', type = 'lookup');\n"
        )
    planner = spark_planner(spark, state_dir=tmp_path)
    if "NOT YET:" in text:
        with pytest.raises(PlanningError) as refused:
            planner.plan(tables + text)
        assert refused.value.diagnostics, "refused without a diagnostic"
    else:
        program = planner.plan(tables + text)
        # Besides the sink, the queries writing the stages of aggregates over joins (q9).
        assert [q.sink.name for q in program.queries if q.sink.connector != "__stage"] == ["sink"]
