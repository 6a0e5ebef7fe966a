"""The control plane end to end: real services as separate processes, real Spark workers, a
real database (SQLite and PostgreSQL), driven through the REST API as a user drives it.

On SQLite, the embedded default, the session's cluster (conftest.py). On PostgreSQL, a cluster
laid out as in production: checkpoints in an object store (``checkpoint_url`` on the S3
server) and two nodes that share no disk (each its own data directory, each worker its own
working copy of the state)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from arroyo.testing.ports import free_port
from arroyo.testing.s3 import REGION, S3Server
from tests.cluster.harness import (
    ApiError,
    Cluster,
    fresh_postgres_database,
    running_cluster,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]


# 100 events per second of event time, one per 10 ms: every one-second window counts 100.
WINDOWED = """
CREATE TABLE impulse WITH (
    connector = 'impulse', event_rate = '100', event_time_interval = '10 milliseconds'
);
CREATE TABLE counts WITH (connector = 'single_file', path = '{path}', format = 'json',
    type = 'sink');
INSERT INTO counts
SELECT tumble(interval '1 second') AS window, count(*) AS n, min(counter) AS first
FROM impulse GROUP BY window;
"""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The session's cluster on SQLite (see conftest.py), or one on PostgreSQL for the module's
    tests on it."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_cluster")
        return
    s3_server: S3Server = request.getfixturevalue("s3_server")
    bucket = f"cluster-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    env = {
        "ARROYO__CHECKPOINT_URL": f"s3://{bucket}/checkpoints",
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
        "AWS_ENDPOINT": s3_server.endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    root = tmp_path_factory.mktemp("cluster-postgres")
    database_url = fresh_postgres_database(request.getfixturevalue("postgres_url"))
    with running_cluster(root, database_url, env) as c:
        c.bucket = bucket
        second = {
            "ARROYO__NODE__PORT": str(free_port()),
            "ARROYO__NODE__ADMIN_PORT": str(free_port()),
            "ARROYO__DATA_DIR": str(root / "machine-b"),
        }
        c.start("node-b", ["node"], env=second)
        c.wait_ready("node-b")
        yield c


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster) -> Iterator[None]:
    """The recovery test stops and kills services: the next test gets every service back, and
    no pipeline a failed test left running."""
    yield
    cluster.restore()
    cluster.stop_pipelines()


def windows(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_exactly_once(rows: list[dict[str, object]]) -> None:
    """Consecutive one-second windows, each written once and whole: no gap, no duplicate.
    (The first window is partial: the source started part-way into it.)"""
    counted = sorted((int(str(r["first"])), int(str(r["n"]))) for r in rows)
    assert counted[0][0] == 0, counted
    for (first, n), (following, _) in itertools.pairwise(counted):
        assert following == first + n, f"gap or duplicate after counter {first}: {counted}"
    assert all(n == 100 for _, n in counted[1:]), counted


def create(cluster: Cluster, output: Path, name: str = "windows") -> str:
    pipeline = cluster.call(
        "POST",
        "/pipelines",
        {"name": name, "query": WINDOWED.format(path=output), "parallelism": 1},
    )
    return str(pipeline["id"])


# The lifecycle on the embedded default, SQLite (what `arroyo cluster` runs on): PostgreSQL's
# store is covered by tests/store's own tests and, through the services, by the recovery test
# below (each run of the lifecycle is about three minutes of the CI's time).
@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
def test_lifecycle_through_the_api(cluster: Cluster, tmp_path: Path) -> None:
    output = tmp_path / "out" / "windows.json"
    pid = create(cluster, output)
    cluster.wait_state(pid, "Running")
    cluster.until("two checkpoints", lambda: len(cluster.checkpoints(pid)) >= 2)
    cluster.until("three windows", lambda: len(windows(output)) >= 3)
    job = cluster.job(pid)
    metrics = cluster.call("GET", f"/pipelines/{pid}/jobs/{job['id']}/metrics")
    assert metrics["samples"], metrics
    # Each node of the graph over time, as the worker reported it: the impulse's rows, those
    # the sink took, and the window's state under the sink.
    groups = f"/pipelines/{pid}/jobs/{job['id']}/operator_metric_groups"

    def peak(operator: str, name: str) -> float:
        for o in cluster.call("GET", groups)["data"]:
            for g in o["metricGroups"] if o["operatorId"] == operator else []:
                if g["name"] == name:
                    return max(m["value"] for s in g["subtasks"] for m in s["metrics"])
        return 0.0

    cluster.until("the impulse's rate", lambda: peak("impulse", "messages_sent") > 0)
    cluster.until("the sink's rate", lambda: peak("sink:counts", "messages_recv") > 0)
    operators = {o["operatorId"] for o in cluster.call("GET", groups)["data"]}
    assert any(o.startswith("sink:counts/") for o in operators), operators

    # Stop with a checkpoint, start again: the windows go on with no gap and no duplicate.
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    cluster.wait_state(pid, "Stopped")
    before = len(windows(output))
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "none"})
    cluster.wait_state(pid, "Running")
    cluster.until("more windows", lambda: len(windows(output)) >= before + 2)

    # Stop at once, restart through the restart endpoint, delete once stopped.
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "immediate"})
    cluster.wait_state(pid, "Stopped")
    with pytest.raises(ApiError) as running:
        cluster.call("POST", f"/pipelines/{pid}/restart", {})
        cluster.wait_state(pid, "Running")
        cluster.call("DELETE", f"/pipelines/{pid}")
    assert running.value.status == 409
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    cluster.wait_state(pid, "Stopped")
    assert_exactly_once(windows(output))

    # A new parallelism restarts a running job from a checkpoint, rescaled. (The impulse
    # source numbers its events per subtask, so its counters are not comparable across it.)
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "none"})
    job = cluster.wait_state(pid, "Running")
    cluster.call("PATCH", f"/pipelines/{pid}", {"parallelism": 2})
    cluster.wait_generation_after(pid, job["generation"])  # rescaled
    seen = len(windows(output))
    cluster.until("windows after rescaling", lambda: windows(output)[seen + 1 :])
    assert cluster.job(pid)["state"] == "Running"
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    cluster.wait_state(pid, "Stopped")
    cluster.call("DELETE", f"/pipelines/{pid}")
    with pytest.raises(ApiError) as gone:
        cluster.call("GET", f"/pipelines/{pid}")
    assert gone.value.status == 404


def worker_node(cluster: Cluster, pid: str) -> tuple[str, int] | None:
    """The node holding the job's worker, and the worker's pid, as the nodes report them on
    /status (None while no running node holds it)."""
    worker_id = cluster.job(pid)["worker_id"]
    for node in cluster.nodes():
        for w in cluster.admin_status(node)["workers"]:
            if w["worker_id"] == worker_id:
                return node, int(w["pid"])
    return None


def worker_pid(cluster: Cluster, pid: str) -> int:
    """The pid of the job's worker."""
    return cluster.until("the job's worker", lambda: worker_node(cluster, pid))[1]


# The services are killed on the production-like cluster (PostgreSQL, checkpoints in S3, two
# nodes; tests/store runs the store's own tests on both databases, and the lifecycle runs on
# SQLite).
@pytest.mark.s3
@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
def test_recovers_from_killed_worker_node_and_controller(
    cluster: Cluster, s3_server: S3Server, tmp_path: Path
) -> None:
    output = tmp_path / "out" / "windows.json"
    pid = create(cluster, output)
    cluster.wait_state(pid, "Running")
    cluster.until("two windows", lambda: len(windows(output)) >= 2)

    # kill -9 the worker mid-stream: Recovering, then Running again from the last checkpoint.
    first = cluster.job(pid)
    os.kill(worker_pid(cluster, pid), signal.SIGKILL)
    cluster.wait_generation_after(pid, first["generation"])
    seen = len(windows(output))
    cluster.until("windows after recovery", lambda: len(windows(output)) >= seen + 2)

    # Restart the controller while the job runs: the job keeps its worker and its output.
    running = cluster.job(pid)
    assert cluster.stop("controller") == 0
    cluster.start("controller")
    cluster.wait_ready("controller")
    seen = len(windows(output))
    cluster.until("windows after the controller restart", lambda: len(windows(output)) >= seen + 2)
    assert cluster.job(pid)["generation"] == running["generation"]
    assert cluster.job(pid)["state"] == "Running"

    # The machine that holds the job is lost: kill -9 its node and its worker (a worker outlives
    # its node alone: tests/cluster/test_node_restart.py). The node stays down, and once the
    # worker's heartbeats stop the job resumes on the other node (which shares no disk with it)
    # from the checkpoints in S3.
    node, worker = cluster.until("the node holding the job", lambda: worker_node(cluster, pid))
    assert cluster.stop(node, signal.SIGKILL) == -signal.SIGKILL
    os.kill(worker, signal.SIGKILL)
    cluster.until(
        "a generation on the other node",
        lambda: (
            (j := cluster.job(pid))["state"] == "Running"
            and j["generation"] > running["generation"]
            # Only the other node runs (the killed one is out of ``nodes()``).
            and worker_node(cluster, pid) is not None
        ),
    )
    seen = len(windows(output))
    cluster.until("windows on the other node", lambda: len(windows(output)) >= seen + 2)

    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    cluster.wait_state(pid, "Stopped")
    assert_exactly_once(windows(output))
    errors = cluster.call("GET", f"/pipelines/{pid}/jobs/{running['id']}/errors")["data"]
    assert any("worker" in e["message"] for e in errors), errors

    # The checkpoints are in the bucket, as a plain listing shows, and on no machine's disk.
    selector = pafs.FileSelector(f"{cluster.bucket}/checkpoints", recursive=True)
    keys = [i.path for i in s3_server.filesystem().get_file_info(selector) if i.is_file]
    assert any("/checkpoint/commits/" in k for k in keys), keys
    assert any("/checkpoint/state/" in k for k in keys), keys
    assert not (cluster.root / "data" / "checkpoints").exists()
    assert not (cluster.root / "machine-b" / "checkpoints").exists()


# Bad input is answered by the api and the compiler, whichever the database: on the embedded
# default.
@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
def test_bad_queries_and_failing_jobs_reach_the_user(cluster: Cluster, tmp_path: Path) -> None:
    bad = "CREATE TABLE t WITH (connector = 'impulse', event_rate = '1');\nSELEC * FROM t;"
    result = cluster.call("POST", "/pipelines/validate_query", {"query": bad})
    assert result["errors"] and result["errors"][0]["line"] == 2

    def pipeline_ids() -> set[str]:
        return {p["id"] for p in cluster.call("GET", "/pipelines?limit=1000")["data"]}

    before = pipeline_ids()
    with pytest.raises(ApiError) as refused:
        cluster.call("POST", "/pipelines", {"name": "bad", "query": bad})
    assert refused.value.status == 400
    assert pipeline_ids() == before

    # A job whose input is bad data with bad_data = 'fail' fails, and says why.
    source = tmp_path / "in.json"
    source.write_text('{"x": 1}\nnot json\n')
    query = f"""
    CREATE TABLE src (x BIGINT) WITH (connector = 'single_file', path = '{source}',
        format = 'json', type = 'source');
    CREATE TABLE out WITH (connector = 'single_file', path = '{tmp_path / "o.json"}',
        format = 'json', type = 'sink');
    INSERT INTO out SELECT x FROM src;
    """
    pid = cluster.call("POST", "/pipelines", {"name": "fails", "query": query})["id"]
    job = cluster.wait_state(pid, "Failed")
    assert "bad data" in job["failure_message"], job


def read_events(cluster: Cluster, path: str) -> list[tuple[str, str]]:
    """The server-sent events of ``path`` until ``done`` (or the stream's end)."""
    import urllib.request

    events, name, data = [], "message", []
    with urllib.request.urlopen(
        cluster.api_url + path, timeout=300, context=cluster.ssl_context
    ) as response:
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data.append(line.split(":", 1)[1].strip())
            elif not line:
                if data or name != "message":
                    events.append((name, "\n".join(data)))
                if name in ("done", "error"):
                    break
                name, data = "message", []
    return events


# Previews run on the embedded default: they do not touch the store differently.
@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
def test_preview_streams_a_bare_select(cluster: Cluster) -> None:
    query = """
    CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '50', message_count = '20');
    SELECT counter, counter * 2 AS doubled FROM impulse WHERE counter % 2 = 0;
    """
    pipeline = cluster.call("POST", "/pipelines/preview", {"query": query})
    job = cluster.job(pipeline["id"])
    events = read_events(cluster, f"/pipelines/{pipeline['id']}/jobs/{job['id']}/output")
    assert events[-1][0] == "done", events
    rows = [json.loads(data) for name, data in events if name == "message"]
    assert sorted(r["counter"] for r in rows) == list(range(0, 20, 2))
    assert all(r["doubled"] == 2 * r["counter"] for r in rows)
    cluster.wait_state(pipeline["id"], "Finished")
