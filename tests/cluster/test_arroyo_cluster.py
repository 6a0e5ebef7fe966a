"""`arroyo cluster` itself: ready when it says so (a pipeline sent the moment the api answers is
created, not refused while the compiler starts), the four services as its children, a crashed one
started again, and everything (workers included) stopped on Ctrl-C. One cluster start serves
every check: it costs about half a minute of CPU."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arroyo.tls import client_context
from tests.cluster.harness import SERVICES, WARM_WORKER, Cluster

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.s3,
    pytest.mark.xdist_group("cluster"),
]


def children(pid: int) -> dict[int, str]:
    """Every descendant of ``pid``, with its command line."""
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        out = subprocess.run(
            ["pgrep", "-P", str(parent)], capture_output=True, text=True, check=False
        )
        for child in map(int, out.stdout.split()):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().decode()
            except OSError:
                continue
            todo.append(child)
    return found


def service_pid(tree: dict[int, str], name: str) -> int:
    return next((p for p, cmd in tree.items() if cmd.endswith(f"arroyo_cli.main\0{name}\0")), 0)


# Bounded, so that the job finishes and the rest of the test has the cluster to itself.
QUERY = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10', message_count = '5');
CREATE TABLE out WITH (connector = 'blackhole', type = 'sink');
INSERT INTO out SELECT counter FROM impulse;"""


# With --https: the api serves HTTPS with the certificate the cluster made for it (mutual TLS
# between the services is the default, --https or not).
# With --s3: the cluster runs an S3 server and keeps its checkpoints there, as nodes that share
# no disk would (the same services otherwise; tests/cluster/test_cluster.py moves a job
# between two such nodes).
def test_cluster_is_ready_when_it_says_so_supervises_and_stops(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
    # The api waits 60 s for a starting compiler by default; a compiler starting beside three
    # other services on a loaded 2-core machine can come close, so this test gives it more.
    # Waiting itself is what is tested here; the 503 once the wait is over is tests/api's.
    cluster.env["ARROYO__API__COMPILER_WAIT_S"] = "180"
    # Its node as `arroyo cluster`'s runs, with a warm worker: one of the workers Ctrl-C stops.
    cluster.env.update(WARM_WORKER)
    ready_url = f"https://127.0.0.1:{cluster.env['ARROYO__API__PORT']}/"
    cluster.api_url = cluster.api_url.replace("http://", "https://", 1)
    log = tmp_path / "logs" / "cluster.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "arroyo_cli.main", "cluster", "--s3", "--https"],
        env=cluster.env,
        stdin=subprocess.DEVNULL,
        stderr=log.open("wb"),
        cwd=tmp_path,
    )
    cluster.processes["cluster"] = process
    try:
        # Its CA and the services' certificates, made before any service starts; the api
        # serves HTTPS with its own (--https), which a client trusting the CA accepts.
        tls = tmp_path / "data" / "tls"
        made = [tls / f"{name}.pem" for name in SERVICES]
        cluster.until("the cluster's certificates", lambda: all(map(Path.exists, made)), timeout=30)
        cluster.ssl_context = client_context(tls / "ca.pem")
        for name in SERVICES:
            assert stat.S_IMODE((tls / f"{name}-key.pem").stat().st_mode) == 0o600
        cluster.until("the api to be live", lambda: cluster.call("GET", "/ping"), timeout=120)
        # The moment the api is live, the compiler is still starting Spark: the cluster said it
        # is starting, and not yet that it is ready. (The log is read before the status, so a
        # status that is not ready proves the ready line had not been printed.)
        early_log = log.read_text()
        status = cluster.call("GET", "/status")
        assert status["ready"] is False, status
        assert status["services"]["compiler"]["state"] == "starting", status
        assert status["services"]["compiler"]["detail"], status
        assert "arroyo cluster: starting" in early_log, early_log
        assert ready_url not in early_log, early_log

        # A pipeline sent now waits for the compiler, rather than getting a 503.
        code, pipeline = cluster.request(
            "POST", "/pipelines", {"name": "first", "query": QUERY}, timeout=240
        )
        assert code == 201, pipeline

        def ready() -> dict[str, Any] | None:
            status = cluster.call("GET", "/status")
            return status if status["ready"] else None

        status = cluster.until("the cluster to be ready", ready, timeout=120)
        services = status["services"]
        assert {s["state"] for s in services.values()} == {"ready"}, status
        assert services["nodes"]["count"] == 1 and services["nodes"]["task_slots"] == 4, status
        cluster.until("the ready line", lambda: ready_url in log.read_text(), timeout=30)
        assert "arroyo cluster: ready after" in log.read_text()
        cluster.wait_state(pipeline["id"], "Finished")
        # Its checkpoints are in the S3 server's bucket (a directory of its posix backend), not
        # under the data directory's checkpoints.
        bucket = tmp_path / "data" / "s3" / "arroyo" / "checkpoints"
        assert list(bucket.glob("*/run-0/queries/*/checkpoint/commits/0")), log.read_text()
        assert not (tmp_path / "data" / "checkpoints").exists()

        for name in SERVICES:
            cluster.wait_ready(name)
        tree = children(process.pid)
        assert all(service_pid(tree, name) for name in SERVICES)

        # A service that dies is started again.
        controller = service_pid(tree, "controller")
        os.kill(controller, signal.SIGKILL)
        cluster.until(
            "a new controller",
            lambda: service_pid(children(process.pid), "controller") != controller,
        )
        cluster.wait_ready("controller")

        tree = children(process.pid)
        process.send_signal(signal.SIGINT)
        assert process.wait(120) == 0
        del cluster.processes["cluster"]
        # The services' JVMs exit a moment after the processes that started them.
        cluster.until(
            "every process of the cluster to exit",
            lambda: not [p for p in tree if Path(f"/proc/{p}").exists()],
            timeout=60,
        )
    finally:
        cluster.shutdown()
