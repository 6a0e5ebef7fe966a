"""The ``nats`` connector against a real server (Debian's nats-server, JetStream on, a password
required), with an independent nats-py client on the other side: a core subject read and a
subject written, a JetStream stream read by a durable consumer that gets what was published
while the pipeline was down, each message once; a refused login named; options refused."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.nats import NatsServer
from tests.connectors.pipelines import json_lines, start, stop
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


class _Client:
    """A nats-py client of the server, outside Spark, on a loop of its own."""

    def __init__(self, server: NatsServer) -> None:
        from arroyo.connectors.runtime.loop import Loop

        self.loop = Loop()
        self.received: list[bytes] = []
        import nats

        self.nc: Any = self.loop.run(
            nats.connect(server.url, user=server.username, password=server.password), 10
        )

    def subscribe(self, subject: str) -> None:
        async def on_message(message: Any) -> None:
            self.received.append(message.data)

        self.loop.run(self.nc.subscribe(subject, cb=on_message), 10)
        self.loop.run(self.nc.flush(), 10)

    def publish(self, subject: str, payload: str) -> None:
        self.loop.run(self.nc.publish(subject, payload.encode()), 10)
        self.loop.run(self.nc.flush(), 10)

    def stream(self, name: str, subjects: list[str]) -> None:
        self.loop.run(self.nc.jetstream().add_stream(name=name, subjects=subjects), 10)

    def publish_js(self, subject: str, payload: str) -> None:
        self.loop.run(self.nc.jetstream().publish(subject, payload.encode()), 10)

    def close(self) -> None:
        self.loop.run(self.nc.close(), 10)
        self.loop.close()


@pytest.fixture
def client(nats_server: NatsServer) -> Iterator[_Client]:
    c = _Client(nats_server)
    yield c
    c.close()


def _reader_sql(server: NatsServer, out: Path, what: str) -> str:
    return (
        f"CREATE TABLE src (n BIGINT, subject TEXT METADATA FROM 'subject') WITH ("
        f"connector = 'nats', type = 'source', {server.options()}, {what}, format = 'json');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\nINSERT INTO out SELECT n, subject FROM src;"
    )


def test_a_sink_publishes_every_row_to_its_subject(
    spark: SparkSession, nats_server: NatsServer, client: _Client, tmp_path: Path
) -> None:
    subject = f"out.{uuid.uuid4().hex[:8]}"
    client.subscribe(subject)
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000', "
        "message_count = '10', event_time_interval = '1 second');\n"
        f"CREATE TABLE out (counter BIGINT) WITH (connector = 'nats', type = 'sink', "
        f"{nats_server.options()}, subject = '{subject}');\n"
        "INSERT INTO out SELECT counter FROM src;"
    )
    assert start(spark, sql, tmp_path / "state").wait(timeout=300)
    wait_until("every row", lambda: len(client.received) >= 10, timeout=30)
    assert sorted(json.loads(p)["counter"] for p in client.received) == list(range(10))


def test_a_core_subject_is_read_with_wildcards(
    spark: SparkSession, nats_server: NatsServer, client: _Client, tmp_path: Path
) -> None:
    base = f"in.{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out.json"
    runner = start(spark, _reader_sql(nats_server, out, f"subject = '{base}.>'"), tmp_path / "s")
    try:
        wait_until(
            "the source's subscription",
            lambda: client.publish(f"{base}.probe", json.dumps({"n": -1})) or bool(json_lines(out)),
            timeout=120,
        )
        for n in range(5):
            client.publish(f"{base}.x.{n}", json.dumps({"n": n}))
        wait_until(
            "five messages", lambda: {r["n"] for r in json_lines(out)} >= set(range(5)), timeout=60
        )
    finally:
        stop(runner)
    subjects = {r["n"]: r["subject"] for r in json_lines(out)}
    assert subjects[3] == f"{base}.x.3"


def test_a_stream_is_read_once_across_a_restart(
    spark: SparkSession, nats_server: NatsServer, client: _Client, tmp_path: Path
) -> None:
    """A durable consumer: what is published to the stream while the pipeline is stopped is
    read when it starts again, and the file sink (exactly once) has each message once."""
    name = f"S{uuid.uuid4().hex[:8]}"
    client.stream(name, [f"{name}.>"])
    for n in range(5):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
    out = tmp_path / "out.json"
    sql = _reader_sql(nats_server, out, f"stream = '{name}'")
    state = tmp_path / "state"
    runner = start(spark, sql, state)
    wait_until("the first five", lambda: len(json_lines(out)) >= 5, timeout=120)
    stop(runner, spooled=state / "tables" / "src")
    for n in range(5, 10):
        client.publish_js(f"{name}.b", json.dumps({"n": n}))
    runner = start(spark, sql, state)
    try:
        wait_until("all ten", lambda: len(json_lines(out)) >= 10, timeout=120)
    finally:
        stop(runner)
    assert sorted(r["n"] for r in json_lines(out)) == list(range(10))
    assert {r["subject"] for r in json_lines(out)} == {f"{name}.a", f"{name}.b"}


def test_a_refused_login_fails_the_job_naming_the_servers(
    spark: SparkSession, nats_server: NatsServer, tmp_path: Path
) -> None:
    where = f"{nats_server.host}:{nats_server.port}"
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'nats', type = 'source', "
        f"servers = '{where}', 'auth.type' = 'credentials', 'auth.username' = 'arroyo', "
        "'auth.password' = 'wrong', subject = 's', format = 'json');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=rf"cannot connect to NATS at {where}"):
        runner.wait(timeout=120)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("servers = 'h:1', subject = 's', stream = 't'", "Exactly one of `stream` or `subject`"),
        ("servers = 'h:1'", "One of `stream` or `subject` must be set"),
        ("servers = 'h:1', subject = 's', 'auth.type' = 'token'", "needs auth.token"),
    ],
)
def test_options_that_cannot_work_are_refused(
    spark: SparkSession, tmp_path: Path, options: str, message: str
) -> None:
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'nats', type = 'source', {options}, "
        "format = 'json');\nCREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT n FROM src;"
    )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text
