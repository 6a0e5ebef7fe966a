"""Checkpoints in an object store (checkpoint_url on the S3 server): two nodes that share no
disk (each its own data directory, each worker its own working copy of the state); the node
whose worker holds the job is killed with -9 and stays down, and the job resumes on the other
one from the checkpoints in the bucket, every window written once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from arroyo.testing.ports import free_port
from arroyo.testing.s3 import REGION, S3Server
from tests.cluster.harness import Cluster, running_cluster
from tests.cluster.test_cluster import assert_exactly_once, create, windows

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.xdist_group("cluster"),
]


def _node_workers(cluster: Cluster, admin_port: str) -> list[dict[str, object]]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/status", timeout=5) as r:
        return list(json.loads(r.read())["workers"])


def test_a_job_resumes_on_another_node_from_checkpoints_on_s3(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    env = {
        "ARROYO__CHECKPOINT_URL": f"s3://{s3_bucket}/checkpoints",
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
        "AWS_ENDPOINT": s3_server.endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    root = tmp_path / "cluster"
    with running_cluster(root, f"sqlite:///{tmp_path / 'a.db'}", env) as cluster:
        second = {
            "ARROYO__NODE__PORT": str(free_port()),
            "ARROYO__NODE__ADMIN_PORT": str(free_port()),
            "ARROYO__DATA_DIR": str(root / "machine-b"),
        }
        cluster.start("node-b", ["node"], env=second)
        admin = {
            "node": cluster.env["ARROYO__NODE__ADMIN_PORT"],
            "node-b": second["ARROYO__NODE__ADMIN_PORT"],
        }
        cluster.until(
            "the second node", lambda: _node_workers(cluster, admin["node-b"]) is not None
        )

        output = tmp_path / "out" / "windows.json"
        pid = create(cluster, output)
        cluster.wait_state(pid, "Running")
        cluster.until("two windows", lambda: len(windows(output)) >= 2)
        first = cluster.job(pid)

        def holder() -> str | None:
            for name, port in admin.items():
                if name not in cluster.processes:
                    continue  # killed
                workers = _node_workers(cluster, port)
                if any(w["worker_id"] == cluster.job(pid)["worker_id"] for w in workers):
                    return name
            return None

        node = cluster.until("the node holding the job", holder)
        worker = next(
            int(str(w["pid"]))
            for w in _node_workers(cluster, admin[node])
            if w["worker_id"] == first["worker_id"]
        )
        assert cluster.stop(node, signal.SIGKILL) == -signal.SIGKILL
        cluster.until("its worker gone", lambda: not os.path.exists(f"/proc/{worker}"))
        other = next(n for n in admin if n != node)
        cluster.until(
            "a new generation on the other node",
            lambda: (
                (j := cluster.job(pid))["state"] == "Running"
                and j["generation"] > first["generation"]
                and holder() == other
            ),
        )
        seen = len(windows(output))
        cluster.until("windows after the move", lambda: len(windows(output)) >= seen + 2)
        cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
        cluster.wait_state(pid, "Stopped")
        assert_exactly_once(windows(output))

    # The checkpoints are in the bucket, as a plain listing shows, and on no machine's disk.
    selector = pafs.FileSelector(f"{s3_bucket}/checkpoints", recursive=True)
    keys = [i.path for i in s3_server.filesystem().get_file_info(selector) if i.is_file]
    assert any("/checkpoint/commits/" in k for k in keys), keys
    assert any("/checkpoint/state/" in k for k in keys), keys
    assert not (root / "data" / "checkpoints").exists()
    assert not (root / "machine-b" / "checkpoints").exists()
