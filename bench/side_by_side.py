"""Arroyo against the same query written by hand in PySpark, in one JVM (shared by the benches).

Each side runs twice, interleaved (ours, theirs, theirs, ours), each run on fresh state. Both
sides read fixed-size batches of event numbers (Spark's ``rate-micro-batch`` source, which is
what Arroyo's generated sources use when batches are capped), so they do the same work per batch
whatever the speed. Throughput is rows in / time spent in micro-batches, over the batches after
the warm-up ones.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from arroyo.connectors.runtime.nexmark_generator import nexmark_stream
from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.program.spec import PipelineProgram
from arroyo.udfs import UdfLibrary

ByHand = Callable[[SparkSession, str, argparse.Namespace], DataFrame]


def hand_bids(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """Nexmark bids from the same generator Arroyo uses, with event time and a watermark (as
    every Arroyo table has)."""
    nexmark = nexmark_stream(
        spark,
        event_rate=args.rate,
        start_ms=int(time.time() * 1000),
        partitions=args.parallelism,
        rows_per_batch=args.batch_rows,
    ).select("person", "auction", "bid", F.col("_source_time").alias("_timestamp"))
    return nexmark.withWatermark("_timestamp", "1 second").filter("bid IS NOT NULL")


@dataclass(frozen=True)
class Measured:
    """One side's figures: events/s over its time in micro-batches, and the mean time Spark
    spent planning each batch (the part of a batch that grows with the query's logical plan,
    not with its input)."""

    events_per_s: float
    planning_ms: float

    @staticmethod
    def mean(runs: list[Measured]) -> Measured:
        return Measured(
            sum(r.events_per_s for r in runs) / len(runs),
            sum(r.planning_ms for r in runs) / len(runs),
        )


def measure(
    queries: Callable[[], list[StreamingQuery]], batches: int, warmup_batches: int = 3
) -> Measured:
    started = queries()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and any(
        len(q.recentProgress) < warmup_batches + batches for q in started
    ):
        if any(q.exception() for q in started if not q.isActive):
            raise RuntimeError(f"query failed: {next(q.exception() for q in started)}")
        time.sleep(0.5)
    rows = 0
    busy_ms = 0
    planning_ms = 0
    for q in started:
        for p in q.recentProgress[warmup_batches : warmup_batches + batches]:
            rows += p.numInputRows
            busy_ms += p.durationMs.get("triggerExecution", 0)
            planning_ms += p.durationMs.get("queryPlanning", 0)
        q.stop()
    return Measured(rows / (busy_ms / 1000) if busy_ms else 0.0, planning_ms / batches)


def compare(
    ours: Callable[[], list[StreamingQuery]],
    theirs: Callable[[], list[StreamingQuery]],
    batches: int,
) -> dict[str, Measured]:
    """The mean of each side's two runs, interleaved so that a machine drifting weighs on both
    sides alike. Each side first runs once unmeasured: the first run of a query shape in a JVM
    pays for its code generation and JIT, which would otherwise fall on whichever side ran
    first (by 20% and more on this machine)."""
    for side in (ours, theirs):
        measure(side, 2)
    a1, b1, b2, a2 = (measure(q, batches) for q in (ours, theirs, theirs, ours))
    return {"arroyo": Measured.mean([a1, a2]), "pyspark": Measured.mean([b1, b2])}


def print_rows(name: str, width: int, results: dict[str, Measured], parallelism: int) -> None:
    """One row per side, then our overhead."""
    for engine, m in results.items():
        print(
            f"{name:<{width}} {engine:<8} {m.events_per_s:>12,.0f}"
            f" {m.events_per_s / parallelism:>12,.0f} {m.planning_ms:>12,.0f}"
        )
    ours, theirs = results["arroyo"].events_per_s, results["pyspark"].events_per_s
    overhead = 1 - ours / theirs if theirs else 0
    print(f"{name:<{width}} arroyo overhead vs hand-written PySpark: {overhead:+.1%}")


def header(width: int) -> str:
    return f"{'query':<{width}} {'engine':<8} {'events/s':>12} {'per core':>12} {'planning ms':>12}"


def _ours(
    spark: SparkSession, program: PipelineProgram, tmp: str, batch_rows: int
) -> list[StreamingQuery]:
    runner = PipelineRunner(
        spark, program, Path(tempfile.mkdtemp(dir=tmp)), max_records_per_batch=batch_rows
    )
    runner.start()
    return runner.queries


def _theirs(df: DataFrame, tmp: str, mode: str) -> list[StreamingQuery]:
    return [
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", tempfile.mkdtemp(dir=tmp))
        .trigger(processingTime="0 seconds")
        .start()
    ]


def run(
    queries: dict[str, str],
    by_hand: ByHand,
    *,
    batches: int,
    batch_rows: int,
    rate: int,
    update_mode: frozenset[str] = frozenset(),
    udfs: UdfLibrary | None = None,
) -> None:
    """Parse the command line, run every query both ways and print one row per side."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=batches)
    parser.add_argument("--batch-rows", type=int, default=batch_rows)
    parser.add_argument("--rate", type=int, default=rate, help="event time rate")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--queries", default=",".join(queries), help=f"comma-separated, of {', '.join(queries)}"
    )
    args = parser.parse_args()
    chosen = args.queries.split(",")
    if unknown := sorted(set(chosen) - set(queries)):
        parser.error(f"unknown queries: {', '.join(unknown)}")
    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    width = max(map(len, chosen))
    print(header(width))
    for name in chosen:
        select = queries[name]
        with tempfile.TemporaryDirectory() as tmp:
            sql = (
                f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{args.rate}');\n"
                f"CREATE TABLE sink WITH (connector = 'blackhole');\n"
                f"INSERT INTO sink {select};"
            )
            planner = spark_planner(
                spark, parallelism=args.parallelism, state_dir=Path(tmp), udfs=udfs
            )
            program = planner.plan(sql)
            mode = "update" if name in update_mode else "append"

            ours = partial(_ours, spark, program, tmp, args.batch_rows)
            theirs = partial(_theirs, by_hand(spark, name, args), tmp, mode)
            results = compare(ours, theirs, args.batches)
        print_rows(name, width, results, args.parallelism)
