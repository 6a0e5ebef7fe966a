"""Cold start: the README's first query from a fresh process to its exit, ours and by hand.

    .venv/bin/python bench/cold_start.py [--repeat 3] [--timings]

Each figure is the median wall-clock time of ``--repeat`` fresh processes, run one after the
other (never side by side):

- ``arroyo run examples/first.sql`` (600 impulse events, counted per minute of event time);
- ``arroyo validate`` of the same file (plans it; runs nothing);
- the same query written by hand in PySpark, in a fresh Python process: start a session, run
  it, print the same ten rows, exit. Two ways a PySpark user would write it:
  - streaming, as our pipeline runs: a generated stream, a watermark, a one-minute window,
    rows printed per micro-batch, and an end-of-input row whose event time passes every
    window (Spark alone never closes the last windows of a stream that ends);
  - batch: the 600 rows as a DataFrame, grouped by the window, collected and printed.
  Both start Spark as a careful user would for a small job: ``local[2]``, no web UI, one
  shuffle partition, UTC. They get none of our start-up work (no class archive): that is
  the point of the comparison.

The ratio is ours / the streaming peer (the same engine doing the same streaming work); the
batch peer is printed beside it as the floor of any Spark job. Every process's output is
checked to count the same 600 events with the same sum of counters, so no one wins by doing
less. ``--timings`` also prints
``arroyo run --timings``' breakdown of one more run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERY = ROOT / "examples" / "first.sql"
ARROYO = [sys.executable, "-m", "arroyo_cli.main"]
EVENTS = 600

# The hand-written peers run as ``python -c``: a fresh interpreter, as a user's script would.
_SESSION = """
import json, sys, time
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").appName("by-hand")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
start_s = int(time.time())
def show(rows):
    for r in rows:
        w = r["window"]
        print(json.dumps({"window": {"start": w.start.isoformat(), "end": w.end.isoformat()},
                          "events": r["events"], "total": r["total"]}), flush=True)
"""
STREAMING_PEER = (
    _SESSION
    + f"""
end = 253402214400  # 9999-12-31: the end-of-input row's event time
events = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", {EVENTS + 1})
          .option("numPartitions", 1).load()
          .select(F.col("value").alias("counter"))
          .withColumn("ts", F.when(F.col("counter") >= {EVENTS}, F.lit(end))
                      .otherwise(F.lit(start_s) + F.col("counter")).cast("timestamp"))
          .withWatermark("ts", "1 second")
          # On the event time: Spark would push a filter on the counter below the watermark.
          .filter(F.col("ts") < F.lit(end).cast("timestamp")))
counts = events.groupBy(F.window("ts", "1 minute")).agg(
    F.count("*").alias("events"), F.sum("counter").alias("total"))
query = (counts.writeStream.outputMode("append")
         .foreachBatch(lambda df, batch_id: show(df.collect())).start())
# The batch that runs with the watermark at the end-of-input row's time emits every window.
while not query.awaitTermination(0.05):
    progress = query.lastProgress
    if progress and progress.eventTime.get("watermark", "").startswith("9999"):
        query.stop()
"""
)
BATCH_PEER = (
    _SESSION
    + f"""
events = spark.range({EVENTS}).select(
    F.col("id").alias("counter"), (F.lit(start_s) + F.col("id")).cast("timestamp").alias("ts"))
counts = events.groupBy(F.window("ts", "1 minute")).agg(
    F.count("*").alias("events"), F.sum("counter").alias("total"))
show(counts.collect())
"""
)


def timed(command: list[str]) -> tuple[float, str]:
    """Wall-clock seconds of one fresh process, and its standard output."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed:\n{done.stderr[-3000:]}")
    return elapsed, done.stdout


def windows(output: str) -> list[tuple[int, int]]:
    """The (events, total) of each window printed, in order of window start."""
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    rows.sort(key=lambda r: r["window"]["start"])
    return [(int(r["events"]), int(r["total"])) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timings", action="store_true")
    args = parser.parse_args()
    contenders = {
        "arroyo run": [*ARROYO, "run", str(QUERY)],
        "arroyo validate": [*ARROYO, "validate", str(QUERY)],
        "PySpark by hand, streaming": [sys.executable, "-c", STREAMING_PEER],
        "PySpark by hand, batch": [sys.executable, "-c", BATCH_PEER],
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    # Round-robin, so a change in the machine's load touches every contender alike.
    for _ in range(args.repeat):
        for name, command in contenders.items():
            seconds, output = timed(command)
            times[name].append(seconds)
            if name != "arroyo validate":
                got = windows(output)
                # Event time starts at each run's own clock: the split into minutes varies by
                # a window, the events and their sum do not.
                if sum(n for n, _ in got) != EVENTS or sum(t for _, t in got) != sum(range(EVENTS)):
                    raise SystemExit(f"{name} printed other windows: {got}")
    median = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"cold start, median of {args.repeat} fresh processes (seconds), {QUERY.name}:")
    for name, ts in times.items():
        runs = ", ".join(f"{t:.2f}" for t in ts)
        print(f"  {name:<28} {median[name]:6.2f}   runs {runs}")
    ratio = median["arroyo run"] / median["PySpark by hand, streaming"]
    floor = median["arroyo run"] / median["PySpark by hand, batch"]
    print(f"  ours / by hand, streaming    {ratio:6.2f}")
    print(f"  ours / by hand, batch        {floor:6.2f}")
    if args.timings:
        done = subprocess.run(
            [*ARROYO, "run", "--timings", str(QUERY)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        print(done.stderr[done.stderr.find("timings") :].rstrip())


if __name__ == "__main__":
    main()
