"""Running pipelines in the connector tests: started, their JSON-lines output read, and stopped
the way a pipeline's process ending would stop them."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from tests.waiting import wait_until


def start(spark: SparkSession, sql: str, state: Path, parallelism: int = 1) -> PipelineRunner:
    program = spark_planner(spark, parallelism=parallelism, state_dir=state).plan(sql)
    runner = PipelineRunner(spark, program, state)
    runner.start()
    return runner


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, none if it is not there yet."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stop(runner: PipelineRunner, spooled: Path | None = None) -> None:
    """Stops ``runner``; ``spooled``: the state of a spooled source table, whose reader (in a
    Python worker this test session's Spark keeps) then lets go of its spool, as it does when
    a pipeline's process ends, before another run of the pipeline starts."""
    runner.stop()
    runner.wait(timeout=60)
    if spooled is not None:
        wait_until("the reader to let go of its spool", lambda: _released(spooled), timeout=120)


def _released(table_state: Path) -> bool:
    lock = table_state / "spool" / ".lock"
    if not lock.exists():
        return True
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True
