"""`arroyo cluster` itself: the four services as its children, a crashed one started again, and
everything (workers included) stopped on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.harness import SERVICES, Cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
    return next((p for p, cmd in tree.items() if cmd.endswith(f"arroyo.cli.main\0{name}\0")), 0)


def test_cluster_supervises_and_stops_its_services(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, f"sqlite:///{tmp_path / 'a.db'}")
    log = tmp_path / "logs" / "cluster.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "arroyo.cli.main", "cluster"],
        env=cluster.env,
        stdin=subprocess.DEVNULL,
        stderr=log.open("wb"),
        cwd=tmp_path,
    )
    cluster.processes["cluster"] = process
    try:
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
        assert f"http://127.0.0.1:{cluster.env['ARROYO__API__PORT']}/" in log.read_text()
        # The services' JVMs exit a moment after the processes that started them.
        cluster.until(
            "every process of the cluster to exit",
            lambda: not [p for p in tree if Path(f"/proc/{p}").exists()],
            timeout=60,
        )
    finally:
        cluster.shutdown()
