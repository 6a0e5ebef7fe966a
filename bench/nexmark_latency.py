"""Latency on Nexmark at a fixed input rate: ``bench/nexmark.py --latency``.

    .venv/bin/python bench/nexmark.py --latency [--rates 10000,100000] [--seconds 60]
        [--trigger-ms 0] [--json FILE]

Two pipelines run through our planner and runner, each at each rate, into a blackhole:

- ``stateless``: Nexmark q1 (a projection of the bids);
- ``tumble``: bids counted per auction in 1-second tumbling windows.

The ``nexmark`` source at its rate makes event ``n`` readable at its event time (to the
millisecond: arroyo.connectors.runtime.nexmark_generator), so an event's end-to-end latency is the
time from its event time to the moment the micro-batch that carried it was committed (the sink
has written its rows by then): every event of every batch after the first ``--warmup`` seconds
counts.
For the windows, the delay is from the watermark passing a window's end (in wall-clock time,
when the event that moves it there becomes readable: the end plus the table's watermark delay)
to the commit of the batch that emitted the window's rows.

The micro-batch trigger is ``--trigger-ms`` (0: the next batch starts as soon as the last one
ends).

``--real-time SECONDS`` (default 60; 0 skips it) also runs the stateless query in Spark's
real-time mode (our runner's ``real_time_batch_ms``; the nexmark source implements Spark's
real-time reads): long-running tasks hand each event on as its event time comes, and offsets
are checkpointed every SECONDS. Its warm-up is its first batch (and at least ``--warmup``),
then ``--seconds`` are measured, checkpoints included. Its sink is Kafka (a broker started
here, from arroyo.testing.kafka), since real-time mode writes only to Kafka among real sinks;
the topic stamps each record with the broker's clock as it appends it (``LogAppendTime``), so
an event's latency is that stamp minus its event time: to the moment it is in the sink, every
record of the run after the warm-up. The tumble is not run so: a window that emits once when
it closes is a stateful append-mode query, which real-time mode (update mode only) cannot run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

QUERIES = {
    "stateless": "SELECT bid.auction, bid.bidder, 0.908 * bid.price AS price, bid.datetime, "
    "bid.extra FROM nexmark WHERE bid IS NOT NULL",
    "tumble": "SELECT tumble(interval '1 second') AS window, bid.auction AS auction, "
    "count(*) AS bids FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2",
}
WINDOW_MS = 1000


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def _run(query: str, rate: int, args: argparse.Namespace) -> tuple[list[Any], int, int]:
    """Runs ``query`` for ``args.seconds``; returns its batches' progress, the source's start
    (epoch ms: event ``n`` is readable from start + n * 1000 / rate) and the watermark delay."""
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.runner import PipelineRunner
    from arroyo.engine.session import SessionSettings, get_or_create_session

    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    with tempfile.TemporaryDirectory() as tmp:
        sql = (
            f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{rate}');\n"
            "CREATE TABLE sink WITH (connector = 'blackhole');\n"
            f"INSERT INTO sink {QUERIES[query]};"
        )
        program = spark_planner(spark, parallelism=args.parallelism, state_dir=Path(tmp)).plan(sql)
        state = Path(tmp) / "state"
        runner = PipelineRunner(spark, program, state, trigger_interval_ms=args.trigger_ms)
        runner.start()
        (q,) = runner.queries
        batches: dict[int, Any] = {}
        # The run's time counts from its first batch: starting (JVM, planning) is not measured.
        started = time.monotonic()
        while not q.recentProgress and q.isActive and time.monotonic() < started + 600:
            time.sleep(0.2)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if not q.isActive:
                raise SystemExit(f"{query} at {rate}/s failed: {q.exception()}")
            batches.update((p.batchId, p) for p in q.recentProgress)
            time.sleep(1)
        batches.update((p.batchId, p) for p in q.recentProgress)
        runner.stop()
        runner.wait(60)
        marker = state / "tables" / "nexmark" / "start_time.json"
        start_ms = int(json.loads(marker.read_text())["start_time_ms"])
    delay_ms = program.sources[0].watermark_delay_ms
    return [batches[k] for k in sorted(batches)], start_ms, delay_ms


def _run_real_time(rate: int, args: argparse.Namespace, broker: Any) -> np.ndarray:
    """The stateless query in real-time mode into a Kafka topic for ``args.seconds``; returns
    each record's latency (ms: broker append time minus event time) after the warm-up."""
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.runner import PipelineRunner
    from arroyo.engine.session import SessionSettings, get_or_create_session

    spark = get_or_create_session(SessionSettings(parallelism=args.parallelism))
    topic = f"latency-{rate}-{int(time.time())}"
    broker.create_topic(topic, args.parallelism, config={"message.timestamp.type": "LogAppendTime"})
    with tempfile.TemporaryDirectory() as tmp:
        sql = (
            f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{rate}');\n"
            f"CREATE TABLE sink WITH (connector = 'kafka', type = 'sink', format = 'json', "
            f"bootstrap_servers = '{broker.bootstrap_servers}', topic = '{topic}');\n"
            f"INSERT INTO sink {QUERIES['stateless']};"
        )
        program = spark_planner(spark, parallelism=args.parallelism, state_dir=Path(tmp)).plan(sql)
        runner = PipelineRunner(
            spark, program, Path(tmp) / "state", real_time_batch_ms=args.real_time * 1000
        )
        runner.start()
        (q,) = runner.queries
        # Warm-up: the first real-time batch, and at least --warmup seconds. Events wait while
        # the query starts, and the first batch works off that backlog; every later batch
        # boundary (a checkpoint) is measured.
        warm = time.monotonic() + args.warmup
        while not q.recentProgress or time.monotonic() < warm:
            if not q.isActive:
                raise SystemExit(f"real-time at {rate}/s failed: {q.exception()}")
            time.sleep(0.2)
        counted_from_ms = time.time() * 1000
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            if not q.isActive:
                raise SystemExit(f"real-time at {rate}/s failed: {q.exception()}")
            time.sleep(1)
        runner.stop()
        runner.wait(args.real_time + 60)
    return _append_latencies(broker, topic, counted_from_ms)


def _append_latencies(broker: Any, topic: str, counted_from_ms: float) -> np.ndarray:
    """Every record's append time minus the ``datetime`` it carries, for events from
    ``counted_from_ms`` on."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"latency-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        left = sum(ends.values())
        appended, events = [], []
        marker = b'"datetime":"'
        while left > 0:
            for message in consumer.consume(10_000, timeout=5):
                if message.error() is not None:
                    continue
                left -= 1
                value = message.value()
                at = value.index(marker) + len(marker)
                when = datetime.fromisoformat(value[at : value.index(b'"', at)].decode())
                events.append(when.replace(tzinfo=UTC).timestamp() * 1000)
                appended.append(message.timestamp()[1])
    finally:
        consumer.close()
    event_ms, append_ms = np.asarray(events), np.asarray(appended, dtype=np.float64)
    counted = event_ms >= counted_from_ms
    return append_ms[counted] - event_ms[counted]


def _committed_ms(p: Any) -> float:
    return _ms(p.timestamp) + p.durationMs.get("triggerExecution", 0)


def _offset(text: str | None) -> int:
    """A nexmark source offset; the first batch starts from none (event 0)."""
    from arroyo.engine.plans import offset_json

    parsed = json.loads(offset_json(text) or "null")
    return int(parsed["n"]) if parsed else 0


def event_latencies(batches: list[Any], start_ms: int, rate: int, after_ms: float) -> np.ndarray:
    """Every event's latency (ms) in the batches that started after ``after_ms``."""
    parts = []
    for p in batches:
        if _ms(p.timestamp) < after_ms or not p.numInputRows:
            continue
        first, last = _offset(p.sources[0].startOffset), _offset(p.sources[0].endOffset)
        event_ms = start_ms + np.arange(first, last, dtype=np.float64) * 1000 / rate
        parts.append(_committed_ms(p) - event_ms)
    return np.concatenate(parts) if parts else np.empty(0)


def window_delays(batches: list[Any], delay_ms: int, after_ms: float) -> np.ndarray:
    """For each window closed after ``after_ms``: its row's commit minus the time the watermark
    passed its end. A window ending at ``e`` is emitted by the first batch run with a watermark
    at or past ``e``; the watermark passed ``e`` when the event at ``e + delay`` was readable."""
    delays = []
    emitted_up_to = None
    for p in batches:
        watermark = (p.eventTime or {}).get("watermark")
        if not watermark:
            continue
        wm = _ms(watermark)
        if wm <= 0:
            # Spark's watermark before any event (the epoch): counting windows up from there
            # walked every window since 1970, minutes of CPU, before the real ones.
            continue
        if emitted_up_to is None:
            emitted_up_to = wm  # windows ending before the first watermark: not ours to time
            continue
        end = (emitted_up_to // WINDOW_MS + 1) * WINDOW_MS
        while end <= wm:
            if end + delay_ms >= after_ms:
                delays.append(_committed_ms(p) - (end + delay_ms))
            end += WINDOW_MS
        emitted_up_to = max(emitted_up_to, wm)
    return np.asarray(delays, dtype=np.float64)


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def main(args: argparse.Namespace) -> None:
    from arroyo.logging import configure_logging

    configure_logging("warning")  # the runner's per-batch events would bury the figures
    rates = [int(r) for r in args.rates.split(",")]
    results: dict[str, Any] = {}
    print(
        f"Latency, {args.seconds} s per run after {args.warmup} s warm-up, parallelism "
        f"{args.parallelism}, trigger {args.trigger_ms} ms (ms: p50, p99, max)"
    )
    for query in QUERIES:
        for rate in rates:
            batches, start_ms, delay_ms = _run(query, rate, args)
            after = _ms(batches[0].timestamp) + args.warmup * 1000 if batches else 0
            lat = event_latencies(batches, start_ms, rate, after)
            figures: dict[str, Any] = {
                "events_per_s": rate,
                "latency_p50_ms": _pct(lat, 50),
                "latency_p99_ms": _pct(lat, 99),
                "latency_max_ms": float(lat.max()) if lat.size else None,
                "batches": len(batches),
            }
            line = f"{query:<9} {rate:>8,}/s  end to end {_fmt(lat)}"
            if query == "tumble":
                windows = window_delays(batches, delay_ms, after)
                figures.update(
                    window_delay_p50_ms=_pct(windows, 50),
                    window_delay_p99_ms=_pct(windows, 99),
                    window_delay_max_ms=float(windows.max()) if windows.size else None,
                    windows=int(windows.size),
                )
                line += f"   window after watermark {_fmt(windows)}"
            print(line, flush=True)
            results[f"{query}@{rate}"] = figures
            if args.json:
                args.json.write_text(json.dumps({"latency": results}, indent=2))
    if args.real_time:
        from arroyo.testing.kafka import KafkaBroker

        with tempfile.TemporaryDirectory() as tmp, KafkaBroker.start(Path(tmp)) as broker:
            for rate in rates:
                lat = _run_real_time(rate, args, broker)
                results[f"stateless-real-time@{rate}"] = {
                    "events_per_s": rate,
                    "latency_p50_ms": _pct(lat, 50),
                    "latency_p99_ms": _pct(lat, 99),
                    "latency_max_ms": float(lat.max()) if lat.size else None,
                    "checkpoint_every_s": args.real_time,
                }
                print(f"{'real-time':<9} {rate:>8,}/s  end to end {_fmt(lat)}", flush=True)
                if args.json:
                    args.json.write_text(json.dumps({"latency": results}, indent=2))


def _fmt(values: np.ndarray) -> str:
    if not values.size:
        return "no data"
    p50, p99, top = np.percentile(values, 50), np.percentile(values, 99), values.max()
    return f"{p50:>7,.0f} {p99:>7,.0f} {top:>7,.0f}"
