"""The filesystem connector on a real S3 server (versitygw, arroyo.testing.s3): sources read a
bucket's files, sinks write them so that a plain listing by another client (pyarrow, not Spark)
sees each row once, and wrong credentials or a missing bucket fail naming where and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError
from arroyo.testing.s3 import S3Server
from tests.connectors.uploads import pending_uploads
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def _run(spark: SparkSession, work: Path, script: str, batch_rows: int | None = None) -> None:
    state = work / "state"
    program = spark_planner(spark, state_dir=state).plan(script)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=batch_rows)
    runner.start()
    assert runner.wait(timeout=300), "the run did not end by itself"


def _listed(server: S3Server, bucket: str, prefix: str) -> list[str]:
    """The object keys under ``prefix`` that a reader skipping hidden names reads."""
    import pyarrow.fs as pafs

    infos = server.filesystem().get_file_info(
        pafs.FileSelector(f"{bucket}/{prefix}", recursive=True, allow_not_found=True)
    )
    base = f"{bucket}/{prefix}/"
    return sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File
        and not any(p.startswith(("_", ".")) for p in i.path.removeprefix(base).split("/"))
    )


def _rows(server: S3Server, keys: list[str]) -> list[dict[str, Any]]:
    fs = server.filesystem()
    rows: list[dict[str, Any]] = []
    for key in keys:
        if key.endswith(".parquet"):
            with fs.open_input_file(key) as f:
                rows += pq.read_table(f).to_pylist()
        else:
            with fs.open_input_stream(key) as f:
                rows += [json.loads(line) for line in f.read().decode().splitlines() if line]
    return rows


_IMPULSE = (
    "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', "
    "message_count = '300');\n"
)


def _into_bucket(server: S3Server, bucket: str, columns: str, options: str, select: str) -> str:
    """The impulse's rows, as ``select`` takes them, into a filesystem sink at <bucket>/out."""
    return (
        _IMPULSE + f"CREATE TABLE out {columns} WITH (connector = 'filesystem', "
        f"path = 's3://{bucket}/out', type = 'sink', {options}{server.with_clause()});\n"
        f"INSERT INTO out {select};"
    )


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_sink_writes_each_row_once_to_a_bucket(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str, fmt: str
) -> None:
    script = _into_bucket(
        s3_server,
        s3_bucket,
        "(n BIGINT, k TEXT)",
        f"format = '{fmt}', 'partitioning.fields' = 'k'",
        "SELECT counter AS n, CAST(counter % 3 AS TEXT) AS k FROM impulse",
    )
    _run(spark, tmp_path, script, batch_rows=100)
    keys = _listed(s3_server, s3_bucket, "out")
    assert keys, "no files in the bucket"
    # <bucket>/out/k=<k>/<file>, as Arroyo lays partitions out
    assert {k.split("/")[2] for k in keys} == {"k=0", "k=1", "k=2"}, keys
    rows = _rows(s3_server, keys)
    assert sorted(r["n"] for r in rows) == list(range(300))
    # What Spark wrote is whole and in place once the batches committed: no upload pending,
    # and the magic directories go (in the background, after each batch).
    assert pending_uploads(s3_server, s3_bucket, "out/") == []
    wait_until(
        "the batches' magic directories removed",
        lambda: not [k for k in _all_keys(s3_server, s3_bucket) if "/_" in k],
        30,
    )


def test_a_batch_without_rows_leaves_no_file_in_a_bucket(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    # Batches of 100: only the first has rows. Spark's first task writes a file all the same
    # (a Parquet file without rows); the sink aborts its upload.
    script = _into_bucket(
        s3_server,
        s3_bucket,
        "(n BIGINT)",
        "format = 'parquet'",
        "SELECT counter AS n FROM impulse WHERE counter < 100",
    )
    _run(spark, tmp_path, script, batch_rows=100)
    keys = _listed(s3_server, s3_bucket, "out")
    fs = s3_server.filesystem()
    for key in keys:
        with fs.open_input_file(key) as f:
            assert pq.read_metadata(f).num_rows > 0, f"{key} has no rows"
    assert sorted(r["n"] for r in _rows(s3_server, keys)) == list(range(100))
    assert pending_uploads(s3_server, s3_bucket, "out/") == []


def _all_keys(server: S3Server, bucket: str) -> list[str]:
    import pyarrow.fs as pafs

    infos = server.filesystem().get_file_info(pafs.FileSelector(bucket, recursive=True))
    return [i.path for i in infos if i.type == pafs.FileType.File]


def test_a_source_reads_a_buckets_files(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    fs = s3_server.filesystem()
    with fs.open_output_stream(f"{s3_bucket}/in/a/1.json") as f:
        f.write(b"".join(b'{"n": %d}\n' % i for i in range(0, 50)))
    with fs.open_output_stream(f"{s3_bucket}/in/b/2.parquet") as f:
        pq.write_table(pa.table({"n": list(range(50, 80))}), f)
    with fs.open_output_stream(f"{s3_bucket}/in/_hidden/3.json") as f:
        f.write(b'{"n": -1}\n')
    out = tmp_path / "out"
    for fmt, pattern in (("json", r"\.json$"), ("parquet", r"\.parquet$")):
        script = (
            f"CREATE TABLE src (n BIGINT) WITH (connector = 'filesystem', "
            f"path = 's3://{s3_bucket}/in', format = '{fmt}', type = 'source', "
            f"'source.regex_pattern' = '{pattern}'{s3_server.with_clause()});\n"
            f"CREATE TABLE out WITH (connector = 'filesystem', path = '{out / fmt}', "
            "format = 'json', type = 'sink');\n"
            "INSERT INTO out SELECT n FROM src;"
        )
        _run(spark, tmp_path / fmt, script, batch_rows=20)
    got = {
        fmt: sorted(
            json.loads(line)["n"]
            for f in (out / fmt).rglob("*.json")
            for line in f.read_text().splitlines()
        )
        for fmt in ("json", "parquet")
    }
    assert got == {"json": list(range(50)), "parquet": list(range(50, 80))}


def test_wrong_credentials_fail_naming_the_bucket_and_the_endpoint(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    with_clause = s3_server.with_clause().replace(s3_server.secret_key, "not-the-secret")
    script = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'filesystem', "
        f"path = 's3://{s3_bucket}/in', format = 'json', type = 'source'{with_clause});\n"
        f"CREATE TABLE out WITH (connector = 'filesystem', path = '{tmp_path / 'out'}', "
        "format = 'json', type = 'sink');\n"
        "INSERT INTO out SELECT n FROM src;"
    )
    with pytest.raises(JobFailedError) as failed:
        _run(spark, tmp_path, script)
    message = str(failed.value)
    assert s3_bucket in message and s3_server.endpoint in message, message
    assert "not-the-secret" not in message


def test_a_missing_bucket_fails_naming_it(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server
) -> None:
    script = (
        _IMPULSE + "CREATE TABLE out (n BIGINT) WITH (connector = 'filesystem', "
        f"path = 's3://no-such-bucket-here/out', format = 'json', type = 'sink'"
        f"{s3_server.with_clause()});\n"
        "INSERT INTO out SELECT counter AS n FROM impulse;"
    )
    with pytest.raises(JobFailedError) as failed:
        _run(spark, tmp_path, script)
    message = str(failed.value)
    assert "no-such-bucket-here" in message and s3_server.endpoint in message, message


def test_a_server_that_goes_away_fails_the_run_and_the_resumed_run_loses_nothing(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    # 15 s of events: Spark's rate source catches up in one batch after a slow start, so the
    # run must last well past its first file for the server to go away in the middle of it.
    script = (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '800', "
        "message_count = '12000');\n"
        "CREATE TABLE out (n BIGINT) WITH (connector = 'filesystem', "
        f"path = 's3://{s3_bucket}/out', format = 'json', type = 'sink'"
        f"{s3_server.with_clause()});\n"
        "INSERT INTO out SELECT counter AS n FROM impulse;"
    )
    state = tmp_path / "state"
    runner = PipelineRunner(spark, spark_planner(spark, state_dir=state).plan(script), state)
    runner.start()
    try:
        wait_until(
            "files before the server goes away", lambda: _listed(s3_server, s3_bucket, "out"), 120
        )
        s3_server.kill()
        with pytest.raises(JobFailedError) as failed:
            runner.wait(timeout=300)
    finally:
        s3_server.restart()  # the same port and data: the server came back
    message = str(failed.value)
    assert s3_bucket in message and s3_server.endpoint in message, message
    _run(spark, tmp_path, script)
    rows = _rows(s3_server, _listed(s3_server, s3_bucket, "out"))
    assert sorted(r["n"] for r in rows) == list(range(12000))
