"""The ``webhook`` sink against a real receiver (an aiohttp server on loopback, in the test's
process): every row arrives, batched into JSON arrays, with the table's headers and secrets
from the environment; a slow receiver sees no more requests at once than ``max_inflight`` and
a request that times out is sent again; answers 500 are retried until the receiver recovers;
an answer 400 fails the job with its body; options that cannot work are refused; and ``arroyo
run`` posting to it end to end."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.ports import free_port
from tests.aio import LoopThread, loop_thread
from tests.connectors.pipelines import start

pytestmark = [pytest.mark.spark, pytest.mark.http]


class Receiver:
    """A webhook receiver: records each request's body and headers, and answers as told
    (``answers``: the statuses and bodies of the next requests, then 200; ``delay_s``: how
    long each request takes; ``hang_s``: how long the first request takes)."""

    def __init__(self, loop: LoopThread) -> None:
        self.loop = loop
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.answers: list[tuple[int, str]] = []
        self.refused = 0
        self.delay_s = 0.0
        self.hang_s = 0.0
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self._runner: Any = None
        loop.run(self._start())

    async def _start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _hook(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        with self.lock:
            self.requests += 1
            first = self.requests == 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            answer = self.answers.pop(0) if self.answers else (200, "ok")
        try:
            await asyncio.sleep(self.hang_s if first and self.hang_s else self.delay_s)
            with self.lock:
                if answer[0] >= 400:
                    self.refused += 1
                else:
                    self.bodies.append(body)
                    self.headers.append(dict(request.headers))
            return web.Response(status=answer[0], text=answer[1])
        finally:
            with self.lock:
                self.in_flight -= 1

    def records(self) -> list[Any]:
        with self.lock:
            bodies = list(self.bodies)
        got: list[Any] = []
        for body in bodies:
            value = json.loads(body)
            got.extend(value if isinstance(value, list) else [value])
        return got

    def close(self) -> None:
        self.loop.run(self._runner.cleanup())


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with loop_thread("webhook-receiver", timeout_s=30) as loop:
        server = Receiver(loop)
        yield server
        server.close()


def _sql(receiver: Receiver, count: int, options: str = "", query: str = "") -> str:
    return (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000', "
        f"message_count = '{count}');\n"
        "CREATE TABLE out (counter BIGINT) WITH (connector = 'webhook', type = 'sink', "
        f"endpoint = '{receiver.url}{query}'{', ' + options if options else ''});\n"
        "INSERT INTO out SELECT counter FROM src;"
    )


def test_every_row_arrives_batched_with_the_headers(
    spark: SparkSession, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_TEST_TOKEN", "s3cret")
    options = (
        "headers = 'Authorization: Bearer {{ WEBHOOK_TEST_TOKEN }},X-Source: arroyo', "
        "max_batch_size = '7'"
    )
    assert start(spark, _sql(receiver, 40, options), tmp_path / "state").wait(timeout=300)
    assert sorted(r["counter"] for r in receiver.records()) == list(range(40))
    with receiver.lock:
        bodies, headers = list(receiver.bodies), list(receiver.headers)
    assert all(isinstance(json.loads(b), list) and len(json.loads(b)) <= 7 for b in bodies)
    assert len(bodies) < 40, "rows were not batched"
    assert {h["Authorization"] for h in headers} == {"Bearer s3cret"}
    assert {h["X-Source"] for h in headers} == {"arroyo"}
    assert {h["Content-Type"] for h in headers} == {"application/json"}


def test_one_record_per_request_by_default(
    spark: SparkSession, receiver: Receiver, tmp_path: Path
) -> None:
    assert start(spark, _sql(receiver, 5), tmp_path / "state").wait(timeout=300)
    with receiver.lock:
        bodies = list(receiver.bodies)
    assert sorted(json.loads(b)["counter"] for b in bodies) == list(range(5))


def test_a_slow_receiver_gets_at_most_max_inflight_requests_and_timeouts_are_retried(
    spark: SparkSession, receiver: Receiver, tmp_path: Path
) -> None:
    """Each request takes 0.2 s and the first hangs past ``request_timeout``: that one is sent
    again; a task never has more than ``max_inflight`` (2) requests in flight, so the
    receiver sees at most 2 per task Spark runs at once (local[2]: 2 tasks)."""
    receiver.delay_s = 0.2
    receiver.hang_s = 3.0
    options = "max_inflight = '2', request_timeout = '1 second'"
    assert start(spark, _sql(receiver, 16, options), tmp_path / "state").wait(timeout=300)
    got = sorted(r["counter"] for r in receiver.records())
    assert set(got) == set(range(16))
    with receiver.lock:
        assert 2 <= receiver.most_in_flight <= 4, receiver.most_in_flight
        assert receiver.requests > 16, "the request that timed out was not sent again"


def test_answers_500_are_retried_until_the_receiver_recovers(
    spark: SparkSession, receiver: Receiver, tmp_path: Path
) -> None:
    receiver.answers = [(500, "busy"), (503, "busy"), (500, "busy")]
    options = "max_batch_size = '100', max_batch_interval = '10 seconds'"
    assert start(spark, _sql(receiver, 10, options), tmp_path / "state").wait(timeout=300)
    assert sorted(r["counter"] for r in receiver.records()) == list(range(10))
    assert receiver.refused == 3


def test_an_answer_400_fails_the_job_with_its_body_and_no_secret(
    spark: SparkSession, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's token, from the environment, is sent but never quoted in the error."""
    monkeypatch.setenv("ARROYO_TEST_HOOK_TOKEN", "tok-5ecret")
    receiver.answers = [(400, "field 'counter' is not allowed")] * 100
    query = "?token={{ ARROYO_TEST_HOOK_TOKEN }}"
    with pytest.raises(JobFailedError) as caught:
        start(spark, _sql(receiver, 3, query=query), tmp_path / "state").wait(timeout=300)
    message = str(caught.value)
    assert f"webhook sink 'out': {receiver.url}{query} answered 400 Bad Request" in message, message
    assert "field 'counter' is not allowed" in message, message
    assert "tok-5ecret" not in message, message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("", "endpoint"),
        ("endpoint = 'ftp://x/y'", "must be an http:// or https:// URL"),
        ("endpoint = 'http://h/', headers = 'no colon'", "is not of the form 'Name: value'"),
        ("endpoint = 'http://h/', max_batch_size = '0'", "max_batch_size"),
        ("endpoint = 'http://h/', max_batch_interval = 'soon'", "max_batch_interval"),
    ],
)
def test_options_that_cannot_work_are_refused(
    spark: SparkSession, tmp_path: Path, options: str, message: str
) -> None:
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
        "CREATE TABLE out (counter BIGINT) WITH (connector = 'webhook', type = 'sink'"
        f"{', ' + options if options else ''});\nINSERT INTO out SELECT counter FROM src;"
    )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


@pytest.mark.slow
def test_arroyo_run_posts_every_row_to_a_webhook(receiver: Receiver, tmp_path: Path) -> None:
    """End to end as a user runs it: ``arroyo run`` (its own process and JVM) into the
    receiver, a token header from the environment of that process."""
    sql = _sql(receiver, 12, "headers = 'X-Token: {{ HOOK_TOKEN }}', max_batch_size = '5'")
    result = subprocess.run(
        [sys.executable, "-m", "arroyo_cli.main", "run", "--state-dir", str(tmp_path), "-"],
        input=sql,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "HOOK_TOKEN": "from-env"},
    )
    assert result.returncode == 0, result.stderr
    assert sorted(r["counter"] for r in receiver.records()) == list(range(12))
    with receiver.lock:
        assert {h["X-Token"] for h in receiver.headers} == {"from-env"}
