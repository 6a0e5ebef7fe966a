"""A warm `arroyo cluster`: POST /pipelines -> Running, and -> first output row, for a trivial
query; and the idle cluster's memory (every process together).

.venv/bin/python bench/cluster.py [--repeat 3]

Starts `arroyo cluster` (SQLite, local Spark) in a temporary directory on free ports, waits
until it is idle with its warm worker up, then creates, times, stops and deletes one pipeline
per run. Prints; never fails on a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from arroyo.testing.ports import service_ports

QUERY = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '100');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json', type = 'sink');
INSERT INTO out SELECT counter FROM impulse;
"""
SERVICES = ("api", "controller", "compiler", "node")
# The warm worker starts a JVM once the node is up; give it time before measuring.
WARM_UP_S = 20.0


def call(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        text = response.read()
    return json.loads(text) if text else None


def wait(what: str, probe: Any, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = probe()
        except (urllib.error.URLError, ConnectionError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants (JVMs included), in MB."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    total_kb, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="run in this directory and keep its logs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arroyo-bench-") as scratch:
        tmp = str(args.keep or scratch)
        env = {
            **os.environ,
            "ARROYO__DATA_DIR": f"{tmp}/data",
            "ARROYO__DATABASE__URL": f"sqlite:///{tmp}/arroyo.db",
            "ARROYO__LOGGING__LEVEL": os.environ.get("ARROYO__LOGGING__LEVEL", "warning"),
            **service_ports(SERVICES),
        }
        base = f"http://127.0.0.1:{env['ARROYO__API__PORT']}/api/v1"
        cluster = subprocess.Popen(
            [sys.executable, "-m", "arroyo_cli.main", "cluster"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(f"{tmp}/cluster.log", "wb"),  # noqa: SIM115
        )
        try:
            for name in SERVICES:
                port = env[f"ARROYO__{name.upper()}__ADMIN_PORT"]
                wait(name, lambda p=port: call(f"http://127.0.0.1:{p}", "GET", "/status"))
            time.sleep(WARM_UP_S)
            idle = tree_rss_mb(cluster.pid)
            running_s, first_row_s = [], []
            for i in range(args.repeat):
                out = Path(tmp) / f"out-{i}.json"
                started = time.monotonic()
                pipeline = call(
                    base,
                    "POST",
                    "/pipelines",
                    {"name": f"bench-{i}", "query": QUERY.format(out=out)},
                )
                pid = pipeline["id"]

                def state(pid: str = pid) -> str:
                    return str(call(base, "GET", f"/pipelines/{pid}/jobs")["data"][0]["state"])

                wait("Running", lambda: state() == "Running")
                running_s.append(time.monotonic() - started)
                wait("the first row", lambda out=out: out.exists() and out.stat().st_size > 0)
                first_row_s.append(time.monotonic() - started)
                call(base, "PATCH", f"/pipelines/{pid}", {"stop": "immediate"})
                wait("Stopped", lambda: state() == "Stopped")
                call(base, "DELETE", f"/pipelines/{pid}")
                time.sleep(WARM_UP_S)  # the next warm worker
        finally:
            cluster.send_signal(signal.SIGINT)
            cluster.wait(120)
    print(f"warm arroyo cluster, trivial impulse -> file pipeline, {args.repeat} runs:")
    print(
        f"  POST /pipelines -> Running:       median {statistics.median(running_s):.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in running_s)})"
    )
    print(
        f"  POST /pipelines -> first output:  median {statistics.median(first_row_s):.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in first_row_s)})"
    )
    print(f"  idle cluster memory (all processes, warm worker included): {idle:.0f} MB RSS")


if __name__ == "__main__":
    main()
