"""A pipeline's state on S3 (arroyo.connectors.runtime.remote_state): stopped with one local
working directory, resumed with another that shares nothing with it (another machine), every
window written once; Spark's checkpoints are in the bucket; a bucket that is not there, and
wrong credentials, are named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.connectors.runtime.remote_state import RemoteState, RemoteStateError
from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.program.spec import PipelineProgram
from arroyo.testing.s3 import S3Server

pytestmark = [pytest.mark.spark, pytest.mark.s3]

EVENTS = 600


def _script(out: Path | str, storage: str = "") -> str:
    # 600 events, 100 a second of event time: six 1-second windows of 100, through Spark's
    # state store (the window's counts) and a filesystem sink (its committed batch, its id).
    return (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '100', "
        f"message_count = '{EVENTS}');\n"
        f"CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', format = 'json', "
        f"type = 'sink'{storage});\n"
        "INSERT INTO out SELECT count(*) AS n, tumble(interval '1 second') AS w "
        "FROM impulse GROUP BY 2;"
    )


def _options(server: S3Server) -> dict[str, str]:
    return {k.removeprefix("storage."): v for k, v in server.storage_options().items()}


def _runner(
    spark: SparkSession,
    program: PipelineProgram,
    local: Path,
    url: str,
    server: S3Server,
    stop_after_batches: int | None = None,
) -> PipelineRunner:
    """A run of ``program`` whose state is at ``url``, worked on in ``local``."""
    remote = RemoteState(url, local, _options(server))
    return PipelineRunner(
        spark,
        program,
        local,
        max_records_per_batch=150,
        stop_after_batches=stop_after_batches,
        remote=remote,
    )


def _keys(server: S3Server, prefix: str) -> list[str]:
    """A plain listing of the bucket, through pyarrow's S3 client (not Hadoop's)."""
    from pyarrow import fs as pafs

    selector = pafs.FileSelector(prefix, recursive=True)
    return [i.path for i in server.filesystem().get_file_info(selector) if i.is_file]


def _rows(out: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for f in sorted(out.rglob("*"))
        if f.is_file() and not any(p.startswith((".", "_")) for p in f.relative_to(out).parts)
        for line in f.read_text().splitlines()
    ]


@pytest.mark.parametrize("into", ["disk", "bucket"])
def test_a_pipeline_resumes_from_its_state_on_s3_in_another_directory(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str, into: str
) -> None:
    url = f"s3://{s3_bucket}/pipelines/p1"
    # Into a bucket, the sink runs in the JVM and stores its records there itself.
    out = tmp_path / "out"
    script = (
        _script(out)
        if into == "disk"
        else _script(f"s3://{s3_bucket}/out", s3_server.with_clause())
    )
    first_dir, second_dir = tmp_path / "machine-a", tmp_path / "machine-b"
    program = spark_planner(spark, state_dir=first_dir).plan(script)
    first = _runner(spark, program, first_dir, url, s3_server, stop_after_batches=2)
    first.start()
    assert not first.wait(timeout=300), "the first run ended before its stop"
    shutil.rmtree(first_dir)  # the first machine is gone

    listing = _keys(s3_server, f"{s3_bucket}/pipelines/p1")
    assert any("/checkpoint/commits/" in k for k in listing), listing
    assert any("/checkpoint/state/" in k for k in listing), "the window's state is not on S3"
    assert any(k.endswith("/sink/sink_id") for k in listing), listing
    assert any(k.endswith("/sink/committed_batch") for k in listing), listing

    program = spark_planner(spark, state_dir=second_dir).plan(script)
    second = _runner(spark, program, second_dir, url, s3_server)
    second.start()
    assert second.wait(timeout=300), "the resumed run did not finish"
    if into == "disk":
        rows = _rows(out)
        names = [f.name for f in out.rglob("part-*")]
    else:
        keys = [k for k in _keys(s3_server, f"{s3_bucket}/out") if "/_" not in k]
        fs = s3_server.filesystem()
        rows = []
        for key in keys:
            with fs.open_input_stream(key) as f:
                rows += [json.loads(line) for line in f.read().decode().splitlines()]
        names = [k.rsplit("/", 1)[-1] for k in keys]
    windows = Counter(str(r["w"]) for r in rows)
    assert sum(int(str(r["n"])) for r in rows) == EVENTS, rows
    assert all(c == 1 for c in windows.values()), f"a window written twice: {windows}"
    # The resumed run named its files as the first did: one sink, not a second one.
    owners = {name.split("-")[1] for name in names}
    assert len(owners) == 1, owners


def test_a_missing_bucket_and_wrong_keys_are_named(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    missing = RemoteState("s3://no-such-bucket/p", tmp_path / "a", _options(s3_server))
    with pytest.raises(RemoteStateError) as refused:
        missing.restore()
    message = str(refused.value)
    assert "no-such-bucket" in message and s3_server.endpoint in message, message

    wrong = _options(s3_server) | {"aws_secret_access_key": "not-the-key"}
    with pytest.raises(RemoteStateError) as refused:
        RemoteState(f"s3://{s3_bucket}/p", tmp_path / "b", wrong).restore()
    message = str(refused.value)
    assert s3_bucket in message and s3_server.endpoint in message, message


def test_a_local_path_is_not_a_remote_state(tmp_path: Path) -> None:
    with pytest.raises(RemoteStateError) as refused:
        RemoteState(str(tmp_path / "x"), tmp_path / "y", {})
    assert "local path" in str(refused.value)


def test_arroyo_run_keeps_its_state_in_a_bucket(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    out = tmp_path / "out"
    query = tmp_path / "q.sql"
    query.write_text(_script(out))
    endpoint = s3_server.endpoint.removeprefix("http://")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    arroyo = [sys.executable, "-m", "arroyo_cli.main", "run", "--state-dir"]
    done = subprocess.run(
        [*arroyo, f"s3::http://{endpoint}/{s3_bucket}/cli", str(query)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sum(int(str(r["n"])) for r in _rows(out)) == EVENTS
    assert any("/checkpoint/commits/" in k for k in _keys(s3_server, f"{s3_bucket}/cli"))

    refused = subprocess.run(
        [*arroyo, f"s3::http://{endpoint}/no-such-bucket/cli", str(query)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "error[state_location]" in refused.stderr
    assert "bucket 'no-such-bucket'" in refused.stderr and endpoint in refused.stderr


def test_a_directory_cut_short_while_stored_is_not_restored(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    # A stage's batch directory is durable once whole: one whose upload failed part-way (its
    # writer never went on) must not come back as if it were. The second file cannot be read
    # (the kernel refuses to read this process's memory at address 0), after the first is in.
    url = f"s3://{s3_bucket}/cut"
    first = tmp_path / "first"
    whole, cut = first / "stages" / "s" / "1", first / "stages" / "s" / "2"
    for directory in (whole, cut):
        directory.mkdir(parents=True)
        (directory / "a.json").write_text("a\n")
    (whole / "b.json").write_text("b\n")
    (cut / "b.json").symlink_to("/proc/self/mem")
    remote = RemoteState(url, first, _options(s3_server))
    remote.push(whole)
    with pytest.raises(RemoteStateError):
        remote.push(cut)
    assert f"{s3_bucket}/cut/stages/s/2/a.json" in _keys(s3_server, f"{s3_bucket}/cut")

    second = tmp_path / "second"
    RemoteState(url, second, _options(s3_server)).restore()
    assert sorted(p.name for p in (second / "stages" / "s" / "1").iterdir()) == [
        "a.json",
        "b.json",
    ]
    assert not (second / "stages" / "s" / "2").exists()


def test_a_stage_between_queries_is_consumed_in_the_bucket_too(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    # The stage's reader runs in a process Spark starts for Python data sources: what it
    # consumed is marked, and removed, in the bucket as on the local disk.
    url = f"s3://{s3_bucket}/pipelines/staged"
    local = tmp_path / "work"
    script = (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', "
        "message_count = '300');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\n"
        "CREATE VIEW inner_agg AS SELECT counter % 3 AS k, count(*) AS v FROM impulse "
        "GROUP BY 1 HAVING count(*) > 2;\n"
        "INSERT INTO out SELECT sum(v) AS total FROM inner_agg;"
    )
    program = spark_planner(spark, state_dir=local).plan(script)
    assert any(s.connector == "__stage" for s in program.sources), "no stage to test"
    runner = _runner(spark, program, local, url, s3_server)
    runner.start()
    assert runner.wait(timeout=300), "the run did not finish"
    keys = _keys(s3_server, f"{s3_bucket}/pipelines/staged")
    marks = [k for k in keys if k.endswith("/_consumed")]
    assert marks, [k for k in keys if "/checkpoint/" not in k]
    fs = s3_server.filesystem()
    for mark in marks:
        with fs.open_input_stream(mark) as f:
            consumed = int(f.read().decode())
        stage = mark.removesuffix("/_consumed")
        left = {
            k.removeprefix(stage + "/").split("/")[0]
            for k in keys
            if k.startswith(stage + "/batch-")
        }
        assert not [b for b in left if int(b.removeprefix("batch-")) <= consumed], (
            f"consumed up to {consumed}, still in the bucket: {sorted(left)}"
        )
