"""A keyed windowed aggregate whose rows go to per-batch queries alone (Nexmark q5's counts)
runs as Arroyo's window aggregate (libs/arroyo/java/arroyo/sql/WindowAggregate.java: state per
pane of time, partial results summed per batch): the same rows as Spark's windowed aggregate,
late rows dropped from the windows the watermark had closed and counted in those still open,
and recoverable from its checkpoint."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.program.spec import PipelineProgram
from tests.sql.harness import read_output, run_case

pytestmark = pytest.mark.spark

_START = datetime(2024, 1, 1)
_KEYS = ('"user"', "device")


def _events(path: Path) -> Path:
    """Events a second or two apart, some of them late: behind the latest by 8 to 40 seconds,
    past the watermark's 5 seconds, so that some of a late row's 30-second windows are closed
    and some open. Nulls among the values."""
    rng = random.Random(7)
    lines = []
    latest = 0.0
    for i in range(40):
        latest += rng.choice([1.0, 1.5, 2.0])
        at = latest - rng.choice([8, 15, 25, 40]) if i % 7 == 3 else latest
        lines.append(
            json.dumps(
                {
                    "user": rng.choice(["ann", "bo", "cy", None]),
                    "device": rng.choice([1, 2]),
                    "x": rng.choice([None, *range(-5, 50)]),
                    "y": rng.choice([None, 0.5, -2.25, 10.0, 3.125]),
                    "i": rng.randint(-100, 100),
                    "ts": (_START + timedelta(seconds=at)).isoformat(),
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _sql(
    events: Path, out: Path, window: str, having: str = "", keys: tuple[str, ...] = _KEYS
) -> str:
    grouped = ", ".join(str(i) for i in range(1, len(keys) + 2))
    return f"""
CREATE TABLE events (
    "user" TEXT, device INT, x BIGINT, y DOUBLE, i INT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts AS ts - INTERVAL '5 seconds'
) WITH (connector = 'single_file', path = '{events}', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json', type = 'sink');
CREATE VIEW stats AS
SELECT {", ".join(keys)}, {window} AS window, count(*) AS n, count(y) AS ny, sum(x) AS sx,
       sum(y) AS sy, avg(x) AS ax, min(i) AS mi, max(y) AS my
FROM events GROUP BY {grouped} {having};
CREATE VIEW busiest AS SELECT window, max(n) AS top FROM stats GROUP BY window;
INSERT INTO out
SELECT S.window.start AS start, {", ".join(f"S.{k}" for k in keys)}, S.n, S.ny, S.sx, S.sy,
       S.ax, S.mi, S.my, S.n = B.top AS busiest
FROM stats AS S JOIN busiest AS B ON S.window = B.window;
"""


def _rows(out: Path) -> Counter[str]:
    def plain(row: dict[str, Any]) -> str:
        return json.dumps(
            {k: round(v, 9) if isinstance(v, float) else v for k, v in row.items()},
            sort_keys=True,
        )

    return Counter(plain(r) for r in read_output(out))


def _merged(spark: SparkSession, sql: str, state: Path) -> bool:
    program = spark_planner(spark, state_dir=state).plan(sql)
    (query,) = program.queries
    assert query.batch_sql is not None  # the join runs per batch either way
    assert PipelineProgram.from_json(program.to_json()) == program
    return query.batch_merge is not None


_HOP = "hop(interval '10 seconds', interval '30 seconds')"


# Each window and key kind in one run; the resumption of each kind of panes' state (it does not
# depend on the window's kind): each case costs its share of the suite's heaviest per-batch work.
@pytest.mark.parametrize(
    ("window", "keys", "resume_part_way"),
    [
        (_HOP, _KEYS, False),
        (_HOP, _KEYS, True),
        ("tumble(interval '20 seconds')", _KEYS, False),
        # One BIGINT key (with NULLs) is summed by its own table (WindowAggregate.LongPanes).
        (_HOP, ("x",), False),
        (_HOP, ("x",), True),
    ],
)
def test_the_rows_are_those_of_sparks_windowed_aggregate(
    spark: SparkSession, tmp_path: Path, window: str, keys: tuple[str, ...], resume_part_way: bool
) -> None:
    """The same query with a HAVING that keeps every group (which the window aggregate does not
    take) runs as Spark's windowed aggregate: both give the same rows, in small batches (eight
    rows each, the watermark moving between them), and once stopped after two batches and
    resumed from the checkpoint."""
    events = _events(tmp_path / "events.json")
    ours, spark_out = tmp_path / "ours.json", tmp_path / "spark.json"
    sql = _sql(events, ours, window, keys=keys)
    spark_sql = _sql(events, spark_out, window, "HAVING count(*) > 0", keys)
    assert _merged(spark, sql, tmp_path / "plan")
    assert not _merged(spark, spark_sql, tmp_path / "plan")

    if resume_part_way:
        # Late rows: the two runs' batches must split at the same rows (run_case).
        run_case(spark, sql, tmp_path / "ours", resume_part_way=True, batch_rows=8)
        run_case(spark, spark_sql, tmp_path / "spark", resume_part_way=True, batch_rows=8)
    else:
        _run_in_small_batches(spark, sql, tmp_path / "ours")
        _run_in_small_batches(spark, spark_sql, tmp_path / "spark")
    got, expected = _rows(ours), _rows(spark_out)
    assert sum(expected.values()) > 20
    assert got == expected


def test_late_rows_count_only_in_windows_still_open(spark: SparkSession, tmp_path: Path) -> None:
    """In one batch nothing is late; in batches of eight rows the late ones are dropped from the
    windows the watermark had passed, so some windows count fewer rows: the case above checks
    lateness, not just sums."""
    events = _events(tmp_path / "events.json")
    whole, small = tmp_path / "whole.json", tmp_path / "small.json"
    window = "hop(interval '10 seconds', interval '30 seconds')"
    run_case(spark, _sql(events, whole, window), tmp_path / "whole", resume_part_way=False)
    _run_in_small_batches(spark, _sql(events, small, window), tmp_path / "small")

    def counted(out: Path) -> int:
        return sum(json.loads(r)["n"] for r in _rows(out).elements())

    assert counted(small) < counted(whole)


def _run_in_small_batches(spark: SparkSession, sql: str, work: Path) -> None:
    from arroyo.engine.runner import PipelineRunner

    state = work / "state"
    runner = PipelineRunner(
        spark, spark_planner(spark, state_dir=state).plan(sql), state, max_records_per_batch=8
    )
    runner.start()
    assert runner.wait(timeout=300), "the run did not finish by itself"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("max(y) AS my", 'max("user") AS my'), "a maximum of strings"),
        (("count(y) AS ny", "count(DISTINCT y) AS ny"), "a distinct count"),
        (("sum(x) AS sx", "sum(x + 1) FILTER (WHERE x > 0) AS sx"), "a filtered sum"),
        (("GROUP BY 1, 2, 3", "GROUP BY 1, 2, 3 HAVING count(*) > 1"), "a HAVING"),
        (("sum(y) AS sy", "sum(CAST(y AS DECIMAL(10, 2))) AS sy"), "a sum of decimals"),
    ],
)
def test_other_aggregates_stay_with_spark(
    spark: SparkSession, tmp_path: Path, change: tuple[str, str], why: str
) -> None:
    events = _events(tmp_path / "events.json")
    sql = _sql(events, tmp_path / "out.json", "tumble(interval '20 seconds')")
    assert change[0] in sql
    assert not _merged(spark, sql.replace(*change), tmp_path), why


def test_a_key_of_doubles_stays_with_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Spark groups -0.0 with 0.0 and every NaN together; Java's equality of doubles does not."""
    events = _events(tmp_path / "events.json")
    sql = _sql(events, tmp_path / "out.json", "tumble(interval '20 seconds')")
    sql = sql.replace('SELECT "user", device,', 'SELECT "user", y AS device,')
    assert "y AS device" in sql
    assert not _merged(spark, sql, tmp_path)
