"""Stages (arroyo.connectors.stage): an aggregate over a join of streams that Spark runs (here
keyed by columns of two types, which Spark's join coerces; Arroyo's interval join runs in the
aggregate's own query) runs as two queries, the join writing its rows into a stage that the
aggregate reads; so does an aggregate over an updating result that the retracting aggregate
does not run (here Nexmark q4 with a HAVING in its maxima), through a stage of change records.
The stage hands each row on once, across replays, and keeps nothing the reader has committed.
The results of such queries are checked by the golden cases updating_join_aggregate,
updating_join_top_n and updating_having_aggregate_of_aggregate (straight and
stopped-and-resumed, recomputed by DuckDB)."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from arroyo.connectors.runtime.stage_files import (
    CONSUMED,
    END,
    _StageReader,
    batch_dir,
    committed_batches,
)
from arroyo.connectors.stage import stage_data_dir
from arroyo.connectors.stage.sink import StageLines, StageWriter
from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from tests.sql.harness import INPUTS, nexmark_q4_sql, read_output, replay_changes
from tests.waiting import wait_until

pytestmark = pytest.mark.spark

JOIN_COUNT = f"""
CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "orders.json"}', format = 'json',
      type = 'source');
CREATE TABLE payments (order_id INT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "payments.json"}', format = 'json',
      type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$out', format = 'debezium_json',
      type = 'sink');
INSERT INTO out SELECT o.customer, count(*) AS paid_orders
FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id GROUP BY o.customer;
"""


def _rows(table: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (INPUTS / f"{table}.json").read_text().splitlines()]


def _stage_root(state: Path) -> Path:
    (table,) = [p for p in (state / "tables").iterdir() if p.name.startswith("__stage")]
    return stage_data_dir(table)


@pytest.mark.slow
def test_a_finished_run_leaves_no_stage_rows_behind(spark: SparkSession, tmp_path: Path) -> None:
    out, state = tmp_path / "out.json", tmp_path / "state"
    program = spark_planner(spark, state_dir=state).plan(JOIN_COUNT.replace("$out", str(out)))
    assert [(s.name, s.connector) for s in program.sources][-1][1] == "__stage"
    runner = PipelineRunner(spark, program, state, max_records_per_batch=5)
    runner.start()
    assert runner.wait(timeout=300)

    customer = {r["order_id"]: r["customer"] for r in _rows("orders")}
    expected = Counter(customer[r["order_id"]] for r in _rows("payments"))
    counts = {r["customer"]: r["paid_orders"] for r in replay_changes(read_output(out))}
    assert counts == dict(expected)
    root = _stage_root(state)
    assert (root / END).exists()
    assert int((root / CONSUMED).read_text()) >= 0
    assert committed_batches(root) == []  # every batch read was removed


def test_a_finished_run_runs_again_to_its_end_in_the_same_session(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The query writing the stage is marked done once the runner has seen it done, and its
    file sources then give no more batches (libs/arroyo/java/arroyo/files/FinishedQueries.java).
    Started again on the same state, in the same JVM, it reads its end again and ends, and the
    output is as it was: the mark is the first run's alone."""
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = JOIN_COUNT.replace("$out", str(out))
    outputs = []
    for _ in range(2):
        runner = PipelineRunner(spark, spark_planner(spark, state_dir=state).plan(sql), state)
        runner.start()
        assert runner.wait(timeout=120), "the run did not end"
        outputs.append(replay_changes(read_output(out)))
        assert len(runner.queries) == 2
    assert outputs[0] and outputs[1] == outputs[0]


def test_the_writer_skips_a_batch_written_or_consumed_before(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "stage"
    root.mkdir()
    writer = StageWriter(root)
    rows = spark.createDataFrame([(1, "a")], "n BIGINT, s STRING").selectExpr(
        "*", "current_timestamp() AS _timestamp"
    )
    other = spark.createDataFrame([(2, "b")], "n BIGINT, s STRING").selectExpr(
        "*", "current_timestamp() AS _timestamp"
    )
    writer(rows, 0)
    writer(other, 0)  # replayed after a crash: the batch is there already
    assert spark.read.parquet(str(batch_dir(root, 0))).select("n").collect()[0][0] == 1
    # The reader consumed batches 0 and 1 and removed them; a replay of 1 is not written again.
    (root / CONSUMED).write_text("1")
    for b in committed_batches(root):
        shutil.rmtree(batch_dir(root, b))
    writer(rows, 1)
    assert committed_batches(root) == []
    writer(other, 2)
    assert committed_batches(root) == [2]
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp")]


def test_a_batch_without_changes_gives_the_reader_no_batch(tmp_path: Path) -> None:
    """Change records (an updating result's): the writer's batches with none (those that only
    move its watermark) leave a gap in the batch ids, which the reader's listing skips, rather
    than a batch its query would run for nothing."""
    root = tmp_path / "stage"
    root.mkdir()
    writer = StageLines(root)
    writer.write(0, [b'{"before":null,"after":{"n":1},"op":"c"}\n'])
    writer.write(1, iter([]))
    writer.write(2, [b'{"before":{"n":1},"after":{"n":2},"op":"u"}\n'])
    assert committed_batches(root) == [0, 2]
    assert not writer.committed(3)
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp")]
    reader = _StageReader({"path": str(root)}, StructType([StructField("n", LongType())]))
    start = reader.initialOffset()
    end = reader.latestOffset()
    assert end["batch"] == 2
    files = [Path(p.path) for p in reader.partitions(start, end)]
    assert [f.parent for f in files] == [batch_dir(root, 0), batch_dir(root, 2)]


def test_an_unbounded_pipeline_reads_its_stage_as_it_is_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    out, state = tmp_path / "out.json", tmp_path / "state"
    sql = nexmark_q4_sql(out, maxima_having="count(*) > 0")
    program = spark_planner(spark, state_dir=state).plan(sql)
    assert not program.bounded
    runner = PipelineRunner(spark, program, state)
    runner.start()
    waiter = threading.Thread(target=runner.wait, kwargs={"timeout": 300})
    waiter.start()
    try:
        wait_until("an average price at the sink", lambda: out.exists() and out.stat().st_size, 240)
    finally:
        runner.stop()
        waiter.join()

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records, "no average price reached the sink"
    averages = replay_changes(records)
    assert all(r["avg_price"] > 0 for r in averages)
    assert len({r["category"] for r in averages}) == len(averages)  # one row per category
    assert not (_stage_root(state) / END).exists()


def _stage_columns(spark: SparkSession, tmp_path: Path, insert: str) -> list[list[str]]:
    program = spark_planner(spark, state_dir=tmp_path).plan(
        JOIN_COUNT.split("INSERT INTO", maxsplit=1)[0].replace("$out", str(tmp_path / "out.json"))
        + insert
    )
    return [[c.name for c in s.columns] for s in program.sources if s.connector == "__stage"]


def test_a_column_named_two_ways_is_one_stage_column(spark: SparkSession, tmp_path: Path) -> None:
    # Unqualified, qualified, another case: the same column of the join, which the stage
    # carries once (two would leave the GROUP BY's apart from the SELECT's).
    assert _stage_columns(
        spark,
        tmp_path,
        "INSERT INTO out SELECT customer, count(*) AS n FROM orders AS o "
        "JOIN payments AS p ON o.order_id = p.order_id GROUP BY O.Customer;",
    ) == [["__c0"]]


def test_having_names_the_select_list_first(spark: SparkSession, tmp_path: Path) -> None:
    # ``total`` in HAVING is the count (as Spark reads it), not the orders' column.
    assert _stage_columns(
        spark,
        tmp_path,
        "INSERT INTO out SELECT o.customer, count(*) AS total FROM orders AS o "
        "JOIN payments AS p ON o.order_id = p.order_id GROUP BY o.customer HAVING total > 1;",
    ) == [["__c0"]]


def test_a_view_nobody_reads_writes_no_stage(spark: SparkSession, tmp_path: Path) -> None:
    assert (
        _stage_columns(
            spark,
            tmp_path,
            "CREATE VIEW unused AS SELECT o.customer, count(*) AS n FROM orders AS o "
            "JOIN payments AS p ON o.order_id = p.order_id GROUP BY o.customer;\n"
            "INSERT INTO out SELECT o.customer, count(*) AS n FROM orders AS o "
            "GROUP BY o.customer;",
        )
        == []
    )
