"""Readiness and graceful shutdown of a real ``arroyo api`` process.

``/status`` answers 503 while the api starts and once it drains, 200 in between. SIGTERM with a
request in flight: the api stops taking connections and says it is draining, the request
still gets its answer, and the process exits 0. The request in flight is a connection test
against a real Redis that the test pauses (SIGSTOP), so it waits on Redis as it would on a
slow server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from arroyo.testing.ports import free_port
from arroyo.testing.redis import RedisServer
from tests.waiting import wait_until

pytestmark = pytest.mark.redis

WAIT_S = 60.0


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _status(admin: int) -> tuple[int, dict[str, Any]]:
    code, body = _get(f"http://127.0.0.1:{admin}/status")
    return code, json.loads(body)


def _in_flight(admin: int) -> float:
    _, text = _get(f"http://127.0.0.1:{admin}/metrics")
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == "arroyo_api_requests_in_flight":
                return sample.value
    return 0.0


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    port, admin = free_port(), free_port()
    env = {
        **os.environ,
        "ARROYO__DATA_DIR": str(tmp_path),
        "ARROYO__API__PORT": str(port),
        "ARROYO__API__ADMIN_PORT": str(admin),
        # Neither is needed to test a connection: nothing listens there.
        "ARROYO__COMPILER__PORT": str(free_port()),
        "ARROYO__CONTROLLER__PORT": str(free_port()),
    }
    log = (tmp_path / "api.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "arroyo_cli.main", "api"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process, port, admin
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        log.close()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_sigterm_drains_the_request_in_flight_and_status_says_so(
    api: tuple[subprocess.Popen[bytes], int, int], redis_server: RedisServer
) -> None:
    process, port, admin = api

    def ready() -> bool:
        try:
            code, body = _status(admin)
        except OSError:
            return False
        assert code in (200, 503), body
        return code == 200

    wait_until("the api to be ready", ready, WAIT_S)
    _, body = _status(admin)
    assert (body["state"], body["ready"], body["checks"]) == ("serving", True, {"store": "ok"})

    answer: dict[str, Any] = {}

    def test_connection() -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/connection_profiles/test",
            data=json.dumps(
                {
                    "connector": "redis",
                    "config": {"address": redis_server.address, "password": redis_server.password},
                }
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer.update(status=response.status, body=json.loads(response.read()))

    os.kill(redis_server.pid, signal.SIGSTOP)
    try:
        caller = threading.Thread(target=test_connection)
        caller.start()
        wait_until("the request to be in flight", lambda: _in_flight(admin) == 1, WAIT_S)
        process.send_signal(signal.SIGTERM)

        def draining() -> bool:
            code, body = _status(admin)
            return code == 503 and body["state"] == "draining" and body["ready"] is False

        wait_until("/status to say the api drains", draining, WAIT_S)
        assert _refused(port), "a draining api still takes new connections"
        assert process.poll() is None, "the api exited with a request in flight"
    finally:
        os.kill(redis_server.pid, signal.SIGCONT)
    caller.join(timeout=WAIT_S)
    assert answer.get("status") == 200, answer
    assert answer["body"]["ok"] is True, answer
    assert "connected to redis" in answer["body"]["message"]
    assert process.wait(timeout=WAIT_S) == 0
