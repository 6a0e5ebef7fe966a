"""Warming a fresh SparkSession so that the first real pipeline starts fast.

A new JVM plans and runs its first streaming query several times slower than later ones (class
loading, code generation, the JIT). A process that will serve a pipeline soon (the compiler, a
node's warm worker) runs this once at start-up, off the clock.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

# Source, projection, a windowed aggregate and a sink: the common paths of a first pipeline.
WARM_UP_QUERY = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', message_count = '100',
                           event_time_interval = '10 milliseconds');
CREATE TABLE warm_out WITH (connector = 'blackhole', type = 'sink');
INSERT INTO warm_out SELECT tumble(interval '1 second') AS window, counter % 3 AS k, count(*) AS n
FROM impulse WHERE counter >= 0 GROUP BY window, counter % 3;
"""

# What ``arroyo.engine.cds`` runs to learn which classes a pipeline loads: the sample, and the
# other common first pipelines (a bare SELECT printed by the driver, an updating aggregate).
TRAINING_QUERIES = (
    WARM_UP_QUERY,
    """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', message_count = '200',
                           event_time_interval = '1 second');
SELECT tumble(interval '1 minute') AS window, count(*) AS events, sum(counter) AS total
FROM impulse GROUP BY window;
""",
    """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', message_count = '100');
CREATE TABLE changes WITH (connector = 'blackhole', type = 'sink');
INSERT INTO changes SELECT counter % 7 AS k, count(*) AS n, max(timestamp) AS last
FROM impulse GROUP BY counter % 7;
""",
)


def plan_sample(spark: SparkSession, sql: str = WARM_UP_QUERY) -> bool:
    """Plan the sample query (what a compiler does for each request).

    Best effort, like ``run_sample``: warming is an optimisation, so a failure is logged and the
    service starts anyway (a real request that fails the same way gets its error reported to
    the user, which a service that exited at start-up could not do). Returns whether it warmed.
    """
    from arroyo.engine.catalog import spark_planner

    try:
        with tempfile.TemporaryDirectory(prefix="arroyo-warmup-") as tmp:
            spark_planner(spark, state_dir=Path(tmp)).plan(sql)
    except Exception:
        log.exception("spark_warm_up_failed", step="plan")
        return False
    return True


def run_sample(spark: SparkSession, sql: str = WARM_UP_QUERY) -> bool:
    """Plan and run the sample to its end (what a worker does for each job); best effort."""
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.runner import PipelineRunner

    try:
        with tempfile.TemporaryDirectory(prefix="arroyo-warmup-") as tmp:
            program = spark_planner(spark, state_dir=Path(tmp)).plan(sql)
            runner = PipelineRunner(spark, program, Path(tmp) / "state")
            runner.start()
            runner.wait(timeout=120)
    except Exception:
        log.exception("spark_warm_up_failed", step="run")
        return False
    log.info("spark_warmed_up")
    return True


def train_class_archive(target: Path) -> None:
    """Start a session that dumps its classes to ``target`` at exit, run the sample, and wait
    for the JVM to exit (the dump is written then)."""
    from arroyo.connectors.stdout.sink import route_stdout
    from arroyo.engine.cds import TRAINING_TIMEOUT_S
    from arroyo.engine.session import SessionSettings, get_or_create_session

    spark = get_or_create_session(SessionSettings(class_archive=target))
    route_stdout(lambda sink, rows: None)
    for sql in TRAINING_QUERIES:
        if not run_sample(spark, sql):
            raise SystemExit("the sample pipeline failed: no class archive made")
    gateway = spark.sparkContext._gateway
    spark.stop()
    assert gateway is not None
    process = gateway.proc
    # The JVM exits when its standard input closes (pyspark's gateway), and dumps then.
    gateway.shutdown()
    process.stdin.close()
    try:
        process.wait(timeout=TRAINING_TIMEOUT_S / 2)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit("the JVM did not exit: no class archive made") from None


if __name__ == "__main__":
    # ``python -m arroyo.engine.warmup --class-archive PATH``: the training run of
    # ``arroyo.engine.cds.build``.
    if len(sys.argv) != 3 or sys.argv[1] != "--class-archive":
        raise SystemExit("usage: python -m arroyo.engine.warmup --class-archive PATH")
    train_class_archive(Path(sys.argv[2]))
