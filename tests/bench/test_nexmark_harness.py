"""bench/nexmark.py runs end to end: both Spark engines on a windowed and a stateless query, and
its latency mode, each writing the figures its JSON file promises. (Speed is not asserted: the
harness prints it. The Flink peer needs its own 500 MB environment and is not run here.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"

pytestmark = pytest.mark.spark


def _harness(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "nexmark.py"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_throughput_figures_for_each_engine(tmp_path: Path) -> None:
    """q1 on both engines; q9, a pipeline of stages (no form by hand: Spark cannot run it as one
    query), measured until its last stage has read every event."""
    out = tmp_path / "figures.json"
    events = 100_000
    _harness(
        "--queries", "q1,q9", "--events", str(events), "--batch-rows", "25000",
        "--peers", "spark", "--json", str(out),
    )  # fmt: skip
    figures = json.loads(out.read_text())
    assert sorted(figures) == ["q1", "q9"]
    assert sorted(figures["q1"]) == ["arroyo", "spark"]
    assert sorted(figures["q9"]) == ["arroyo"]
    for query, engines in figures.items():
        for engine, f in engines.items():
            assert "error" not in f, (query, engine, f)
            assert f["events"] == events
            assert f["batches"] >= events // 25_000
            assert f["events_per_s"] > 0
            assert f["events_per_s_with_startup"] < f["events_per_s"]
            assert f["cpu_s_per_m"] > 0
            assert f["peak_rss_mb"] > 100  # a JVM at least


@pytest.mark.kafka
def test_latency_figures(tmp_path: Path) -> None:
    out = tmp_path / "latency.json"
    _harness(
        "--latency", "--rates", "2000", "--seconds", "5", "--warmup", "1", "--real-time", "5",
        "--json", str(out),
    )  # fmt: skip
    figures = json.loads(out.read_text())["latency"]
    assert sorted(figures) == ["stateless-real-time@2000", "stateless@2000", "tumble@2000"]
    for run in figures.values():
        # Every event is read at or after its event time, so no latency is negative.
        assert 0 <= run["latency_p50_ms"] <= run["latency_p99_ms"] <= run["latency_max_ms"]
    for micro_batch in ("stateless@2000", "tumble@2000"):
        assert figures[micro_batch]["latency_p50_ms"] > 0  # a batch commits after its reads
    windows = figures["tumble@2000"]
    assert windows["windows"] >= 3
    assert windows["window_delay_p50_ms"] > 0
    assert figures["stateless-real-time@2000"]["checkpoint_every_s"] == 5


def _nexmark_module():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("nexmark_bench", BENCH / "nexmark.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_repeated_runs_report_the_median_run_and_every_figure() -> None:
    median_run = _nexmark_module().median_run
    runs = [
        {"events_per_s": 300.0, "peak_rss_mb": 3},
        {"events_per_s": 100.0, "peak_rss_mb": 1},
        {"events_per_s": 200.0, "peak_rss_mb": 2},
    ]
    # The whole median run (its memory too, not a mix of runs), and each run's throughput.
    assert median_run(runs) == {
        "events_per_s": 200.0,
        "peak_rss_mb": 2,
        "runs_events_per_s": [300.0, 100.0, 200.0],
    }
    # Of an even number, the lower middle: the figure is never flattered.
    assert median_run(runs[:2])["events_per_s"] == 100.0
    # A failed run is not hidden behind the others.
    assert median_run([*runs, {"error": "boom"}]) == {"error": "boom"}


def test_window_delays_start_from_the_first_real_watermark() -> None:
    """Spark reports the epoch as the watermark before any event; the windows to time start
    at the first real one (counting from 1970 took minutes and timed nothing of ours)."""
    import importlib.util
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location(
        "nexmark_latency_bench", BENCH / "nexmark_latency.py"
    )
    assert spec is not None and spec.loader is not None
    latency = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(latency)

    def batch(at: str, watermark: str) -> SimpleNamespace:
        return SimpleNamespace(
            timestamp=at, durationMs={"triggerExecution": 100}, eventTime={"watermark": watermark}
        )

    batches = [
        batch("2026-11-27T10:00:00.000Z", "1970-01-01T00:00:00.000Z"),
        batch("2026-11-27T10:00:01.000Z", "2026-11-27T09:59:59.500Z"),
        batch("2026-11-27T10:00:03.000Z", "2026-11-27T10:00:01.500Z"),
    ]
    delays = latency.window_delays(batches, delay_ms=1000, after_ms=0)
    # Windows ending at 10:00:00 and 10:00:01 close in the third batch, committed at 10:00:03.1;
    # their watermarks passed them when events at 10:00:01 and 10:00:02 were readable.
    assert sorted(delays.tolist()) == [1100.0, 2100.0]
