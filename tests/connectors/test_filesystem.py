"""The filesystem sink under a stateful query: a batch it placed but Spark did not record as
committed is replayed, runs to its end (its aggregate's state must commit) and is not placed
twice, as a plain listing of the directory sees it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from tests.connectors.checkpoints import committed_batches, forget_commit, query_checkpoint

_SQL = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000',
    message_count = '60', event_time_interval = '1 second');
CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT tumble(interval '5 seconds') AS window, count(*) AS n
FROM src GROUP BY window;
"""


def _listed(root: Path) -> list[dict[str, object]]:
    rows = []
    for f in sorted(root.iterdir()):
        if f.is_file() and not f.name.startswith((".", "_")):
            rows.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return rows


@pytest.mark.spark
def test_a_placed_batch_replayed_by_a_stateful_query_is_not_placed_twice(
    spark: SparkSession, tmp_path: Path
) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    sql = _SQL.format(out=out)
    first = PipelineRunner(
        spark,
        spark_planner(spark, state_dir=state).plan(sql),
        state,
        max_records_per_batch=10,
        stop_after_batches=3,
    )
    first.start()
    assert not first.wait(timeout=300), "the first run finished before its stop"
    checkpoint = query_checkpoint(state)
    last = committed_batches(checkpoint)[-1]
    # A crash after the sink placed the batch and before Spark recorded its commit.
    forget_commit(checkpoint, last)
    second = PipelineRunner(
        spark, spark_planner(spark, state_dir=state).plan(sql), state, max_records_per_batch=10
    )
    second.start()
    assert second.wait(timeout=300), "the resumed run did not finish"
    assert (checkpoint / "commits" / str(last)).exists(), "the batch was not run again"
    rows = _listed(out)
    windows = Counter(json.dumps(r["window"]) for r in rows)
    assert all(n == 1 for n in windows.values()), windows
    # Sixty events a second apart, in five-second windows (twelve, or thirteen when the first
    # event is not at a window's start).
    assert len(windows) in (12, 13), rows
    assert sum(int(str(r["n"])) for r in rows) == 60, rows
