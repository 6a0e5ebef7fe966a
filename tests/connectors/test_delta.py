"""The delta sink, read back by delta-rs (the ``deltalake`` package: not Spark, not Delta's JVM
code): each row once after replays, partition columns as the table's, on disk and on S3, and
its options refused where Delta decides for itself."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import PlanningError
from arroyo.testing.s3 import S3Server
from tests.connectors.checkpoints import forget_commit, query_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.lakehouse]

ROWS = 300


def _script(path: str, extra: str = "") -> str:
    return (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', "
        f"message_count = '{ROWS}');\n"
        "CREATE TABLE out (n BIGINT, k TEXT) WITH (connector = 'delta', "
        f"path = '{path}', format = 'parquet', type = 'sink', "
        f"'partitioning.fields' = 'k'{extra});\n"
        "INSERT INTO out SELECT counter AS n, CAST(counter % 3 AS TEXT) AS k FROM impulse;"
    )


def _replay_from(state: Path, batch: int) -> None:
    """Leave the checkpoint as a crash after the sink committed ``batch`` and before Spark did
    would, so that the next run runs it again."""
    forget_commit(query_checkpoint(state), batch)


def _run(spark: SparkSession, state: Path, script: str) -> None:
    program = spark_planner(spark, state_dir=state).plan(script)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=100)
    runner.start()
    assert runner.wait(timeout=300), "the run did not end by itself"


def _txn_version(table: DeltaTable, state: Path) -> int | None:
    """The last batch the table recorded for the sink whose state is under ``state``."""
    (id_file,) = state.rglob("sink_id")
    return table.transaction_version(id_file.read_text().strip())


def _check(table: DeltaTable) -> None:
    rows = table.to_pyarrow_table().to_pylist()
    assert Counter(r["n"] for r in rows) == Counter(range(ROWS)), "a row missing or twice"
    assert all(r["k"] == str(r["n"] % 3) for r in rows)
    assert table.metadata().partition_columns == ["k"]


def test_each_row_once_for_delta_rs_after_replayed_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    out, state = tmp_path / "table", tmp_path / "state"
    _run(spark, state, _script(str(out)))
    table = DeltaTable(str(out))
    _check(table)
    last = _txn_version(table, state)
    assert last is not None and last >= 2
    files = len(table.file_uris())
    # Batches Delta committed but Spark did not (100 rows each: the third holds rows): their
    # replay is skipped by their txnVersion.
    _replay_from(state, 1)
    _run(spark, state, _script(str(out)))
    table = DeltaTable(str(out))
    _check(table)
    assert len(table.file_uris()) == files, "a replayed batch added files"
    assert (_txn_version(table, state) or -1) >= last
    # A pipeline started afresh on the same table (a new state) appends under a new id.
    _run(spark, tmp_path / "state2", _script(str(out)))
    rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    assert Counter(r["n"] for r in rows) == Counter({n: 2 for n in range(ROWS)})


def test_a_stateful_query_replays_into_delta(spark: SparkSession, tmp_path: Path) -> None:
    # Delta skips a replayed batch's write without running it; the window's state must still
    # be committed, or the next batch fails its state store's validation.
    out, state = tmp_path / "table", tmp_path / "state"
    script = _script(str(out)).replace(
        "SELECT counter AS n, CAST(counter % 3 AS TEXT) AS k FROM impulse",
        "SELECT count(*) AS n, k FROM (SELECT CAST(counter % 3 AS TEXT) AS k, timestamp "
        "FROM impulse) GROUP BY tumble(interval '1 hour'), k",
    )
    _run(spark, state, script)
    _replay_from(state, 1)
    _run(spark, state, script)
    assert (query_checkpoint(state) / "commits" / "1").exists(), "the batch was not run again"
    rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    assert sorted((r["k"], r["n"]) for r in rows) == [("0", 100), ("1", 100), ("2", 100)]


@pytest.mark.s3
def test_a_delta_table_on_s3(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    state = tmp_path / "state"
    script = _script(f"s3://{s3_bucket}/delta", s3_server.with_clause())
    _run(spark, state, script)
    _replay_from(state, 1)
    _run(spark, state, script)
    _check(DeltaTable(f"s3://{s3_bucket}/delta", storage_options=s3_server.object_store_options()))


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (", 'filename.prefix' = 'x'", "filename.prefix: Delta names a table's files itself"),
        (", 'partitioning.time_pattern' = '%Y'", "partitioning.fields"),
        (", 'rolling_policy.file_size' = '1MB'", "OPTIMIZE"),
        (", 'source.regex_pattern' = 'x'", "source.regex_pattern"),
    ],
)
def test_options_delta_decides_are_refused(
    spark: SparkSession, tmp_path: Path, extra: str, named: str
) -> None:
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(_script(str(tmp_path / "t"), extra))
    assert named in str(refused.value)


def test_a_delta_table_is_a_sink_of_parquet(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(
            _script(str(tmp_path / "t")).replace("'parquet'", "'json'")
        )
    assert "json" in str(refused.value)
    source = (
        f"CREATE TABLE t (n BIGINT) WITH (connector = 'delta', path = '{tmp_path}', "
        "type = 'source');\nSELECT n FROM t;"
    )
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(source)
    assert "source" in str(refused.value)
