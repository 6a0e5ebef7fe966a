"""A pipeline through the cluster whose workers run on a Spark standalone master and worker,
both started on loopback from the pyspark install, with its checkpoints on the S3 server: the
executors on the Spark worker write the window's state there, as executors on other machines
must (the recovery test in tests/cluster/test_cluster.py moves a job between nodes)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyarrow import fs as pafs

from arroyo.testing import processes
from arroyo.testing.ports import free_port
from arroyo.testing.s3 import REGION, S3Server
from tests.cluster.harness import running_cluster
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.xdist_group("cluster"),
]

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


@pytest.fixture
def spark_master(tmp_path: Path) -> Iterator[str]:
    port, web, worker_web = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(tmp_path)}
    logs = (tmp_path / "spark-master.log").open("ab")
    master = subprocess.Popen(
        [
            str(SPARK_CLASS),
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web)),
        ],
        env=env,
        stdout=logs,
        stderr=subprocess.STDOUT,
    )
    url = f"spark://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [
            str(SPARK_CLASS),
            "org.apache.spark.deploy.worker.Worker",
            url,
            *("--host", "127.0.0.1", "--cores", "2", "--memory", "2g"),
            *("--webui-port", str(worker_web), "--work-dir", str(tmp_path / "spark-work")),
        ],
        env=env,
        stdout=(tmp_path / "spark-worker.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_worker(web, tmp_path)
        yield url
    finally:
        processes.stop(worker, master, timeout=30)


def _wait_for_worker(web_port: int, logs: Path) -> None:
    import urllib.request

    def alive() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as r:
                return bool(json.loads(r.read()).get("aliveworkers", 0) >= 1)
        except OSError:
            return False

    try:
        wait_until("the Spark worker to register", alive, 120, interval=0.5)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{_tail(logs)}") from err


def _tail(directory: Path) -> str:
    return "\n".join(p.read_text()[-3000:] for p in directory.glob("spark-*.log"))


def test_pipeline_runs_on_a_standalone_spark_cluster(
    spark_master: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: S3Server,
    s3_bucket: str,
) -> None:
    # The cluster's services take their environment from this process's.
    monkeypatch.setenv("ARROYO__WORKER__SPARK_MASTER", spark_master)
    monkeypatch.setenv("ARROYO__CHECKPOINT_URL", f"s3://{s3_bucket}/checkpoints")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_ENDPOINT", s3_server.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with running_cluster(tmp_path / "cluster", f"sqlite:///{tmp_path / 'a.db'}") as cluster:
        output = tmp_path / "out.json"
        query = f"""
        CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000',
            message_count = '500', event_time_interval = '1 millisecond');
        CREATE TABLE out WITH (connector = 'single_file', path = '{output}',
            format = 'json', type = 'sink');
        INSERT INTO out SELECT counter % 5 AS k, count(*) AS n
        FROM impulse GROUP BY tumble(interval '100 milliseconds'), counter % 5;
        """
        pid = cluster.call("POST", "/pipelines", {"name": "standalone", "query": query})["id"]
        job = cluster.wait_state(pid, "Finished", "Failed", timeout=300)
        assert job["state"] == "Finished", job
        rows = [json.loads(line) for line in output.read_text().splitlines()]
        assert sum(r["n"] for r in rows) == 500
        assert {r["k"] for r in rows} == {0, 1, 2, 3, 4}
        # The executors ran on the standalone worker, not inside the driver.
        apps = list((tmp_path / "spark-work").glob("app-*/*/stderr"))
        assert apps, _tail(tmp_path)
    # The window's state, written by those executors, is in the bucket.
    selector = pafs.FileSelector(f"{s3_bucket}/checkpoints", recursive=True)
    keys = [i.path for i in s3_server.filesystem().get_file_info(selector) if i.is_file]
    assert any("/checkpoint/state/0/" in k for k in keys), keys
