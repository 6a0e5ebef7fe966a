"""A node is a supervisor, not its workers' lifeline: kill -9 the node under a running
pipeline, and its worker runs on; the node started again in its place (as ``arroyo cluster``
or systemd would) adopts the worker, and the job stays Running in the same generation, on the
same worker, its output advancing. Stopping the pipeline then stops the adopted worker, through
the node that adopted it. On the session's cluster (conftest.py), its node started with a warm
worker for the first test: the one test of a job handed to a warm worker, and of the next one
started behind it, which ends with its node."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from arroyo.node.records import process_start_time
from tests.cluster.harness import WARM_WORKER, Cluster
from tests.cluster.test_cluster import create, windows, worker_node

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]


@pytest.fixture
def warm_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The session's cluster, its node started again keeping a warm worker (the test clusters
    keep none: harness.Cluster), and started as before after the test, whatever happened."""
    (node,) = cluster.nodes()
    command, env = cluster.launched[node]
    try:
        assert cluster.stop(node) == 0
        cluster.start(node, command, {**env, **WARM_WORKER})
        cluster.wait_ready(node)
        yield cluster
        cluster.restore()
        cluster.stop_pipelines()
    finally:
        if node in cluster.processes:
            cluster.stop(node)
        cluster.start(node, command, env)
        cluster.wait_ready(node)


def test_a_worker_outlives_its_node_and_the_restarted_node_adopts_it(
    warm_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = warm_cluster
    (node,) = cluster.nodes()
    first_warm = cluster.until("the warm worker", lambda: _warm_worker(cluster, node))
    output = tmp_path / "out" / "windows.json"
    pid = create(cluster, output, name="outlives-node")
    cluster.wait_state(pid, "Running")
    cluster.until("two windows", lambda: len(windows(output)) >= 2)
    before = cluster.job(pid)
    node, worker = cluster.until("the node holding the job", lambda: worker_node(cluster, pid))
    # The job went to the warm worker, and the node started the next one behind it.
    assert worker == first_warm
    started_at = process_start_time(worker)
    warm = cluster.until("the warm worker", lambda: _warm_worker(cluster, node))

    assert cluster.stop(node, signal.SIGKILL) == -signal.SIGKILL
    seen = len(windows(output))
    # With no node at all, the worker goes on writing; the warm worker, which had no job, ends
    # with its node (EOF on its standard input).
    cluster.until("windows with the node down", lambda: len(windows(output)) >= seen + 1)
    assert process_start_time(worker) == started_at
    cluster.until("the warm worker gone", lambda: process_start_time(warm) is None)

    cluster.start(node, *cluster.launched[node])
    cluster.wait_ready(node)

    def adopted() -> dict[str, object] | None:
        listed = cluster.admin_status(node)["workers"]
        return next((w for w in listed if w["worker_id"] == before["worker_id"]), None)

    listing = cluster.until("the worker adopted", adopted)
    assert listing["pid"] == worker and listing["adopted"] is True, listing
    seen = len(windows(output))
    cluster.until("windows after the node restart", lambda: len(windows(output)) >= seen + 2)
    job = cluster.job(pid)
    assert job["state"] == "Running", job
    assert (job["generation"], job["worker_id"]) == (before["generation"], before["worker_id"])
    errors = cluster.call("GET", f"/pipelines/{pid}/jobs/{job['id']}/errors")["data"]
    assert errors == [], errors

    # force: the controller has the job's node kill its worker, by pid, as it adopted it.
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "force"})
    cluster.wait_state(pid, "Stopped")
    cluster.until("the adopted worker gone", lambda: process_start_time(worker) is None)
    # The node notices an adopted worker's exit by polling: its listing and record go then.
    record = f"{before['worker_id']}.json"
    cluster.until(
        "the adopted worker unlisted and unrecorded",
        lambda: not adopted() and not any(p.name == record for p in _records(cluster)),
    )


def _warm_worker(cluster: Cluster, node: str) -> int | None:
    """The pid of the node's warm worker (the one with no job)."""
    listed = cluster.admin_status(node)["workers"]
    return next((int(w["pid"]) for w in listed if not w["job_id"]), None)


def _records(cluster: Cluster) -> list[Path]:
    return list((cluster.root / "data" / "workers").glob("*/*.json"))


def test_a_node_stopped_cleanly_stops_its_workers(cluster: Cluster, tmp_path: Path) -> None:
    """SIGTERM (an operator's stop, ``arroyo cluster``'s Ctrl-C) is not a crash: the node stops
    the workers it runs, and their jobs recover on the node started after it."""
    output = tmp_path / "out" / "windows.json"
    pid = create(cluster, output, name="node-stopped")
    cluster.wait_state(pid, "Running")
    before = cluster.job(pid)
    node, worker = cluster.until("the node holding the job", lambda: worker_node(cluster, pid))
    assert cluster.stop(node) == 0
    assert process_start_time(worker) is None  # the node waited for it to exit
    cluster.start(node, *cluster.launched[node])
    cluster.wait_ready(node)
    cluster.wait_generation_after(pid, before["generation"])
    seen = len(windows(output))
    cluster.until("windows after the restart", lambda: len(windows(output)) >= seen + 1)
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "immediate"})
    cluster.wait_state(pid, "Stopped")
