"""A connection profile's secret stays out of everything but the store (sealed) and the worker's
memory: the services' logs and traces (the cluster prints its spans), the worker's log, the
program a worker is sent and writes to its state, the job's errors, the database file.

Two secrets are planted: the password of a Redis user made for the test, in a profile a
pipeline writes through (so the worker must have fetched it: the rows arrive), and a wrong one,
in a profile whose pipeline fails on it (so its error is written, and must not say it).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from arroyo.testing.redis import RedisServer
from tests.cluster.harness import Cluster

pytestmark = [pytest.mark.redis, pytest.mark.xdist_group("cluster")]


def _profile(
    cluster: Cluster, name: str, redis_server: RedisServer, username: str, password: str
) -> None:
    config = {"address": redis_server.address, "username": username, "password": password}
    cluster.call(
        "POST", "/connection_profiles", {"name": name, "connector": "redis", "config": config}
    )


def _pipeline(cluster: Cluster, profile: str, key: str) -> str:
    query = (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '50', "
        "message_count = '20');\n"
        f"CREATE TABLE out WITH (connector = 'redis', connection_profile = '{profile}', "
        f"type = 'sink', format = 'json', target = 'list', 'target.key_prefix' = '{key}');\n"
        "INSERT INTO out SELECT counter FROM impulse;\n"
    )
    return str(cluster.call("POST", "/pipelines", {"name": profile, "query": query})["id"])


def _files_holding(root: Path, secret: bytes) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and secret in (data := path.read_bytes()):
            at = data.index(secret)
            found.append(f"{path.relative_to(root)}: ...{data[max(0, at - 300) : at + 60]!r}")
    return found


def test_a_profiles_secret_is_in_no_log_trace_error_or_program(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    import redis

    tag = uuid.uuid4().hex[:8]
    # A user of this test's own, with a password no other test has written anywhere (the
    # server's own password is in other tests' query texts, which the store keeps as written).
    user, password, wrong = f"u_{tag}", f"right-{uuid.uuid4().hex}", f"wrong-{uuid.uuid4().hex}"
    admin = redis.Redis(redis_server.host, redis_server.port, password=redis_server.password)
    admin.acl_setuser(
        user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"]
    )
    _profile(cluster, f"good_{tag}", redis_server, user, password)
    _profile(cluster, f"bad_{tag}", redis_server, user, wrong)

    good = _pipeline(cluster, f"good_{tag}", f"s-{tag}")
    bad = _pipeline(cluster, f"bad_{tag}", f"f-{tag}")
    cluster.until("the rows in Redis", lambda: admin.llen(f"s-{tag}") >= 20 or None)
    cluster.wait_state(good, "Finished", "Stopped")
    failed = cluster.wait_state(bad, "Failed")

    job = f"/pipelines/{bad}/jobs/{failed['id']}"
    errors = cluster.call("GET", f"{job}/errors")["data"]
    told = [str(failed.get("failure_message"))]
    said = " ".join(told + [e["message"] + str(e.get("details")) for e in errors])
    assert "redis" in said.lower(), said  # the failure is told, naming the system...
    assert wrong not in said  # ...and not the secret
    for pipeline in (good, bad):
        assert password not in str(cluster.call("GET", f"/pipelines/{pipeline}"))

    # Every file of the cluster: each service's log (with its spans), each worker's log, every
    # job's state (the program a worker writes there), the SQLite database.
    root = cluster.root
    assert any(root.rglob("program.json")), "no worker wrote its program: nothing was checked"
    logs = [p.read_text(errors="replace") for p in (root / "logs").glob("*")]
    assert any('"trace_id"' in text for text in logs), "no spans in the logs: nothing was checked"
    # The program a worker is sent refers to the secret: the worker asked the controller for
    # its value (had the program carried it, the worker would not have).
    workers = [p.read_text(errors="replace") for p in root.rglob("worker_*.log")]
    assert any("ControllerService/GetJobSecrets" in text for text in workers)
    for secret in (password.encode(), wrong.encode()):
        assert _files_holding(root, secret) == []
