"""Nexmark: our engine beside hand-written PySpark and Flink SQL, query by query, same events.

    .venv/bin/python bench/nexmark.py --queries q1,q5 --events 40000000 --peers spark,flink \\
        --json nexmark.json

Every (query, engine) runs in a process of its own, one after the other, so CPU time and peak
memory are the run's own and no run warms the JVM for the next:

- ``arroyo``: ``bench/nexmark/queries/qN.sql`` planned by our planner and run by our runner
  over the ``nexmark`` connector (the generator in Spark's JVM), into a blackhole;
- ``spark``: the same query written by hand in PySpark (bench/nexmark_spark.py) over the same
  generator, into Spark's ``noop`` sink;
- ``flink``: Flink SQL through PyFlink (bench/nexmark_flink.py), local mini-cluster, same
  parallelism, reading the same events from Parquet (bench/nexmark_events.py writes them once,
  cached under ~/.cache/arroyo/nexmark), in two configurations (``FLINK_CONFIGS``): the
  nexmark-flink project's (``flink``: RocksDB state, mini-batches) and Flink's defaults for a
  small machine (``flink-heap``: state on the heap, run with mini-batches off and on, the
  faster shown). The ratio column is ours / the faster Flink.

Figures per run: ``events_per_s``, the steady state (Spark engines: events over the time spent
in micro-batches after the first two, which pay for code generation and JIT; Flink: events over
the job's net runtime); ``events_per_s_with_startup``, events over the whole process's life
(JVM, session, planning); ``events_per_s_per_core`` (steady / parallelism); ``cpu_s_per_m``,
CPU seconds of the process and its JVM per million events; ``peak_rss_mb``. Both Spark engines
read fixed batches of ``--batch-rows`` event numbers (``rate-micro-batch``), so they do the same
work per batch whatever their speed, and stop once ``--events`` have been read.

``--input files`` has our engine read the events Flink reads: the Parquet files
bench/nexmark_events.py writes, through the ``filesystem`` connector (the same columns as the
``nexmark`` table, the event time ``date_time``), in batches of ``--batch-rows`` rows; the
queries run unchanged. ``--input bids`` is the same with files of ``--events`` bids alone
(Flink reads them too), for the queries of bids. The default, ``--input generator``, is the
generator in the JVM.

``--latency`` measures latency instead: see bench/nexmark_latency.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
QUERIES = BENCH / "nexmark" / "queries"
CACHE = Path.home() / ".cache" / "arroyo" / "nexmark"
WARMUP_BATCHES = 2
ENGINES = ("arroyo", "spark", "flink")
# Flink's configurations, as bench/nexmark_flink.py settings over its own (nexmark-flink's:
# RocksDB with 1 GB of managed memory, 2 s / 50 K-row mini-batches). Heap state is Flink's
# default and the faster one for state that fits in memory, as Nexmark's does here; whether
# mini-batches pay depends on the query, so both are run and the faster kept.
FLINK_CONFIGS: dict[str, list[list[str]]] = {
    "flink": [[]],
    "flink-heap": [
        ["--set", "state.backend.type=hashmap", "--set", "table.exec.mini-batch.enabled=false"],
        ["--set", "state.backend.type=hashmap"],
    ],
}


# q13's static table (bench/nexmark_side_input.py), declared for the queries that read it.
_SIDE_INPUT = (
    "CREATE TABLE side_input (key BIGINT, value TEXT) WITH (connector = 'single_file', "
    "path = '{path}', format = 'json', type = 'lookup');\n"
)


def runnable_queries() -> list[str]:
    """The queries our engine runs (those it cannot say ``NOT YET:`` and why)."""
    names = sorted((p.stem for p in QUERIES.glob("q*.sql")), key=lambda q: int(q[1:]))
    return [q for q in names if "NOT YET:" not in (QUERIES / f"{q}.sql").read_text()]


# --- one run, in a child process -------------------------------------------------------------


def _jvm_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and peak resident MiB of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    peak_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak_kb = int(line.split()[1])
    return cpu, peak_kb / 1024


def _own_usage() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, me.ru_maxrss / 1024


def _queries(engine: str, args: argparse.Namespace, spark: Any, tmp: Path) -> list[Any]:
    """Starts the query on ``engine`` and returns its Spark streaming queries."""
    if engine == "arroyo":
        from nexmark_side_input import side_input_file

        from arroyo.engine.catalog import spark_planner
        from arroyo.engine.runner import PipelineRunner

        query = (QUERIES / f"{args.query}.sql").read_text()
        sql = (
            _files_table(args.parquet)
            if args.parquet
            else f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{args.rate}');\n"
        )
        sql += (
            "CREATE TABLE sink WITH (connector = 'blackhole');\n"
            + (_SIDE_INPUT.format(path=side_input_file()) if "side_input" in query else "")
            + query
        )
        program = spark_planner(spark, parallelism=args.parallelism, state_dir=tmp).plan(sql)
        runner = PipelineRunner(
            spark, program, tmp / "state", max_records_per_batch=args.batch_rows
        )
        runner.start()
        return runner.queries

    from nexmark_spark import QUERIES as BY_HAND
    from pyspark.sql import functions as F

    from arroyo.connectors.runtime.nexmark_generator import nexmark_stream

    events = nexmark_stream(
        spark,
        event_rate=args.rate,
        start_ms=int(time.time() * 1000),
        partitions=args.parallelism,
        rows_per_batch=args.batch_rows,
    ).select("person", "auction", "bid", F.col("_source_time").alias("_timestamp"))
    df, mode = BY_HAND[args.query](events.withWatermark("_timestamp", "1 second"))
    return [
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    ]


def _files_table(parquet: str) -> str:
    """The ``nexmark`` table over bench/nexmark_events.py's Parquet files."""
    from arroyo.connectors.nexmark import AUCTION, BID, PERSON

    return (
        f"CREATE TABLE nexmark (person {PERSON}, auction {AUCTION}, bid {BID}, "
        "date_time TIMESTAMP NOT NULL, WATERMARK FOR date_time) WITH (connector = "
        f"'filesystem', path = '{parquet}/events', format = 'parquet', type = 'source');\n"
    )


_FILE_ROWS: list[int] = []  # rows before each file of --parquet, in the source's order


def _file_row(offset: dict[str, int] | None) -> int:
    """The events before a file source's offset, from its files' row counts (their footers)."""
    if not offset:
        return 0
    before = _FILE_ROWS[min(offset["file"], len(_FILE_ROWS) - 1)]
    return before + (offset["pos"] if offset["file"] < len(_FILE_ROWS) - 1 else 0)


def _count_file_rows(spark: Any, parquet: str) -> None:
    import pyarrow.parquet as pq

    from arroyo.connectors.runtime.file_tables import list_files

    files = list_files(spark, str(Path(parquet) / "events"))  # as the file source lists them
    _FILE_ROWS[:] = [0]
    for f in files:
        _FILE_ROWS.append(_FILE_ROWS[-1] + pq.ParquetFile(f).metadata.num_rows)


def _offset(offset: dict[str, int] | None) -> int:
    """An offset of the nexmark source (``n``, the next event) or Spark's rate source."""
    return int((offset or {}).get("n", (offset or {}).get("offset", 0)))


def _events(progress: Any) -> int:
    """Events a batch read, from its source offsets: a query that reads the events twice (q7's
    and q8's two aggregates) counts each row once per read in ``numInputRows``."""
    from arroyo.engine.plans import offset_json

    read = 0
    for source in progress.sources:
        start = json.loads(offset_json(source.startOffset) or "null")
        end = json.loads(offset_json(source.endOffset) or "null")
        if "file" in (end or {}):
            # The file source (Parquet): offsets are a file and a row in it. (Not numInputRows:
            # a query that reads the table twice counts each row twice there.)
            read = max(read, _file_row(end) - _file_row(start))
            continue
        read = max(read, _offset(end) - _offset(start))
    return read


def _by_hand() -> set[str]:
    """The queries bench/nexmark_spark.py writes by hand (read from its text: importing it
    needs a SparkSession, which this parent process does not start)."""
    import re

    return set(re.findall(r"^def (q\d+)\(", (BENCH / "nexmark_spark.py").read_text(), re.M))


def _drained_s(started: list[Any], stages: list[Path], steady_start: str) -> float:
    """A pipeline of several queries handing rows on through stages (q4, q9): the source's
    events are processed once the last query has read every stage dry. Stop the queries that
    read the events, wait until no query has had rows for a while, and return the seconds
    from the first steady batch's start to the end of the last batch that had rows (wall
    clock: the queries run side by side, so their busy times do not add up)."""
    from datetime import datetime

    def at(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    for q in started:
        if any(_events(p) for p in q.recentProgress):
            q.stop()
    end, changed = 0.0, time.monotonic()
    deadline = time.monotonic() + 900
    while True:
        if time.monotonic() > deadline:
            raise SystemExit("the stages were not read dry within 15 minutes")
        failed = [q for q in started if not q.isActive and q.exception()]
        if failed:
            raise SystemExit(f"failed while draining the stages: {failed[0].exception()}")
        last = max(
            (
                at(p.timestamp) + p.durationMs.get("triggerExecution", 0) / 1000
                for q in started
                for p in q.recentProgress
                if p.numInputRows
            ),
            default=0.0,
        )
        if last > end:
            end, changed = last, time.monotonic()
        # A reader removes a batch only when it starts its next one, so the last stays.
        pending = max(len(list(d.glob("batch-*"))) for d in stages)
        busy = any(q.isActive and q.status.get("isDataAvailable") for q in started)
        if time.monotonic() - changed > 5 and pending <= 1 and not busy:
            return end - at(steady_start)
        time.sleep(0.2)


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """Runs ``args.query`` on ``args.engine`` (arroyo or spark) until ``args.events`` events
    have been read, and returns its figures (the process's start-up is measured by the parent)."""
    from arroyo.engine.session import SessionSettings, get_or_create_session

    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    if args.parquet:
        _count_file_rows(spark, args.parquet)
    jvm_pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    # Spark's state store maintenance may still write a snapshot into a checkpoint after its
    # query stopped (CI once saw the removal race it: "Directory not empty"); the session is
    # stopped first, and what is left of this scratch space goes with the process anyway.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        started = _queries(args.engine, args, spark, Path(tmp))
        progress: dict[str, list[Any]] = {}
        while True:
            failed = [q for q in started if not q.isActive and q.exception()]
            if failed:
                raise SystemExit(f"{args.engine} {args.query} failed: {failed[0].exception()}")
            for q in started:
                seen = progress.setdefault(str(q.id), [])
                seen.extend(p for p in q.recentProgress if p.batchId > len(seen) - 1)
            read = max(sum(map(_events, seen)) for seen in progress.values())
            if read >= args.events:
                break
            time.sleep(0.2)
        # Steady state: the batches after the warm-up ones, of the query that read the most.
        batches = max(progress.values(), key=lambda ps: sum(map(_events, ps)))
        steady = batches[WARMUP_BATCHES:]
        rows = sum(map(_events, steady))
        busy_s = sum(p.durationMs.get("triggerExecution", 0) for p in steady) / 1000
        stages = list(Path(tmp).glob("state/tables/__stage*/data"))
        if stages and steady:
            busy_s = _drained_s(started, stages, steady[0].timestamp)
        for q in started:
            q.stop()
        jvm_cpu, jvm_peak = _jvm_usage(jvm_pid)
        own_cpu, own_peak = _own_usage()
        spark.stop()
    return {
        "events": args.events,
        "batches": len(batches),
        "events_per_s": rows / busy_s if busy_s else 0.0,
        "cpu_s": jvm_cpu + own_cpu,
        "peak_rss_mb": jvm_peak + own_peak,
    }


# --- the harness -----------------------------------------------------------------------------


def _child(
    engine: str, query: str, args: argparse.Namespace, parquet: Path | None, variant: int = 0
) -> list[str]:
    if engine in FLINK_CONFIGS:
        from nexmark_flink import flink_python

        assert parquet is not None
        return [
            str(flink_python()),
            str(BENCH / "nexmark_flink.py"),
            "--parquet", str(parquet),
            "--query", query,
            "--parallelism", str(args.parallelism),
            *FLINK_CONFIGS[engine][variant],
        ]  # fmt: skip
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run-one", engine,
        "--queries", query,
        "--events", str(args.events),
        "--batch-rows", str(args.batch_rows),
        "--rate", str(args.rate),
        "--parallelism", str(args.parallelism),
        *(["--parquet", str(parquet)] if engine == "arroyo" and args.input != "generator" else []),
    ]  # fmt: skip


def measure(engine: str, query: str, args: argparse.Namespace, parquet: Path | None) -> dict:
    """One run of ``engine``; of a Flink configuration with several variants, the faster."""
    variants = len(FLINK_CONFIGS.get(engine, [[]]))
    runs = [_measure_one(engine, query, args, parquet, v) for v in range(variants)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    best = max(ok, key=lambda r: r["events_per_s"])
    if variants > 1:
        best["variant"] = " ".join(FLINK_CONFIGS[engine][runs.index(best)][1::2])
    return best


def _measure_one(
    engine: str, query: str, args: argparse.Namespace, parquet: Path | None, variant: int
) -> dict:
    began = time.monotonic()
    child = _child(engine, query, args, parquet, variant)
    done = subprocess.run(child, capture_output=True, check=False)
    wall = time.monotonic() - began
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
        return {"error": " | ".join(tail)}
    figures: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    events = figures["events"]
    figures.update(
        wall_s=wall,
        events_per_s_with_startup=events / wall,
        events_per_s_per_core=figures["events_per_s"] / args.parallelism,
        cpu_s_per_m=figures["cpu_s"] / events * 1e6,
    )
    return figures


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median steady throughput (the lower middle one of an even number),
    with every run's throughput under ``runs_events_per_s``; a failed run is reported as is."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r["events_per_s"])
    middle = ordered[(len(ordered) - 1) // 2]
    return {**middle, "runs_events_per_s": [r["events_per_s"] for r in runs]}


def _row(query: str, engine: str, f: dict[str, Any], flink: dict[str, Any] | None) -> str:
    if "error" in f:
        return f"{query:<5} {engine:<10} failed: {f['error'][:150]}"
    ratio = ""
    if engine == "arroyo" and flink and flink.get("events_per_s"):  # the faster Flink
        ratio = f"{f['events_per_s'] / flink['events_per_s']:>8.2f}x"
    runs = f.get("runs_events_per_s", [])
    spread = f"  ({min(runs):,.0f}-{max(runs):,.0f})" if len(runs) > 1 else ""
    return (
        f"{query:<5} {engine:<10} {f['events_per_s']:>12,.0f} {f['events_per_s_per_core']:>12,.0f}"
        f" {f['events_per_s_with_startup']:>12,.0f} {f['cpu_s_per_m']:>9.2f}"
        f" {f['peak_rss_mb']:>9,.0f} {ratio:>9}{spread}"
        + (f"  [{f['variant']}]" if f.get("variant") else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default=",".join(runnable_queries()))
    parser.add_argument("--events", type=int, default=40_000_000)
    parser.add_argument(
        "--batch-rows", type=int, default=0, help="default: 1,000,000, or events / 10 if fewer"
    )
    parser.add_argument("--rate", type=int, default=1_000_000, help="event-time events/s")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--peers", default="spark,flink", help="of: spark, flink, none")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per engine, interleaved; the median is shown"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--latency", action="store_true", help="latency mode")
    parser.add_argument("--rates", default="10000,100000", help="latency mode: events/s")
    parser.add_argument("--seconds", type=int, default=60, help="latency mode: per run")
    parser.add_argument("--warmup", type=int, default=15, help="latency mode: not counted")
    parser.add_argument("--trigger-ms", type=int, default=0, help="latency mode")
    parser.add_argument(
        "--real-time",
        type=int,
        default=60,
        metavar="SECONDS",
        help="latency mode: also the stateless query in Spark's real-time mode into Kafka, "
        "checkpointing every SECONDS (0: not run)",
    )
    parser.add_argument(
        "--input",
        choices=("generator", "files", "bids"),
        default="generator",
        help="what our engine reads: the generator in the JVM, or Flink's Parquet files (of "
        "the whole mix, or of --events bids alone)",
    )
    parser.add_argument("--run-one", choices=("arroyo", "spark"), help=argparse.SUPPRESS)
    parser.add_argument("--parquet", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # 1 M-event micro-batches, as the earlier tables ran: a stateful query's batch has a fixed
    # cost (q5's about 0.5 s: bench/README.md), which smaller ones pay more often.
    args.batch_rows = args.batch_rows or max(1, min(1_000_000, args.events // 10))
    if args.latency:
        from nexmark_latency import main as latency

        latency(args)
        return
    if args.run_one:
        args.engine, args.query = args.run_one, args.queries
        print(json.dumps(run_one(args)))
        return

    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    unknown = sorted(set(queries) - set(runnable_queries()))
    if unknown:
        parser.error(f"not runnable here: {', '.join(unknown)} (see bench/nexmark/queries)")
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    if set(peers) - set(ENGINES[1:]):
        parser.error(f"--peers takes spark and flink, not {args.peers}")
    if args.input == "bids" and "spark" in peers:
        parser.error("--input bids: the PySpark-by-hand peer reads the generator's whole mix")
    parquet = None
    bids = args.input == "bids"
    if "flink" in peers or args.input != "generator":
        from nexmark_events import write_parquet

        from arroyo.engine.session import SessionSettings, get_or_create_session

        parquet = CACHE / f"{args.events}-{args.rate}{'-bids' if bids else ''}"
        print(f"writing {args.events:,} events to {parquet} (once)", file=sys.stderr)
        spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
        write_parquet(spark, parquet, args.events, args.rate, args.parallelism, bids_only=bids)
        spark.stop()

    cores = os.cpu_count()
    ours_read = {"files": "Parquet files", "bids": "Parquet files of bids alone"}.get(
        args.input, "the generator"
    )
    print(
        f"Nexmark, {args.events:,} {'bids' if bids else 'events'} ({ours_read} for ours), "
        f"parallelism {args.parallelism}, {cores} cores; "
        "events/s steady, per core, with start-up; CPU s per M events; peak RSS MiB; "
        "ours / Flink" + (f"; median of {args.repeat} runs (range)" if args.repeat > 1 else "")
    )
    results: dict[str, dict[str, Any]] = {}
    for query in queries:
        # Interleaved (ours, peers, ours, peers, ...): a slow spell of the machine falls on
        # every engine alike rather than on one engine's runs.
        # q4 and q9 have no form by hand: Spark cannot run them as one query (see README).
        engines = [e for e in ["arroyo", *peers] if e != "spark" or query in _by_hand()]
        if "flink" in engines:
            engines += [e for e in FLINK_CONFIGS if e != "flink"]
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        for _ in range(max(1, args.repeat)):
            for engine, done in runs.items():
                done.append(measure(engine, query, args, parquet))
        results[query] = {engine: median_run(done) for engine, done in runs.items()}
        flinks = [f for e, f in results[query].items() if e in FLINK_CONFIGS and "error" not in f]
        fastest = max(flinks, key=lambda f: f["events_per_s"], default=None)
        for engine, figures in results[query].items():
            print(_row(query, engine, figures, fastest), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
