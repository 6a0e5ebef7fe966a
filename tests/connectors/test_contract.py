"""The contract every registered connector keeps, parametrised over the registry.

- Its options schema is produced and names every option (and refuses others).
- Its declared capabilities agree with the hooks it implements, and its docstring states its
  delivery guarantee (and, for a source that cannot replay, that it cannot).
- Planning a table of it (``arroyo validate``) contacts nothing: its addresses point at a trap
  that records every connection, and planning must leave it untouched.
- A replayed micro-batch writes nothing twice, as a reader of its system sees it (a file
  listing, an independent Kafka consumer, the captured standard output): through a streaming
  query whose checkpoint forgets the commit of a batch the sink wrote, as a crash between the
  two leaves it, and through its ``line_writer`` given the same batch id twice. A sink declaring at
  least once may repeat rows but loses none; one declaring ``none`` shows none.

A connector without a case below fails the contract: add its tables' options for each role, and
for a sink how to read back what it wrote. Cases that need a real server start it (Kafka:
``arroyo.testing.kafka``) and carry its marker.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from arroyo.connectors import CONNECTORS, INTERNAL, AnyConnector, Connector, WriteContext
from arroyo.connectors.base import LineWriter, table_state_dir
from arroyo.program.spec import ColumnSpec, FormatSpec, TableSpec
from tests.connectors.checkpoints import committed_batches, forget_commit, query_checkpoint
from tests.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.testing.kafka import KafkaBroker
    from arroyo.testing.kinesis import KinesisServer
    from arroyo.testing.mosquitto import Mosquitto
    from arroyo.testing.nats import NatsServer
    from arroyo.testing.redis import RedisServer

# Impulse events. The first run reads them in batches of a fixed size (under a batch cap, batch b
# holds events b * _ROWS_PER_BATCH onwards), so which batch is replayed is known; the batches
# after the last event carry its end-of-input marker.
_ROWS = 24
_ROWS_PER_BATCH = 3
_DEADLINE_S = 300.0


def _each(connectors: tuple[AnyConnector, ...]) -> list[Any]:
    return [pytest.param(c, id=c.name) for c in connectors]


# -- what each connector declares ---------------------------------------------------------------


def test_the_registry_lists_each_connector_once_and_imports_no_spark() -> None:
    names = [c.name for c in (*CONNECTORS, *INTERNAL)]
    assert len(names) == len(set(names))
    assert not any(c.internal for c in CONNECTORS)
    assert all(c.internal for c in INTERNAL)
    # The api and controller list and validate connectors without Spark or client libraries.
    probe = (
        "import sys, arroyo.connectors; "
        "print(sorted(m for m in ('pyspark', 'pyarrow', 'confluent_kafka') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert loaded.stdout.strip() == "[]"


@pytest.mark.parametrize("conn", _each((*CONNECTORS, *INTERNAL)))
def test_options_schema_names_every_option(conn: AnyConnector) -> None:
    models = [conn.options_model]
    if conn.connection_model is not None:
        models.append(conn.connection_model)
        # A profile's settings merge into a table's options: the table accepts every one.
        assert set(conn.connection_model.model_fields) <= set(conn.options_model.model_fields)
    for model in models:
        schema = model.model_json_schema(by_alias=True)
        options = {info.alias or name for name, info in model.model_fields.items()}
        properties = schema.get("properties", {})
        assert set(properties) == options
        for name in options:
            assert properties[name].get("description"), f"option '{name}' is not described"
        assert schema.get("additionalProperties") is False, "unknown options must be refused"


def _implements(conn: AnyConnector, hook: str) -> bool:
    return getattr(type(conn), hook) is not getattr(Connector, hook)


_STATED = {
    "exactly_once": "exactly once",
    "at_least_once": "at least once",
    "none": "delivery: none",
}


@pytest.mark.parametrize("conn", _each((*CONNECTORS, *INTERNAL)))
def test_capabilities_match_the_hooks_and_the_docstring(conn: AnyConnector) -> None:
    caps = conn.capabilities
    assert conn.roles, "a connector is a source, a sink or both"
    assert _implements(conn, "read") == caps.source
    assert _implements(conn, "read_static") == (caps.lookup and not caps.lookup_by_key)
    assert _implements(conn, "lookup") == caps.lookup_by_key
    assert _implements(conn, "write") == caps.sink
    assert _implements(conn, "line_writer") == caps.writes_lines
    if _implements(conn, "bounded"):
        assert caps.bounded == "per_table"
    assert caps.needs_format == bool(conn.formats)
    assert conn.default_format is None or conn.default_format in conn.formats
    doc = " ".join((type(conn).__doc__ or "").lower().split())
    if caps.delivery is not None:
        assert _STATED[caps.delivery] in doc, f"the docstring states no '{caps.delivery}'"
    if caps.source and not caps.replayable:
        assert "cannot replay" in doc, "a source that cannot replay says so"
    if _implements(conn, "replayable"):
        # Options choose: the capability is the strongest, the docstring says which cannot.
        assert caps.replayable and "cannot replay" in doc


# -- planning contacts nothing ------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """A connector's tables as planning sees them: the options of each role it takes, where
    ``{trap}`` is an address that records every connection made to it and ``{dir}`` a directory
    with input files (``in.json``, ``in/part.json``); and the columns a table declares (none
    where the connector defines them)."""

    roles: dict[str, str]
    columns: str = "(counter BIGINT)"
    lookup_columns: str | None = None  # a lookup table's, where they differ


_REGISTRY_AVRO = (
    "format = 'avro', 'avro.confluent_schema_registry' = 'true', "
    "'schema_registry.endpoint' = 'http://{trap}'"
)
# Confluent's registry settings come with a login.
_REGISTRY_LOGIN = ", 'schema_registry.api_key' = 'k', 'schema_registry.api_secret' = 's'"
PLANNED: dict[str, Planned] = {
    "impulse": Planned({"source": "event_rate = '10'"}, columns=""),
    "nexmark": Planned({"source": "event_rate = '10'"}, columns=""),
    "kafka": Planned(
        {
            # A new pipeline reading from its group's offsets asks the brokers for them when it
            # runs, and an Avro table asks the registry for its writer schemas: never planning.
            "source": "bootstrap_servers = '{trap}', topic = 't', 'source.offset' = 'group', "
            + _REGISTRY_AVRO,
            "sink": "bootstrap_servers = '{trap}', topic = 't', "
            "'sink.commit_mode' = 'exactly_once', " + _REGISTRY_AVRO,
        }
    ),
    "confluent": Planned(
        {
            "source": "bootstrap_servers = '{trap}', key = 'k', secret = 's', topic = 't', "
            "'source.offset' = 'group', " + _REGISTRY_AVRO + _REGISTRY_LOGIN,
            "sink": "bootstrap_servers = '{trap}', key = 'k', secret = 's', topic = 't', "
            "'sink.commit_mode' = 'exactly_once', " + _REGISTRY_AVRO + _REGISTRY_LOGIN,
        }
    ),
    "single_file": Planned(
        {
            "source": "path = '{dir}/in.json'",
            "lookup": "path = '{dir}/in.json'",
            "sink": "path = '{dir}/out.json'",
        }
    ),
    "filesystem": Planned(
        {
            "source": "path = '{dir}/in'",
            "lookup": "path = '{dir}/in'",
            "sink": "path = '{dir}/out'",
        }
    ),
    "mqtt": Planned(
        {
            "source": "url = 'tcp://{trap}', topic = 't', qos = 'AtLeastOnce'",
            "sink": "url = 'tcp://{trap}', topic = 't'",
        }
    ),
    "nats": Planned(
        {
            "source": "servers = '{trap}', stream = 's'",
            "sink": "servers = '{trap}', subject = 's'",
        }
    ),
    "rabbitmq": Planned({"source": "host = '127.0.0.1', port = '{port}', stream = 's'"}),
    "kinesis": Planned(
        {
            "source": "aws_endpoint = 'http://{trap}', aws_region = 'us-east-1', stream_name = 's'",
            "sink": "aws_endpoint = 'http://{trap}', aws_region = 'us-east-1', stream_name = 's'",
        }
    ),
    "redis": Planned(
        {
            "sink": "address = 'redis://{trap}', target = 'list', 'target.key_prefix' = 'k'",
            "lookup": "address = 'redis://{trap}'",
        },
        lookup_columns="(counter TEXT METADATA FROM 'key' PRIMARY KEY, v TEXT)",
    ),
    "webhook": Planned({"sink": "endpoint = 'http://{trap}/hook'"}),
    # The HTTP sources connect when their stream is first read.
    "sse": Planned({"source": "endpoint = 'http://{trap}/events', events = 'update'"}),
    "websocket": Planned(
        {"source": "endpoint = 'ws://{trap}/ws', 'subscription_messages.0' = 'subscribe'"}
    ),
    "polling_http": Planned({"source": "endpoint = 'http://{trap}/metrics', method = 'POST'"}),
    "stdout": Planned({"sink": ""}),
    "blackhole": Planned({"sink": ""}),
    # A lakehouse table is created, or its log read, when the first batch is written.
    "delta": Planned(
        {
            "sink": "path = 's3://bucket/t', format = 'parquet', "
            "'storage.aws_endpoint' = 'http://{trap}', 'storage.aws_allow_http' = 'true'"
        }
    ),
    "iceberg": Planned(
        {
            "sink": "'catalog.type' = 'rest', 'catalog.rest.url' = 'http://{trap}', "
            "namespace = 'n', table_name = 't', format = 'parquet'"
        }
    ),
}


class _Trap:
    """A TCP port on loopback that records any connection made to it."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self.contacted = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            self.contacted.set()
            connection.close()

    def close(self) -> None:
        # shutdown wakes the accepting thread on Linux, where close alone may not.
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(5)


@pytest.fixture
def trap() -> Iterator[_Trap]:
    listening = _Trap()
    yield listening
    listening.close()


def _plan_sql(conn: AnyConnector, role: str, options: str, columns: str) -> str:
    table = (
        f"CREATE TABLE t {columns} WITH (connector = '{conn.name}', type = '{role}'"
        f"{', ' + options if options else ''});\n"
    )
    impulse = "CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
    blackhole = "CREATE TABLE o WITH (connector = 'blackhole');\n"
    if role == "source":
        return table + blackhole + "INSERT INTO o SELECT * FROM t;"
    if role == "sink":
        return impulse + table + "INSERT INTO t SELECT counter FROM src;"
    return (
        impulse
        + table
        + blackhole
        + "INSERT INTO o SELECT s.counter FROM src AS s JOIN t ON s.counter = t.counter;"
    )


@pytest.mark.spark
@pytest.mark.parametrize("conn", _each(CONNECTORS))
def test_planning_contacts_nothing(
    conn: AnyConnector, spark: SparkSession, trap: _Trap, tmp_path: Path
) -> None:
    from arroyo.engine.catalog import spark_planner

    case = PLANNED.get(conn.name)
    assert case is not None, f"no contract case for connector '{conn.name}': add it to PLANNED"
    assert set(case.roles) == set(conn.roles), "a case plans every role the connector takes"
    (tmp_path / "in").mkdir()
    for path in (tmp_path / "in.json", tmp_path / "in" / "part.json"):
        path.write_text('{"counter": 1}\n')
    for role, options in case.roles.items():
        port = trap.address.rsplit(":", 1)[1]
        filled = options.format(trap=trap.address, dir=tmp_path, port=port)
        columns = case.lookup_columns if role == "lookup" and case.lookup_columns else case.columns
        sql = _plan_sql(conn, role, filled, columns)
        program = spark_planner(spark, state_dir=tmp_path / "planning" / role).plan(sql)
        assert program.queries, sql
    assert not trap.contacted.wait(1.0), f"planning a '{conn.name}' table contacted its system"


# -- a replayed batch writes nothing twice ------------------------------------------------------


@dataclass(frozen=True)
class Sink:
    """A sink table's options (the WITH clause after its connector), and its output read back
    as a reader of its system reads it, outside Spark: one decoded record per row."""

    options: str
    read: Callable[[], list[dict[str, Any]]]


SinkCase = Callable[[pytest.FixtureRequest, Path], Sink]


def _json_lines(data: bytes, *, shared: bool = False) -> list[dict[str, Any]]:
    """One record per line; ``shared``: the stream has other writers too (standard output, where
    logs go), whose lines are not records."""
    rows = []
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            if shared:
                continue
            raise
        if isinstance(value, dict):
            rows.append(value)
    return rows


def _single_file(request: pytest.FixtureRequest, work: Path) -> Sink:
    path = work / "out.json"
    return Sink(
        f"path = '{path}'",
        lambda: _json_lines(path.read_bytes()) if path.exists() else [],
    )


def _visible_files(root: Path) -> list[Path]:
    """What a plain listing reader takes: every file but hidden ones (``.``, ``_``)."""
    if not root.is_dir():
        return []
    return sorted(
        f
        for f in root.rglob("*")
        if f.is_file() and not any(p.startswith((".", "_")) for p in f.relative_to(root).parts)
    )


def _filesystem(fmt: str) -> SinkCase:
    def case(request: pytest.FixtureRequest, work: Path) -> Sink:
        import pyarrow.parquet as pq

        root = work / "out"

        def read() -> list[dict[str, Any]]:
            if fmt == "parquet":
                return [r for f in _visible_files(root) for r in pq.read_table(f).to_pylist()]
            return [r for f in _visible_files(root) for r in _json_lines(f.read_bytes())]

        return Sink(f"path = '{root}', format = '{fmt}'", read)

    return case


def _stdout(request: pytest.FixtureRequest, work: Path) -> Sink:
    from arroyo.connectors.stdout.sink import route_stdout, stdout_route

    capfd: pytest.CaptureFixture[str] = request.getfixturevalue("capfd")
    # This test's rows go to this process's standard output, whatever another test installed.
    route = stdout_route()
    route_stdout(None)
    request.addfinalizer(lambda: route_stdout(route))
    return Sink("", lambda: _json_lines(capfd.readouterr().out.encode(), shared=True))


def _blackhole(request: pytest.FixtureRequest, work: Path) -> Sink:
    return Sink("", list)


def _plaintext(broker: KafkaBroker) -> str:
    return f"bootstrap_servers = '{broker.bootstrap_servers}'"


def _sasl_ssl(broker: KafkaBroker) -> str:
    """A confluent table's connection: the broker's SASL_SSL listener, trusting its CA."""
    return (
        f"bootstrap_servers = '{broker.sasl_ssl_bootstrap_servers}', key = 'alice', "
        f"secret = 'alice-secret', 'ssl.ca_file' = '{broker.ca_file}'"
    )


def _kafka(commit_mode: str, connection: Callable[[KafkaBroker], str] = _plaintext) -> SinkCase:
    def case(request: pytest.FixtureRequest, work: Path) -> Sink:
        broker: KafkaBroker = request.getfixturevalue("kafka_broker")
        topic: str = request.getfixturevalue("kafka_topic")

        def read() -> list[dict[str, Any]]:
            records = broker.consume(topic, isolation="read_committed")
            return [json.loads(r.value) for r in records if r.value is not None]

        return Sink(
            f"{connection(broker)}, topic = '{topic}', 'sink.commit_mode' = '{commit_mode}'",
            read,
        )

    return case


def _delta(request: pytest.FixtureRequest, work: Path) -> Sink:
    from deltalake import DeltaTable

    root = work / "delta"

    def read() -> list[dict[str, Any]]:
        if not (root / "_delta_log").is_dir():
            return []
        return DeltaTable(str(root)).to_pyarrow_table().to_pylist()

    return Sink(f"path = '{root}', format = 'parquet'", read)


def _iceberg(request: pytest.FixtureRequest, work: Path) -> Sink:
    from pyiceberg.table import StaticTable

    warehouse = work / "warehouse"
    metadata = warehouse / "n" / "t" / "metadata"

    def read() -> list[dict[str, Any]]:
        hint = metadata / "version-hint.text"
        if not hint.exists():
            return []
        version = hint.read_text().strip()
        table = StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))
        return table.scan().to_arrow().to_pylist()

    return Sink(
        f"'catalog.type' = 'hadoop', 'catalog.warehouse' = '{warehouse}', namespace = 'n', "
        "table_name = 't', format = 'parquet'",
        read,
    )


def _redis(request: pytest.FixtureRequest, work: Path) -> Sink:
    import redis

    server: RedisServer = request.getfixturevalue("redis_server")
    key = f"contract-{uuid.uuid4().hex[:8]}"

    def read() -> list[dict[str, Any]]:
        client = redis.Redis(server.host, server.port, password=server.password)
        try:
            return [json.loads(v) for v in client.lrange(key, 0, -1)]
        finally:
            client.close()

    return Sink(f"{server.options()}, target = 'list', 'target.key_prefix' = '{key}'", read)


def _mqtt(request: pytest.FixtureRequest, work: Path) -> Sink:
    from tests.connectors.test_mqtt import _Client

    broker: Mosquitto = request.getfixturevalue("mosquitto")
    topic = f"contract/{uuid.uuid4().hex[:8]}"
    reader = _Client(broker, subscribe=topic)
    request.addfinalizer(reader.close)

    def read() -> list[dict[str, Any]]:
        with reader.lock:
            return [json.loads(p) for _, p in reader.received]

    return Sink(f"{broker.options()}, topic = '{topic}', qos = 'AtLeastOnce'", read)


def _nats(request: pytest.FixtureRequest, work: Path) -> Sink:
    from tests.connectors.test_nats import _Client

    server: NatsServer = request.getfixturevalue("nats_server")
    subject = f"contract.{uuid.uuid4().hex[:8]}"
    reader = _Client(server)
    reader.subscribe(subject)
    request.addfinalizer(reader.close)

    def read() -> list[dict[str, Any]]:
        # The server hands a subscriber its messages asynchronously: what the sink published
        # and flushed may still be on its way here when the run ends. A marker published now on
        # the subject is routed after everything the server has already taken, so once it has
        # arrived, so has the sink's output.
        marker = f"end-{uuid.uuid4().hex}"
        reader.publish(subject, marker)
        wait_until(
            "the reader to get its end marker", lambda: marker.encode() in reader.received, 30
        )
        received = list(reader.received)
        return [json.loads(p) for p in received[: received.index(marker.encode())]]

    return Sink(f"{server.options()}, subject = '{subject}'", read)


def _kinesis(request: pytest.FixtureRequest, work: Path) -> Sink:
    from tests.connectors.test_kinesis import read_stream

    server: KinesisServer = request.getfixturevalue("kinesis")
    stream = f"contract-{uuid.uuid4().hex[:8]}"
    server.create_stream(stream, shards=2)
    return Sink(
        f"{server.options()}, stream_name = '{stream}'",
        lambda: [json.loads(r["Data"]) for r in read_stream(server, stream)],
    )


def _webhook(request: pytest.FixtureRequest, work: Path) -> Sink:
    from tests.aio import loop_thread
    from tests.connectors.test_webhook import Receiver

    stack = contextlib.ExitStack()
    request.addfinalizer(stack.close)
    receiver = Receiver(stack.enter_context(loop_thread("webhook-receiver", timeout_s=30)))
    stack.callback(receiver.close)
    return Sink(f"endpoint = '{receiver.url}', max_batch_size = '5'", receiver.records)


# Each sink's cases: (id, marks, case).
SINKS: dict[str, list[tuple[str, tuple[pytest.MarkDecorator, ...], SinkCase]]] = {
    "single_file": [("single_file", (), _single_file)],
    "filesystem": [
        ("filesystem-json", (), _filesystem("json")),
        ("filesystem-parquet", (), _filesystem("parquet")),
    ],
    "stdout": [("stdout", (), _stdout)],
    "redis": [("redis", (), _redis)],
    "mqtt": [("mqtt", (), _mqtt)],
    "nats": [("nats", (), _nats)],
    "kinesis": [("kinesis", (), _kinesis)],
    "webhook": [("webhook", (pytest.mark.http,), _webhook)],
    "blackhole": [("blackhole", (), _blackhole)],
    "kafka": [
        ("kafka-at_least_once", (pytest.mark.kafka,), _kafka("at_least_once")),
        ("kafka-exactly_once", (pytest.mark.kafka,), _kafka("exactly_once")),
    ],
    # Kafka's sink, logged in over SASL_SSL: the transactional one, on confluent-kafka's client.
    "confluent": [
        ("confluent-exactly_once", (pytest.mark.kafka,), _kafka("exactly_once", _sasl_ssl)),
    ],
    "delta": [("delta", (pytest.mark.lakehouse,), _delta)],
    "iceberg": [("iceberg", (pytest.mark.lakehouse,), _iceberg)],
}


def _sink_cases(*, lines: bool) -> list[Any]:
    params = []
    for conn in CONNECTORS:
        if not conn.capabilities.sink or (lines and not conn.capabilities.writes_lines):
            continue
        cases = SINKS.get(conn.name)
        if cases is None:
            params.append(pytest.param(conn, None, id=conn.name))
            continue
        for case_id, marks, case in cases:
            params.append(pytest.param(conn, case, id=case_id, marks=marks))
    return params


def _expected(conn: AnyConnector, sink: TableSpec) -> Callable[[list[dict[str, Any]]], None]:
    """The check of the rows read back against counters 0 to _ROWS - 1, by the delivery the
    sink table declares."""
    delivery = conn.delivery(conn.table_options(sink))
    wanted = Counter(range(_ROWS))

    def check(rows: list[dict[str, Any]]) -> None:
        got = Counter(r["counter"] for r in rows)
        if delivery == "exactly_once":
            assert got == wanted
        elif delivery == "at_least_once":
            assert set(got) == set(wanted)
        else:
            assert not rows

    return check


def _forget_commits(state: Path) -> int:
    """A crash after the sink wrote the last batch of events the first run committed (not an
    end-of-input batch) and before Spark recorded that commit; returns the batch's id."""
    checkpoint = query_checkpoint(state)
    commits = committed_batches(checkpoint)
    assert commits, "the first run committed no batch"
    replayed = min(max(commits), _ROWS // _ROWS_PER_BATCH - 1)
    forget_commit(checkpoint, replayed)
    return replayed


@pytest.mark.spark
@pytest.mark.parametrize(("conn", "case"), _sink_cases(lines=False))
def test_a_replayed_batch_is_written_once(
    conn: AnyConnector,
    case: SinkCase | None,
    spark: SparkSession,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.runner import PipelineRunner

    assert case is not None, f"no contract case for sink '{conn.name}': add it to SINKS"
    sink = case(request, tmp_path)
    sql = (
        f"CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000', "
        f"message_count = '{_ROWS}');\n"
        f"CREATE TABLE out WITH (connector = '{conn.name}', type = 'sink'"
        f"{', ' + sink.options if sink.options else ''});\n"
        f"INSERT INTO out SELECT counter FROM src;"
    )
    state = tmp_path / "state"
    program = spark_planner(spark, state_dir=state).plan(sql)
    first = PipelineRunner(
        spark, program, state, max_records_per_batch=_ROWS_PER_BATCH, stop_after_batches=2
    )
    first.start()
    assert not first.wait(timeout=_DEADLINE_S), "the first run finished before its stop"
    # The first run's last progress events may still be on Spark's listener bus; the resumed
    # run's listener would take them (the query keeps its id) for its own.
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    replayed = _forget_commits(state)
    program = spark_planner(spark, state_dir=state).plan(sql)
    # The replayed batch reads the offsets its first run logged, whatever the cap; the rows
    # after it come uncapped (seven more batches of three rows took the Delta case 87 s in CI).
    second = PipelineRunner(spark, program, state)
    second.start()
    assert second.wait(timeout=_DEADLINE_S), "the resumed run did not finish"
    checkpoint = query_checkpoint(state)
    assert (checkpoint / "commits" / str(replayed)).exists(), "the batch was not run again"
    _expected(conn, program.queries[0].sink)(sink.read())


def _stage_line_case(tmp_path: Path) -> tuple[AnyConnector, TableSpec, Sink]:
    """The internal stage, whose tables no SQL names: a stage of change records, read back as
    the stage's reader lists its batches."""
    from arroyo.connectors import connector
    from arroyo.connectors.runtime.stage_files import LINES_FILE, batch_dir, committed_batches
    from arroyo.connectors.stage import STAGE_CONNECTOR, stage_data_dir

    conn = connector(STAGE_CONNECTOR)
    assert conn is not None
    spec = TableSpec(
        "__stage0",
        STAGE_CONNECTOR,
        "sink",
        {},
        [ColumnSpec("counter", "BIGINT")],
        FormatSpec("debezium_json"),
    )
    root = stage_data_dir(table_state_dir(tmp_path, spec.name))

    def read() -> list[dict[str, Any]]:
        return [
            row
            for b in committed_batches(root)
            for row in _json_lines((batch_dir(root, b) / LINES_FILE).read_bytes())
        ]

    return conn, spec, Sink("", read)


def _write_batch(writer: LineWriter, batch_id: int, counters: range) -> None:
    """As the engine's batch functions do: a batch the sink committed is not written again."""
    if writer.committed(batch_id):
        return
    writer.write(batch_id, [json.dumps({"counter": c}).encode() + b"\n" for c in counters])


@pytest.mark.spark
@pytest.mark.parametrize(
    ("conn", "case"),
    [*_sink_cases(lines=True), *[pytest.param(c, None, id=c.name) for c in INTERNAL]],
)
def test_a_line_writer_writes_a_replayed_batch_once(
    conn: AnyConnector,
    case: SinkCase | None,
    spark: SparkSession,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    from arroyo.engine.catalog import spark_planner

    if conn.internal:
        conn, spec, sink = _stage_line_case(tmp_path)
    else:
        assert case is not None, f"no contract case for sink '{conn.name}': add it to SINKS"
        sink = case(request, tmp_path)
        sql = (
            "CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
            f"CREATE TABLE out WITH (connector = '{conn.name}', type = 'sink'"
            f"{', ' + sink.options if sink.options else ''});\n"
            "INSERT INTO out SELECT counter FROM src;"
        )
        spec = spark_planner(spark, state_dir=tmp_path / "planning").plan(sql).queries[0].sink
    context = WriteContext(spark, tmp_path / "sink", tmp_path)
    writer = conn.line_writer(context, spec, conn.table_options(spec))
    step = _ROWS // 3
    _write_batch(writer, 0, range(0, step))
    _write_batch(writer, 1, range(step, 2 * step))
    _write_batch(writer, 1, range(step, 2 * step))
    # A writer made again, as after a restart, replays the batch too.
    writer = conn.line_writer(context, spec, conn.table_options(spec))
    _write_batch(writer, 1, range(step, 2 * step))
    _write_batch(writer, 2, range(2 * step, _ROWS))
    conn.release()
    _expected(conn, spec)(sink.read())
