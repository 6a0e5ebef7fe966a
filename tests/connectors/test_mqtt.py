"""The ``mqtt`` connector against a real broker (Debian's mosquitto, a password required, plain,
TLS and WebSocket listeners), with independent paho clients on the other side: a sink publishing
over TLS, a source subscribed with a wildcard and its ``topic`` metadata, messages sent while the
pipeline is down delivered when it is back (a persistent session at QoS 1), a broker refusing
the login named in the error, and options that cannot work refused."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.mosquitto import Mosquitto
from tests.connectors.pipelines import json_lines, start, stop
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


class _Client:
    """A paho client of the broker's plain listener, outside Spark."""

    def __init__(self, broker: Mosquitto, subscribe: str | None = None) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.received: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=uuid.uuid4().hex)
        self.client.username_pw_set(broker.username, broker.password)

        def on_connect(c: Any, *_: Any) -> None:
            if subscribe:
                c.subscribe(subscribe, qos=1)
            else:
                ready.set()

        def on_message(_c: Any, _u: Any, message: Any) -> None:
            with self.lock:
                self.received.append((message.topic, bytes(message.payload)))

        self.client.on_connect = on_connect
        self.client.on_subscribe = lambda *_: ready.set()
        self.client.on_message = on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        assert ready.wait(10), "the test's client did not connect"

    def publish(self, topic: str, payload: str) -> None:
        self.client.publish(topic, payload, qos=1).wait_for_publish(10)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.mark.parametrize("scheme", ["ssl", "ws"])
def test_a_sink_publishes_every_row(
    spark: SparkSession, mosquitto: Mosquitto, tmp_path: Path, scheme: str
) -> None:
    topic = f"out/{uuid.uuid4().hex[:8]}"
    reader = _Client(mosquitto, subscribe=topic)
    try:
        sql = (
            "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000', "
            "message_count = '10', event_time_interval = '1 second');\n"
            f"CREATE TABLE out (counter BIGINT) WITH (connector = 'mqtt', type = 'sink', "
            f"{mosquitto.options(scheme)}, topic = '{topic}', qos = 'AtLeastOnce');\n"
            "INSERT INTO out SELECT counter FROM src;"
        )
        assert start(spark, sql, tmp_path / "state").wait(timeout=300)
        wait_until("every row", lambda: len(reader.received) >= 10, timeout=30)
        got = sorted(json.loads(p)["counter"] for _, p in reader.received)
        assert got == list(range(10))
    finally:
        reader.close()


def test_a_source_reads_a_wildcard_and_gets_what_was_sent_while_it_was_down(
    spark: SparkSession, mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """QoS 1: the session is persistent, so the messages published while the pipeline is
    stopped reach it when it starts again; the file sink (exactly once) has each message once."""
    base = f"in/{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out.json"
    sql = (
        f"CREATE TABLE src (n BIGINT, topic TEXT METADATA FROM 'topic') WITH ("
        f"connector = 'mqtt', type = 'source', {mosquitto.options()}, topic = '{base}/#', "
        "qos = 'AtLeastOnce', format = 'json');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\nINSERT INTO out SELECT n, topic FROM src;"
    )
    state = tmp_path / "state"
    writer = _Client(mosquitto)
    try:
        runner = start(spark, sql, state)
        # The subscription is made when the source first reads: publish until it is there.
        wait_until(
            "the source's subscription",
            lambda: writer.publish(f"{base}/probe", json.dumps({"n": -1})) or bool(json_lines(out)),
            timeout=120,
        )
        for n in range(5):
            writer.publish(f"{base}/a/{n % 2}", json.dumps({"n": n}))
        wait_until(
            "the first five", lambda: {r["n"] for r in json_lines(out)} >= set(range(5)), timeout=60
        )
        stop(runner, spooled=state / "tables" / "src")
        for n in range(5, 10):
            writer.publish(f"{base}/b", json.dumps({"n": n}))
        runner = start(spark, sql, state)
        wait_until(
            "the five sent while it was down",
            lambda: {r["n"] for r in json_lines(out)} >= set(range(10)),
            timeout=120,
        )
        stop(runner)
    finally:
        writer.close()
    rows = [r for r in json_lines(out) if r["n"] >= 0]
    assert sorted(r["n"] for r in rows) == list(range(10))
    topics = {r["n"]: r["topic"] for r in rows}
    assert topics[0] == f"{base}/a/0" and topics[3] == f"{base}/a/1" and topics[7] == f"{base}/b"


def test_a_refused_login_fails_the_job_naming_the_broker(
    spark: SparkSession, mosquitto: Mosquitto, tmp_path: Path
) -> None:
    url = f"tcp://{mosquitto.host}:{mosquitto.port}"
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'mqtt', type = 'source', url = '{url}', "
        "username = 'arroyo', password = 'wrong', topic = 't', format = 'json');\n"
        f"CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=rf"MQTT broker at {url} refused the connection"):
        runner.wait(timeout=120)


def test_a_sample_reads_the_retained_messages_in_a_clean_session(mosquitto: Mosquitto) -> None:
    """What a saved table's test reads (the api calls it): a subscription of its own, with a
    clean session, gets the topics' retained messages; a refused login is named."""
    from arroyo.connectors.base import ConnectorError
    from arroyo.connectors.mqtt import MqttConnector

    prefix = f"sampled/{uuid.uuid4().hex[:8]}"
    publisher = _Client(mosquitto)
    try:
        for n in range(3):
            message = publisher.client.publish(f"{prefix}/{n}", json.dumps({"n": n}), 1, True)
            message.wait_for_publish(10)
    finally:
        publisher.close()
    conn = MqttConnector()
    settings = {
        "url": f"tcp://{mosquitto.host}:{mosquitto.port}",
        "username": mosquitto.username,
        "password": mosquitto.password,
        "topic": f"{prefix}/#",
    }
    sampled = conn.sample(conn.parse_options(settings), 3, 10.0)
    assert sorted(json.loads(m)["n"] for m in sampled) == [0, 1, 2]
    wrong = conn.parse_options({**settings, "password": "wrong"})
    with pytest.raises(ConnectorError, match="refused the connection"):
        conn.sample(wrong, 3, 10.0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("url = 'http://127.0.0.1:1', topic = 't'", "must start with one of tcp://"),
        ("url = 'tcp://127.0.0.1:1', topic = 't', qos = '1'", "qos"),
        ("url = 'tcp://127.0.0.1:1', topic = 't', 'sink.retain' = 'true'", "sink.retain"),
    ],
)
def test_options_that_cannot_work_are_refused(
    spark: SparkSession, tmp_path: Path, options: str, message: str
) -> None:
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'mqtt', type = 'source', {options}, "
        "format = 'json');\nCREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT n FROM src;"
    )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


@pytest.fixture(autouse=True)
def _no_leftover(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
