"""A graceful stop waits for the batch in flight, the batch Spark runs without new input
included: when a watermark moves, that batch emits the windows that closed, and stopping it
midway would replay it into an at-least-once sink (their rows written twice)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arroyo.engine.runner import _batch_in_flight
from tests.waiting import wait_until


def test_a_batch_without_new_input_that_closes_windows_is_in_flight(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "0.json").write_text(
        "\n".join(json.dumps({"t": f"2024-01-01T00:00:{s:02d}"}) for s in (1, 2, 15))
    )
    windows = (
        spark.readStream.schema("t timestamp")
        .json(str(source))
        .withWatermark("t", "1 second")
        .groupBy(F.window("t", "10 seconds"))
        .count()
    )
    in_batch = threading.Event()
    release = threading.Event()
    emitted: list[tuple[int, int]] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        rows = batch.collect()
        emitted.extend((batch_id, r["count"]) for r in rows)
        if rows:  # the first window closed: this is the batch that had no new input
            in_batch.set()
            release.wait(60)

    query = (
        windows.writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        assert in_batch.wait(120), "no window was emitted"
        status = query.status
        assert not status["isDataAvailable"], status  # no new input: Spark's own view
        assert _batch_in_flight(query), status
        release.set()
        wait_until(
            "the batch to commit",
            lambda: not _batch_in_flight(query),
            60,
            detail=lambda: str(query.status),
        )
    finally:
        release.set()
        query.stop()
    assert emitted == [(1, 2)]
