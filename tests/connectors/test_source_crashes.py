"""Exactly once from the sources that replay, as a reader that is not Spark sees it: ``arroyo
run`` reading a NATS JetStream stream and a RabbitMQ stream, killed with -9 mid-stream, more
published while it is down, then resumed from its state directory (in this process, on the
session's Spark: one JVM start the fewer): the filesystem sinks' files, listed as a plain
reader lists them, hold every message once.

MQTT at QoS 1 is not among them: a message spooled and then cut off by the kill before its
acknowledgement reaches the broker is delivered again, and MQTT gives nothing to recognise it
by (packet ids are reused), so after a kill -9 it is at least once (the connector says so)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.testing.nats import NatsServer
from arroyo.testing.rabbitmq import RabbitmqNode
from tests.connectors.pipelines import start, stop
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

_SOURCES = ("nats", "rabbitmq")


def _rows(out: Path) -> list[int]:
    """As a plain reader lists the directory: hidden names (``_``, ``.``), the sink's staging
    among them, are not read."""
    rows: list[int] = []
    for parent, dirs, files in os.walk(out):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for name in sorted(f for f in files if not f.startswith(("_", "."))):
            text = Path(parent, name).read_text()
            rows += [json.loads(line)["n"] for line in text.splitlines() if line]
    return rows


class _Publishers:
    """Publishes ``{"n": n}`` to a JetStream stream and a RabbitMQ stream, from this process."""

    def __init__(self, nats_server: NatsServer, rabbitmq: RabbitmqNode, name: str) -> None:
        from arroyo.connectors.runtime.loop import Loop

        self.name = name
        self.rabbitmq = rabbitmq
        self.loop = Loop()
        import nats

        self.nc: Any = self.loop.run(
            nats.connect(nats_server.url, user=nats_server.username, password=nats_server.password),
            10,
        )
        self.loop.run(self.nc.jetstream().add_stream(name=name, subjects=[f"{name}.>"]), 10)
        self._rabbitmq([], create=True)

    def publish(self, values: range) -> None:
        js = self.nc.jetstream()
        for n in values:
            self.loop.run(js.publish(f"{self.name}.x", json.dumps({"n": n}).encode()), 10)
        self._rabbitmq(list(values))

    def _rabbitmq(self, values: list[int], create: bool = False) -> None:
        from rstream import Producer

        node = self.rabbitmq

        async def send() -> None:
            async with Producer(
                node.host, node.stream_port, username=node.username, password=node.password
            ) as producer:
                if create:
                    await producer.create_stream(self.name, exists_ok=True)
                for n in values:
                    await producer.send_wait(self.name, json.dumps({"n": n}).encode())

        asyncio.run(send())

    def close(self) -> None:
        self.loop.run(self.nc.close(), 10)
        self.loop.close()


@pytest.fixture
def publishers(nats_server: NatsServer, rabbitmq: RabbitmqNode) -> Iterator[_Publishers]:
    p = _Publishers(nats_server, rabbitmq, f"crash-{uuid.uuid4().hex[:8]}")
    yield p
    p.close()


def test_kill_9_mid_stream_leaves_each_message_once(
    spark: SparkSession,
    nats_server: NatsServer,
    rabbitmq: RabbitmqNode,
    publishers: _Publishers,
    tmp_path: Path,
) -> None:
    name = publishers.name
    outs = {source: tmp_path / source for source in _SOURCES}
    sql = (
        f"CREATE TABLE nats (n BIGINT) WITH (connector = 'nats', type = 'source', "
        f"{nats_server.options()}, stream = '{name}', 'consumer.ack_wait' = '5', "
        "format = 'json');\n"
        f"CREATE TABLE rabbitmq (n BIGINT) WITH (connector = 'rabbitmq', {rabbitmq.options()}, "
        f"stream = '{name}', 'source.offset' = 'first', format = 'json');\n"
        + "".join(
            f"CREATE TABLE {source}_out (n BIGINT) WITH (connector = 'filesystem', "
            f"path = '{out}', format = 'json', type = 'sink');\n"
            f"INSERT INTO {source}_out SELECT n FROM {source};\n"
            for source, out in outs.items()
        )
    )
    script, state, log = tmp_path / "q.sql", tmp_path / "state", tmp_path / "run.log"
    script.write_text(sql)
    command = [
        str(Path(sys.executable).with_name("arroyo")),
        "run", str(script), "--state-dir", str(state),
    ]  # fmt: skip
    publishers.publish(range(20))
    with open(log, "ab") as sink:
        run = subprocess.Popen(command, stdout=sink, stderr=sink, start_new_session=True)

    def seen() -> dict[str, int]:
        assert run.poll() is None, f"arroyo run exited: {log.read_text()[-3000:]}"
        return {source: len(_rows(out)) for source, out in outs.items()}

    try:
        wait_until(
            "rows in every sink", lambda: min(seen().values()) > 0, 180, detail=lambda: str(seen())
        )
        publishers.publish(range(20, 40))  # the kill lands while these are read
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    _no_row_twice(outs)
    publishers.publish(range(40, 60))  # while it is down
    runner = start(spark, sql, state)
    try:
        wait_until(
            "every message in every sink",
            lambda: all(len(_rows(out)) >= 60 for out in outs.values()),
            120,
            detail=lambda: str({source: len(_rows(out)) for source, out in outs.items()}),
        )
    finally:
        stop(runner)
    _no_row_twice(outs)
    for source, out in outs.items():
        assert sorted(_rows(out)) == list(range(60)), source


def _no_row_twice(outs: dict[str, Path]) -> None:
    for source, out in outs.items():
        twice = [n for n, c in Counter(_rows(out)).items() if c > 1]
        assert not twice, f"{source}: seen twice: {twice}"
