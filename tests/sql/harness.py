"""Running a golden SQL case: a query over files in tests/sql/inputs, writing to one sink."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner

HERE = Path(__file__).parent
QUERIES = HERE / "queries"
GOLDEN = HERE / "golden"
INPUTS = HERE / "inputs"
# The first run's batches: two of them, then the stop.
_FIRST_BATCH_ROWS = 4
# The fewest rows a batch after the restore (resumed_batch_rows).
_RESUMED_BATCH_ROWS = 16


def render(query_file: Path, output: Path) -> str:
    return (
        query_file.read_text()
        .replace("$input_dir", str(INPUTS))
        .replace("$output_path", str(output))
    )


def first_batch_rows(sql: str) -> int:
    """Rows a batch of the first run: four, or fewer where the largest input the query reads
    has eight rows or fewer, so that its two batches stop before the end of an input of three
    rows or more (none is smaller; lines give their end-of-input marker with their last rows,
    and a stateless query ends with it). Four for a query of generated sources alone
    (impulse_bounded's 40 events)."""
    return _first_rows(_input_rows(sql))


def _first_rows(rows: int) -> int:
    return max(1, min(_FIRST_BATCH_ROWS, (rows - 1) // 2)) if rows else _FIRST_BATCH_ROWS


def resumed_batch_rows(sql: str) -> int:
    """Rows a batch after the restore: 16, or more where the largest input the query reads
    (tests/sql/inputs: a row a line) would take more than two batches after the first run's
    two. So events.json's 60 rows come in 8, then 26 and 26: two commits on the restored state,
    the second on state the first committed; its four batches of 16 only repeated those. (The
    resumed cases of every third query, one run each way: 30 rows a batch took 9% less CPU
    than 16. Fewer than 16, to give the small inputs two batches as well, made them slower.)"""
    rows = _input_rows(sql)
    rest = rows - 2 * _first_rows(rows)
    return max(_RESUMED_BATCH_ROWS, -(-rest // 2))


def _input_rows(sql: str) -> int:
    """The rows of the largest input the query reads from tests/sql/inputs (a row a line)."""
    named = re.findall(re.escape(str(INPUTS)) + r"/?([^'\"\s]*)", sql)
    return max((_lines(INPUTS / name) for name in named), default=0)


def _lines(path: Path) -> int:
    """The rows of an input: a file's lines, or those of the files under a directory."""
    if path.is_dir():
        return sum(_lines(f) for f in path.rglob("*") if f.is_file())
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def run_case(
    spark: SparkSession,
    sql: str,
    work: Path,
    *,
    resume_part_way: bool,
    batch_rows: int | None = None,
) -> None:
    """Run to completion; with ``resume_part_way``, first stop after two batches of four rows
    (fewer for the smallest inputs: ``first_batch_rows``),
    then plan and run the rest on the same state, as ``arroyo run --state-dir`` resumes, in
    batches of at least 16 rows (``resumed_batch_rows``): batches of four rows to the end took
    a test several times as long (tests that need the watermark to move between small batches
    run them themselves).

    Where the stop lands is timing: Spark may have begun the next batch or two (the replay
    takes them with the first run's rows a batch). A case whose rows depend on where batches
    split (late rows, by the watermark of the batch before) gives ``batch_rows`` for every
    batch of both runs: its batches then split at the same rows wherever the stop lands."""
    state = work / "state"
    if resume_part_way:
        program = spark_planner(spark, state_dir=state).plan(sql)
        first = PipelineRunner(
            spark,
            program,
            state,
            max_records_per_batch=batch_rows or first_batch_rows(sql),
            stop_after_batches=2,
        )
        first.start()
        assert not first.wait(timeout=300), "the case finished before the planned stop"
    program = spark_planner(spark, state_dir=state).plan(sql)
    runner = PipelineRunner(
        spark,
        program,
        state,
        max_records_per_batch=(batch_rows or resumed_batch_rows(sql)) if resume_part_way else None,
    )
    runner.start()
    assert runner.wait(timeout=300), "the run did not finish by itself"


def read_output(path: Path) -> list[dict[str, Any]]:
    if path.is_file():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows: list[dict[str, Any]] = []
    if not path.is_dir():
        return rows
    # As a plain listing reader reads a directory: every file but hidden ones.
    for f in sorted(path.rglob("*")):
        if not f.is_file() or any(p.startswith((".", "_")) for p in f.relative_to(path).parts):
            continue
        if f.suffix == ".parquet":
            rows.extend(_plain(r) for r in pq.read_table(f).to_pylist())
        else:
            rows.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return rows


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.replace(tzinfo=None).isoformat() if isinstance(v, dt.datetime) else v
        for k, v in row.items()
    }


def replay_changes(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table that debezium change records describe, applied in order. Fails on a record
    whose ``before`` is not a current row, or a create of a row that exists, so the before-images
    are checked as well as the end result."""
    current: Counter[str] = Counter()
    for i, rec in enumerate(records):
        before, after, op = rec["before"], rec["after"], rec["op"]
        assert (before is None) == (op == "c"), f"record {i}: {rec}"
        assert (after is None) == (op == "d"), f"record {i}: {rec}"
        if before is not None:
            key = json.dumps(before, sort_keys=True)
            assert current[key] > 0, f"record {i} changes a row that is not there: {rec}"
            current[key] -= 1
        if after is not None:
            current[json.dumps(after, sort_keys=True)] += 1
    return [json.loads(k) for k, n in current.items() for _ in range(n)]


def as_multiset(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def nexmark_q4_sql(out: Path, maxima_having: str | None = None) -> str:
    """Nexmark q4 (bench/nexmark/queries) over the unbounded generator at 20 K events/s, into a
    debezium_json file at ``out``; ``maxima_having``, a HAVING for its maxima per auction."""
    query = (HERE.parents[1] / "bench" / "nexmark" / "queries" / "q4.sql").read_text()
    if maxima_having is not None:
        grouped = "A.auction.category\n)"
        assert grouped in query
        query = query.replace(grouped, f"A.auction.category HAVING {maxima_having}\n)")
    return (
        "CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '20000');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', "
        "format = 'debezium_json', type = 'sink');\n"
        + query.replace("INSERT INTO sink", "INSERT INTO out")
    )


def kafka_clicks_sql(bootstrap_servers: str, topic: str, out: Path, ttl: str) -> str:
    """``SET updating_ttl`` to ``ttl``, a ``clicks (k TEXT)`` table reading JSON from a Kafka
    topic from its start, and a debezium_json file sink ``out`` at ``out``."""
    return (
        f"SET updating_ttl = INTERVAL '{ttl}';\n"
        f"CREATE TABLE clicks (k TEXT) WITH (connector = 'kafka', bootstrap_servers = "
        f"'{bootstrap_servers}', topic = '{topic}', type = 'source', "
        "format = 'json', 'source.offset' = 'earliest');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', "
        "format = 'debezium_json', type = 'sink');\n"
    )
