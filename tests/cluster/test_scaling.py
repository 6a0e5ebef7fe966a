"""Per-service scaling, end to end: two apis behind one port (``api.reuse_port``), two
compilers, two controllers (one active, holding the lease; one standby), three nodes, on
PostgreSQL, with mutual TLS between them and HTTPS on the api. Pipelines spread over the nodes;
kill -9 one replica of each kind in turn, and a client that retries loses no request, and no
pipeline is lost: each keeps its output going and, at the end, has written every window once.

One start-up for every phase (processes are the cost here: two compiler JVMs and a worker JVM
per pipeline), in one test."""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arroyo.testing.ports import free_port
from tests.cluster.harness import Cluster, fresh_postgres_database
from tests.cluster.test_cluster import WINDOWED, assert_exactly_once, windows, worker_node
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]

LEASE_TTL_S = 4.0
# A standby takes over within 1.25 lease times of the last renewal; the rest is the time to
# bind its port and answer /status on a busy machine.
TAKEOVER_BOUND_S = 15.0


def retried(call: Callable[[], Any], attempts: int = 5) -> tuple[Any, int]:
    """What ``call`` returns, trying again (at once) when the connection fails: a client of
    the api as it should be written. Returns the answer and the number of failed attempts."""
    for failed in range(attempts):
        try:
            return call(), failed
        except (OSError, http.client.HTTPException):
            if failed == attempts - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def scaled(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, fresh_postgres_database(postgres_url))
    compilers = {"compiler-a": free_port(), "compiler-b": free_port()}
    controllers = {"controller-a": free_port(), "controller-b": free_port()}
    cluster.env.update(
        {
            "ARROYO__API__REUSE_PORT": "true",
            "ARROYO__COMPILER__ADDRESS": ",".join(f"127.0.0.1:{p}" for p in compilers.values()),
            "ARROYO__CONTROLLER__ADDRESS": ",".join(f"127.0.0.1:{p}" for p in controllers.values()),
            "ARROYO__CONTROLLER__LEASE_TTL_S": str(LEASE_TTL_S),
        }
    )
    cluster.use_tls()
    try:
        cluster.start_replica("controller-a", "controller", controllers["controller-a"])
        cluster.wait_ready("controller-a")  # it holds the lease: the second one waits
        cluster.start_replica("controller-b", "controller", controllers["controller-b"])
        for name, port in compilers.items():
            cluster.start_replica(name, "compiler", port)
        for name in ("node-a", "node-b", "node-c"):
            cluster.start_replica(name, "node", free_port())
        for name in ("api-a", "api-b"):
            cluster.start_replica(name, "api")
        for name in ("compiler-a", "compiler-b", "node-a", "node-b", "node-c", "api-a", "api-b"):
            cluster.wait_ready(name)
        yield cluster
    finally:
        cluster.shutdown()


def test_replicas_share_the_work_and_any_one_may_die(scaled: Cluster, tmp_path: Path) -> None:
    cluster = scaled
    started = time.monotonic()
    standby = cluster.admin_status("controller-b")
    assert (standby["state"], standby["ready"]) == ("standby", False), standby
    assert standby["grpc_port"] is None  # it does not listen until it holds the lease
    active = cluster.admin_status("controller-a")
    assert active["ready"] and active["lease"]["held"], active

    # Three pipelines spread over the three nodes: one worker each.
    outputs = {}
    for n in range(3):
        output = tmp_path / f"out-{n}" / "windows.json"
        body = {"name": f"spread-{n}", "query": WINDOWED.format(path=output), "parallelism": 1}
        pid = retried(lambda b=body: cluster.call("POST", "/pipelines", b))[0]["id"]
        outputs[pid] = output
    for pid in outputs:
        cluster.wait_state(pid, "Running")
    placed = {
        pid: cluster.until("its worker", lambda p=pid: worker_node(cluster, p))[0]
        for pid in outputs
    }
    assert sorted(placed.values()) == ["node-a", "node-b", "node-c"], placed
    for output in outputs.values():
        cluster.until("windows", lambda o=output: len(windows(o)) >= 2)

    # kill -9 one api while a client keeps calling: each call succeeds, some after a retry.
    failures: list[int] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            failures.append(retried(lambda: cluster.call("GET", "/pipelines"))[1])

    calling = threading.Thread(target=client)
    calling.start()
    wait_until("calls before the kill", lambda: len(failures) >= 5, 60)
    assert cluster.stop("api-a", signal.SIGKILL) == -signal.SIGKILL
    before = len(failures)
    wait_until("calls after the kill", lambda: len(failures) >= before + 6, 60)
    stop.set()
    calling.join(30)
    assert len(failures) > 10, failures  # calls ran before and after, and none failed for good
    assert cluster.admin_status("api-b")["ready"]

    # kill -9 one compiler while queries are validated: each validation succeeds, the channel
    # having sent a call the dead one took to the other.
    query = WINDOWED.format(path=tmp_path / "never.json")
    answers: list[Any] = []

    def validate() -> None:
        answers.append(
            retried(lambda: cluster.call("POST", "/pipelines/validate_query", {"query": query}))[0]
        )

    threads = [threading.Thread(target=validate) for _ in range(4)]
    for t in threads:
        t.start()
    assert cluster.stop("compiler-a", signal.SIGKILL) == -signal.SIGKILL
    for t in threads:
        t.join(60)
    for _ in range(3):
        validate()
    assert len(answers) == 7 and not any(a["errors"] for a in answers), answers

    # kill -9 the active controller: the standby takes the lease in bounded time, binds its
    # port, and adopts the running pipelines; their output goes on.
    seen = {pid: len(windows(o)) for pid, o in outputs.items()}
    killed = time.monotonic()
    assert cluster.stop("controller-a", signal.SIGKILL) == -signal.SIGKILL
    cluster.until(
        "the standby active",
        lambda: cluster.admin_status("controller-b")["ready"],
        timeout=TAKEOVER_BOUND_S,
    )
    takeover_s = time.monotonic() - killed
    status = cluster.admin_status("controller-b")
    assert status["lease"]["term"] == 2 and status["grpc_port"], status
    for pid, output in outputs.items():
        cluster.until(
            "windows after the take-over", lambda o=output, s=seen[pid]: len(windows(o)) >= s + 2
        )
        assert cluster.wait_state(pid, "Running")

    # A machine lost, kill -9 of a node and its worker (a worker outlives its node alone): its
    # pipeline is scheduled on another, and goes on from its checkpoint.
    victim_pid, victim = next(iter(placed.items()))
    before = cluster.job(victim_pid)
    worker = worker_node(cluster, victim_pid)
    assert worker is not None and worker[0] == victim
    assert cluster.stop(victim, signal.SIGKILL) == -signal.SIGKILL
    os.kill(worker[1], signal.SIGKILL)
    moved = cluster.until(
        "the pipeline on another node",
        lambda: (
            (j := cluster.job(victim_pid))["state"] == "Running"
            and j["generation"] > before["generation"]
            and worker_node(cluster, victim_pid)
        ),
    )
    assert moved[0] != victim
    seen = len(windows(outputs[victim_pid]))
    cluster.until(
        "windows on the other node", lambda: len(windows(outputs[victim_pid])) >= seen + 2
    )

    # None lost: every pipeline is there, running, and has written every window once.
    listed = {p["id"] for p in cluster.call("GET", "/pipelines?limit=1000")["data"]}
    assert set(outputs) <= listed
    for pid in outputs:
        cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    for pid, output in outputs.items():
        cluster.wait_state(pid, "Stopped")
        assert_exactly_once(windows(output))
    print(
        f"\nscaling: take-over {takeover_s:.1f} s, api calls {len(failures)} "
        f"({sum(failures)} retried), phases {time.monotonic() - started:.0f} s"
    )
