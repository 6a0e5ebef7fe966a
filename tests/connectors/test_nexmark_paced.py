"""The paced ``nexmark`` source: each event readable at its event time, none read before it,
none skipped or read twice across a stop and resume (libs/arroyo/java/arroyo/nexmark)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark")

from arroyo.engine.catalog import spark_planner
from arroyo.engine.plans import offset_json
from arroyo.engine.runner import PipelineRunner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

RATE = 2000
SQL = (
    f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{RATE}');\n"
    "CREATE TABLE sink WITH (connector = 'blackhole');\n"
    "INSERT INTO sink SELECT bid.auction, bid.price FROM nexmark WHERE bid IS NOT NULL;"
)


def _offset(text: str | None) -> int:
    parsed = json.loads(offset_json(text) or "null")
    return int(parsed["n"]) if parsed else 0


def _run(spark: SparkSession, tmp: Path, seconds: float) -> list[Any]:
    program = spark_planner(spark, parallelism=2, state_dir=tmp).plan(SQL)
    runner = PipelineRunner(spark, program, tmp / "state")
    runner.start()
    (query,) = runner.queries
    deadline = time.monotonic() + seconds
    batches: dict[int, Any] = {}
    while time.monotonic() < deadline or len(batches) < 3:
        assert query.isActive, query.exception()
        batches.update((p.batchId, p) for p in query.recentProgress)
        query.awaitTermination(0.5)  # returns at once if the query fails
    runner.stop()
    runner.wait(60)
    batches.update((p.batchId, p) for p in query.recentProgress)
    return [batches[k] for k in sorted(batches)]


@pytest.mark.slow
def test_events_are_read_at_their_event_time_and_resume_exactly(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = _run(spark, tmp_path, 6)
    start_ms = json.loads((tmp_path / "state/tables/nexmark/start_time.json").read_text())
    start_ms = int(start_ms["start_time_ms"])
    read_until = 0
    for p in first:
        begin, end = _offset(p.sources[0].startOffset), _offset(p.sources[0].endOffset)
        assert begin == read_until, "a batch skipped or re-read events"
        assert p.numInputRows == end - begin
        # No event was read before its event time (start + n / rate): the batch, begun at its
        # timestamp, asked for the readable events before it ended.
        began_ms = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp() * 1000
        last_event_ms = start_ms + (end - 1) * 1000 / RATE
        assert end == begin or last_event_ms <= began_ms + p.durationMs["triggerExecution"]
        read_until = end
    assert read_until >= RATE, "less than a second of events in six seconds"

    resumed = _run(spark, tmp_path, 3)
    assert _offset(resumed[0].sources[0].startOffset) == read_until
    assert sum(p.numInputRows for p in resumed) > 0
