"""The ``nats`` connector against a real server (Debian's nats-server, JetStream on, a password
required), with an independent nats-py client on the other side: a core subject read and a
subject written, a JetStream stream read by a durable consumer that gets what was published
while the pipeline was down, each message once (a malformed one dropped, or failing the job);
a server stopped mid-run and back, and one that does not come back; a refused login named;
options refused."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.connectors.nats.options import NatsOptions
from arroyo.connectors.nats.source import NatsSource
from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.nats import NatsServer, running_nats
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
    read when it starts again, and the file sink (exactly once) has each message once; under
    ``bad_data = 'drop'`` a message that is not JSON is skipped, the others kept."""
    name = f"S{uuid.uuid4().hex[:8]}"
    client.stream(name, [f"{name}.>"])
    for n in range(5):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
        if n == 2:
            client.publish_js(f"{name}.a", "{not json")
    out = tmp_path / "out.json"
    sql = _reader_sql(nats_server, out, f"stream = '{name}', bad_data = 'drop'")
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


def test_a_sample_reads_a_streams_newest_messages_and_a_subjects_next(
    nats_server: NatsServer, client: _Client
) -> None:
    """What a saved table's test reads (the api calls it): a stream's last messages, fetched
    with no consumer made; a core subject's next messages; a missing stream named."""
    from arroyo.connectors.base import ConnectorError
    from arroyo.connectors.nats import NatsConnector

    name = f"S{uuid.uuid4().hex[:8]}"
    client.stream(name, [f"{name}.>"])
    for n in range(8):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
    conn = NatsConnector()
    settings = {
        "servers": f"{nats_server.host}:{nats_server.port}",
        "auth.type": "credentials",
        "auth.username": nats_server.username,
        "auth.password": nats_server.password,
    }
    sampled = conn.sample(conn.parse_options({**settings, "stream": name}), 3, 10.0)
    assert [json.loads(m)["n"] for m in sampled] == [5, 6, 7]
    info = client.loop.run(client.nc.jetstream().stream_info(name), 10)
    assert info.state.consumer_count == 0
    client.publish_js(f"{name}.b", json.dumps({"n": 100}))
    client.publish_js(f"{name}.a", json.dumps({"n": 8}))
    filtered = {**settings, "stream": name, "consumer.filter_subjects": f"{name}.b, x.>"}
    sampled = conn.sample(conn.parse_options(filtered), 3, 10.0)
    assert [json.loads(m)["n"] for m in sampled] == [100]  # the table's subjects only

    publishing = threading.Event()

    def publish() -> None:
        n = 0
        while not publishing.wait(0.05):
            client.publish(f"{name}.core", json.dumps({"n": n}))
            n += 1

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        subject = conn.parse_options({**settings, "subject": f"{name}.core"})
        sampled = conn.sample(subject, 3, 10.0)
    finally:
        publishing.set()
        publisher.join(10)
    numbers = [json.loads(m)["n"] for m in sampled]
    assert numbers == list(range(numbers[0], numbers[0] + 3))

    with pytest.raises(ConnectorError, match="no JetStream stream named 'nope'"):
        conn.sample(conn.parse_options({**settings, "stream": "nope"}), 3, 10.0)


def test_a_malformed_message_fails_the_job_naming_the_table(
    spark: SparkSession, nats_server: NatsServer, client: _Client, tmp_path: Path
) -> None:
    """``bad_data = 'fail'`` (the default). Decoding is the one every connector's payloads
    take (arroyo.formats.codec, tested at length with files and Kafka); this is NATS's case."""
    name = f"S{uuid.uuid4().hex[:8]}"
    client.stream(name, [f"{name}.>"])
    client.publish_js(f"{name}.a", json.dumps({"n": 0}))
    client.publish_js(f"{name}.a", "{not json")
    sql = _reader_sql(nats_server, tmp_path / "out.json", f"stream = '{name}'")
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=r"bad data in table 'src' \(json\): .*\{not json"):
        runner.wait(timeout=120)


def test_a_server_back_after_an_outage_is_a_pause(spark: SparkSession, tmp_path: Path) -> None:
    """The server (one of the test's own) stopped under a running pipeline, then started again
    where it was: the JetStream source goes on from where it was, each message once."""
    root, out = tmp_path / "server", tmp_path / "out.json"
    name = f"S{uuid.uuid4().hex[:8]}"
    runner = None
    try:
        with running_nats(root) as server:
            client = _Client(server)
            client.stream(name, [f"{name}.>"])
            for n in range(5):
                client.publish_js(f"{name}.a", json.dumps({"n": n}))
            client.close()
            runner = start(spark, _reader_sql(server, out, f"stream = '{name}'"), tmp_path / "s")
            wait_until("the first five", lambda: len(json_lines(out)) >= 5, timeout=120)
        with running_nats(root, again=server):
            client = _Client(server)
            for n in range(5, 10):
                client.publish_js(f"{name}.b", json.dumps({"n": n}))
            client.close()
            wait_until("all ten", lambda: len(json_lines(out)) >= 10, timeout=60)
    finally:
        if runner is not None:
            stop(runner)
    assert sorted(r["n"] for r in json_lines(out)) == list(range(10))


def _reader(server: NatsServer, spool: Path, reconnect_attempts: int = 2, **options: Any) -> Any:
    """The source's reader as Spark's Python worker runs it, in this process (no query, no
    JVM): ``options`` are the table's (``subject``, ``stream``...)."""
    table = NatsOptions.model_validate(
        {
            "servers": f"{server.host}:{server.port}",
            "auth.type": "credentials",
            "auth.username": server.username,
            "auth.password": server.password,
            **options,
        }
    )
    source = NatsSource(
        {
            "spool": str(spool),
            "options": table.model_dump_json(by_alias=True),
            "durable": "arroyo-test",
            "reconnect_attempts": str(reconnect_attempts),
        }
    )
    return source.streamReader(None)


def _read_all(reader: Any, position: int, values: set[int]) -> int:
    """Reads batches from ``position`` until the spool has given ``values`` (and only once
    each); the position after them."""
    seen: list[int] = []

    def read() -> bool:
        nonlocal position
        end = reader.latestOffset()  # as Spark plans a batch, then runs its task
        for part in reader.partitions({"pos": position}, end):
            for b in reader.read(part):
                seen.extend(json.loads(v)["n"] for v in b.column("value").to_pylist())
        position = end["pos"]
        return set(seen) >= values

    wait_until(f"messages {sorted(values)}", read, timeout=60, detail=lambda: str(seen))
    assert sorted(seen) == sorted(values), seen
    return position


def test_a_message_cut_off_before_the_spool_is_spooled_when_it_comes_again(
    nats_server: NatsServer, client: _Client, tmp_path: Path
) -> None:
    """Messages 5 to 9 reach a consumer that dies before spooling them (here, a client that
    takes them and never acknowledges); the pipeline reads 10 to 14 on starting again, then
    5 to 9 once their ``consumer.ack_wait`` is over: older sequences than the spool's newest,
    spooled all the same (a highest-sequence-spooled check lost them)."""
    name = f"S{uuid.uuid4().hex[:8]}"
    client.stream(name, [f"{name}.>"])
    for n in range(5):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
    options = {"stream": name, "consumer.ack_wait": 1}
    reader = _reader(nats_server, tmp_path / "spool", **options)
    try:
        position = _read_all(reader, 0, set(range(5)))
    finally:
        reader.stop()
    for n in range(5, 10):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
    pull = client.loop.run(
        client.nc.jetstream().pull_subscribe_bind(durable="arroyo-test", stream=name), 10
    )
    taken = client.loop.run(pull.fetch(5, timeout=10), 30)
    client.loop.run(pull.unsubscribe(), 10)
    assert [json.loads(m.data)["n"] for m in taken] == list(range(5, 10))
    for n in range(10, 15):
        client.publish_js(f"{name}.a", json.dumps({"n": n}))
    reader = _reader(nats_server, tmp_path / "spool", **options)
    try:
        _read_all(reader, position, set(range(5, 15)))
    finally:
        reader.stop()


def test_a_server_that_does_not_come_back_fails_the_source_naming_it(tmp_path: Path) -> None:
    """Its reconnect attempts spent (two here, about two minutes of them as run), the source's
    next read fails naming the servers and the last error, rather than waiting on."""
    with running_nats(tmp_path / "server") as server:
        reader = _reader(server, tmp_path / "spool", subject="s")
        reader.latestOffset()  # subscribes
    failures: list[RuntimeError] = []

    def failed() -> bool:
        try:
            reader.latestOffset()
        except RuntimeError as err:
            failures.append(err)
        return bool(failures)

    try:
        wait_until("the source to give up on the server", failed, timeout=60)
    finally:
        reader.stop()
    assert (
        f"lost the connection to NATS at {server.host}:{server.port} and could not connect "
        "again in 2 attempts" in str(failures[0])
    ), failures[0]


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
