"""The ``arroyo`` command as users run it: a real process, a real JVM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ARROYO = [sys.executable, "-m", "arroyo_cli.main"]
INPUTS = Path(__file__).parents[1] / "sql" / "inputs"


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ARROYO, *args], capture_output=True, text=True, timeout=300, check=False, **kwargs
    )  # type: ignore[call-overload]


def _wait_for_lines(proc: subprocess.Popen[str], path: Path, count: int, timeout: float) -> None:
    """Wait until the sink file has ``count`` lines (the only progress a running ``arroyo run``
    shows without a terminal). Between looks it waits on the process itself, so a run that dies
    fails the test at once, with its stderr."""
    deadline = time.monotonic() + timeout
    while (len(path.read_text().splitlines()) if path.exists() else 0) < count:
        assert time.monotonic() < deadline, f"{path} never reached {count} lines"
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
        _, err = proc.communicate()
        pytest.fail(f"arroyo run exited ({proc.returncode}) before writing {count} lines: {err}")


@pytest.mark.spark
def test_validate_prints_dataflow_without_touching_inputs(tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE TABLE src (id BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts) WITH ("
        "connector = 'single_file', path = '/does/not/exist.json', type = 'source');\n"
        "SELECT tumble(interval '1 minute') AS window, count(*) AS c FROM src GROUP BY 1;\n"
        # MQTT at QoS 0 cannot replay: into an exactly-once sink, it is warned of.
        "CREATE TABLE m (n BIGINT) WITH (connector = 'mqtt', url = 'tcp://127.0.0.1:1', "
        "topic = 't', format = 'json', type = 'source');\n"
        f"CREATE TABLE f WITH (connector = 'single_file', path = '{tmp_path}/f.json', "
        "type = 'sink');\nINSERT INTO f SELECT n FROM m;\n"
    )
    result = _run(["validate", str(query)])
    assert result.returncode == 0, result.stderr
    assert (
        "source src [single_file, format json, bounded] (id BIGINT, ts TIMESTAMP)" in result.stdout
    )
    assert "sink select_0 [stdout, format json, append]" in result.stdout
    assert "warning[unreplayable_source]: source 'm' (mqtt) cannot replay" in result.stderr


@pytest.mark.spark
def test_validate_reports_diagnostics_with_position(tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = '1');\nSELECT countr FROM i;\n"
    )
    result = _run(["validate", str(query)])
    assert result.returncode == 2
    assert f"error[unknown_column] {query}:2:8: unknown column 'countr'" in result.stderr


@pytest.mark.spark
def test_run_bounded_query_prints_rows_and_exits() -> None:
    sql = (
        f"CREATE TABLE words (word TEXT) WITH (connector = 'single_file', "
        f"path = '{INPUTS}/lines.txt', format = 'raw_string', type = 'source');\n"
        "SELECT upper(word) AS w FROM words WHERE word LIKE 'a%';\n"
    )
    result = _run(["run", "-"], input=sql)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [{"w": "ALPHA"}] * 3


@pytest.mark.slow
@pytest.mark.spark
def test_run_with_udfs_and_validate_refuses_a_bad_udf_file(tmp_path: Path) -> None:
    udfs = Path(__file__).parents[1] / "udfs" / "example_udfs.py"
    sql = (
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = '1000', message_count = '4', "
        "event_time_interval = '1 second');\n"
        "SELECT counter, double(counter) AS d, slow_square(counter) AS sq FROM i;\n"
    )
    result = _run(["run", "--udfs", str(udfs), "-"], input=sql)
    assert result.returncode == 0, result.stderr
    rows = sorted((json.loads(line) for line in result.stdout.splitlines()), key=str)
    assert rows == [{"counter": c, "d": 2 * c, "sq": c * c} for c in range(4)]

    bad = tmp_path / "bad.py"
    bad.write_text("from arroyo_udf import udf\n\n@udf\ndef f(x):\n    return x\n")
    refused = _run(["validate", "--udfs", str(bad), "-"], input=sql)
    assert refused.returncode == 2
    assert "bad.py:3" in refused.stderr and "argument 'x' has no type annotation" in refused.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_sigint_stops_with_checkpoint_and_run_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE TABLE i WITH (connector = 'impulse', event_rate = '200');\n"
        f"CREATE TABLE o WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"
        "INSERT INTO o SELECT counter FROM i;\n"
    )
    state = tmp_path / "state"
    seen: list[int] = []
    for _ in range(2):
        before = len(seen)
        proc = subprocess.Popen(
            [*ARROYO, "run", "--state-dir", str(state), str(query)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        _wait_for_lines(proc, out, before + 200, timeout=180)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "resume with --state-dir" in err
        seen = [json.loads(line)["counter"] for line in out.read_text().splitlines()]
        assert len(seen) > before
    assert seen == list(range(len(seen))), "output lost or repeated across the restart"


@pytest.mark.slow
@pytest.mark.spark
def test_run_real_time_refuses_a_window_naming_the_sink(tmp_path: Path) -> None:
    query = tmp_path / "q.sql"
    query.write_text(
        "CREATE TABLE bids WITH (connector = 'nexmark', event_rate = '100');\n"
        "CREATE TABLE counts WITH (connector = 'blackhole');\n"
        "INSERT INTO counts SELECT tumble(interval '1 second') AS window, count(*) AS n "
        "FROM bids GROUP BY 1;\n"
    )
    result = _run(["run", "--real-time", "5", str(query)])
    assert result.returncode == 1
    assert "error[real_time_unsupported]" in result.stderr
    assert "'counts'" in result.stderr
