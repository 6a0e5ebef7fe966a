"""The Confluent Cloud connector on a real broker's SASL_SSL listener (a local CA's certificate,
trusted through ``ssl.ca_file``) and a real schema registry requiring basic auth: pipelines run
in this process's Spark."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.connectors.base import ConnectionProfile, ConnectorError
from arroyo.connectors.confluent import ConfluentConnection, ConfluentConnector
from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.certificates import write_certificates
from arroyo.testing.kafka import KafkaBroker
from arroyo.testing.schema_registry import SchemaRegistry
from tests.connectors.pipelines import json_lines
from tests.connectors.test_kafka import _events, _run_until, _values

_REGISTRY_LOGIN = ("sr-key", "sr-secret")


def _connection(broker: KafkaBroker, secret: str = "alice-secret") -> dict[str, str]:
    """A connection profile's settings for the broker's SASL_SSL listener, as alice."""
    return {
        "bootstrap_servers": broker.sasl_ssl_bootstrap_servers,
        "key": "alice",
        "secret": secret,
        "ssl.ca_file": str(broker.ca_file),
    }


def _with(settings: dict[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in settings.items())


def _source(topic: str, connection: str, extra: str = "") -> str:
    return (
        f"CREATE TABLE events (id BIGINT, user TEXT, ts TIMESTAMP, "
        f"WATERMARK FOR ts AS ts - INTERVAL '1 second') WITH (connector = 'confluent', "
        f"{connection}, topic = '{topic}', type = 'source', format = 'json', "
        f"'source.offset' = 'earliest'{extra});\n"
    )


def _sink(topic: str, connection: str, extra: str = "") -> str:
    return (
        f"CREATE TABLE out WITH (connector = 'confluent', {connection}, topic = '{topic}', "
        f"type = 'sink', format = 'json'{extra});\n"
    )


def _committed(broker: KafkaBroker, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of each partition, read over SASL_SSL."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {**broker.sasl_config("alice", "alice-secret", tls=True), "group.id": group}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("commit_mode", ["at_least_once", "exactly_once"])
def test_round_trip_over_sasl_ssl(
    spark: SparkSession,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    tmp_path: Path,
    commit_mode: str,
) -> None:
    """Spark's Kafka source and sink (the Java client) and confluent-kafka (the transactional
    sink, the group commits) all log in over TLS, trusting the CA file."""
    out = f"{kafka_topic}-out"
    kafka_broker.create_topic(out)
    kafka_broker.produce(kafka_topic, _events(0, 30))
    connection = _with(_connection(kafka_broker))
    group = f"{kafka_topic}-group"
    sql = (
        _source(kafka_topic, connection, f", 'source.group_id' = '{group}'")
        + _sink(out, connection, f", 'sink.commit_mode' = '{commit_mode}'")
        + "INSERT INTO out SELECT id, user FROM events;"
    )
    _run_until(spark, sql, tmp_path / "state", lambda: len(_values(kafka_broker, out)) >= 30)

    ids = Counter(r["id"] for r in _values(kafka_broker, out))
    assert ids == Counter(range(30))
    assert sum(_committed(kafka_broker, group, kafka_topic).values()) == 30


@pytest.mark.kafka
def test_test_connection_finds_the_cluster(kafka_broker: KafkaBroker, kafka_topic: str) -> None:
    settings = ConfluentConnection.model_validate(_connection(kafka_broker))

    found = ConfluentConnector().test_connection(settings)

    assert found.startswith("connected to 1 broker(s)")
    assert kafka_topic in found


@pytest.mark.kafka
def test_autocomplete_and_sample_read_the_cluster(
    kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    kafka_broker.produce(kafka_topic, [f"v{i}" for i in range(5)], partition=0)
    conn = ConfluentConnector()
    settings = _connection(kafka_broker)

    topics = conn.autocomplete(ConfluentConnection.model_validate(settings))["topic"]
    sampled = conn.sample(conn.parse_options({**settings, "topic": kafka_topic}), 3, 10.0)

    assert kafka_topic in topics
    assert sampled == [b"v2", b"v3", b"v4"]


@pytest.mark.kafka
def test_a_wrong_secret_fails_the_test_naming_the_servers_and_the_cause(
    kafka_broker: KafkaBroker,
) -> None:
    settings = ConfluentConnection.model_validate(_connection(kafka_broker, secret="wrong"))

    with pytest.raises(ConnectorError) as failure:
        ConfluentConnector().test_connection(settings)

    assert failure.value.code == "kafka_unavailable"
    assert kafka_broker.sasl_ssl_bootstrap_servers in failure.value.message
    assert "authentication" in failure.value.message.lower()


@pytest.mark.kafka
def test_a_ca_that_did_not_sign_the_brokers_certificate_fails_the_test(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    settings = ConfluentConnection.model_validate(
        {
            **_connection(kafka_broker),
            "ssl.ca_file": str(write_certificates(tmp_path, "127.0.0.1").ca),
        }
    )

    with pytest.raises(ConnectorError) as failure:
        ConfluentConnector().test_connection(settings)

    assert kafka_broker.sasl_ssl_bootstrap_servers in failure.value.message
    assert "certificate" in failure.value.message


@pytest.mark.kafka
@pytest.mark.spark
def test_a_wrong_secret_fails_the_pipeline_with_the_cause(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    kafka_broker.produce(kafka_topic, _events(0, 3))
    connection = _with(_connection(kafka_broker, secret="wrong"))
    out = tmp_path / "out.json"
    sql = (
        _source(kafka_topic, connection)
        + f"CREATE TABLE o WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"
        + "INSERT INTO o SELECT id FROM events;"
    )

    with pytest.raises(JobFailedError, match=r"(?i)authentication"):
        _run_until(spark, sql, tmp_path / "state", lambda: False)


@pytest.mark.spark
def test_a_connection_profile_gives_a_table_its_connection(
    spark: SparkSession, tmp_path: Path
) -> None:
    profile = ConnectionProfile(
        "cloud",
        "confluent",
        {"bootstrap_servers": "pkc-1.example:9092", "key": "k", "secret": "s"},
    )
    planner = spark_planner(spark, state_dir=tmp_path, profiles={"cloud": profile})
    program = planner.plan(
        "CREATE TABLE t (v TEXT) WITH (connector = 'confluent', connection_profile = 'cloud', "
        "topic = 'x', type = 'source');\nSELECT * FROM t;"
    )

    [table] = program.sources
    assert table.options["key"] == "k"
    assert table.options["bootstrap_servers"] == "pkc-1.example:9092"


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "code", "named"),
    [
        ("bootstrap_servers = 'h:9092', secret = 's'", "missing_option", "key"),
        ("bootstrap_servers = 'h:9092', key = 'k'", "missing_option", "secret"),
        ("key = 'k', secret = 's'", "missing_option", "bootstrap_servers"),
        ("bootstrap_servers = 'h', key = 'k', secret = 's'", "bad_option", "bootstrap_servers"),
        (
            "bootstrap_servers = 'h:9092', key = 'k', secret = 's', "
            "'schema_registry.endpoint' = 'https://sr.example', "
            "'schema_registry.api_secret' = 'x'",
            "bad_option",
            "schema_registry.api_key",
        ),
        (
            "bootstrap_servers = 'h:9092', key = 'k', secret = 's', 'auth.type' = 'sasl'",
            "unknown_option",
            "auth.type",
        ),
    ],
)
def test_refused_options(
    spark: SparkSession, tmp_path: Path, options: str, code: str, named: str
) -> None:
    planner = spark_planner(spark, state_dir=tmp_path)
    sql = (
        f"CREATE TABLE t (v TEXT) WITH (connector = 'confluent', type = 'source', "
        f"topic = 'x', {options});\nSELECT * FROM t;"
    )

    with pytest.raises(PlanningError) as err:
        planner.plan(sql)

    assert err.value.code == code
    assert named in err.value.message


@pytest.fixture(scope="module")
def secured_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    """A schema registry that takes only requests with ``_REGISTRY_LOGIN`` (basic auth)."""
    with SchemaRegistry.start(
        tmp_path_factory.mktemp("registry"), basic_auth=_REGISTRY_LOGIN
    ) as registry:
        yield registry


@pytest.mark.kafka
@pytest.mark.spark
def test_avro_through_a_schema_registry_with_basic_auth(
    spark: SparkSession,
    kafka_broker: KafkaBroker,
    kafka_topic: str,
    secured_registry: SchemaRegistry,
    tmp_path: Path,
) -> None:
    """The registry's API key and secret reach it as basic auth: the sink registers the
    table's schema, the source reads records by the id they are framed with."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key, secret = _REGISTRY_LOGIN
    registry = _with(
        {
            "schema_registry.endpoint": secured_registry.url,
            "schema_registry.api_key": key,
            "schema_registry.api_secret": secret,
            "avro.confluent_schema_registry": "true",
        }
    )
    connection = _with(_connection(kafka_broker))
    framed = f"{kafka_topic}-avro"
    kafka_broker.create_topic(framed)
    kafka_broker.produce(kafka_topic, _events(0, 12))
    write = (
        _source(kafka_topic, connection)
        + f"CREATE TABLE out WITH (connector = 'confluent', {connection}, topic = '{framed}', "
        f"type = 'sink', format = 'avro', {registry});\n"
        + "INSERT INTO out SELECT id, user, ts FROM events;"
    )
    _run_until(spark, write, tmp_path / "w", lambda: len(kafka_broker.consume(framed)) >= 12)
    latest = SchemaRegistryClient(secured_registry.client_config()).get_latest_version(
        f"{framed}-value"
    )
    assert {r.value[1:5] for r in kafka_broker.consume(framed) if r.value} == {
        latest.schema_id.to_bytes(4, "big")
    }

    out = tmp_path / "out.json"
    read = (
        f"CREATE TABLE framed (id BIGINT, user TEXT, ts TIMESTAMP, WATERMARK FOR ts) WITH ("
        f"connector = 'confluent', {connection}, topic = '{framed}', type = 'source', "
        f"format = 'avro', 'source.offset' = 'earliest', {registry});\n"
        f"CREATE TABLE o WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"
        f"INSERT INTO o SELECT id, user, ts FROM framed;"
    )

    _run_until(spark, read, tmp_path / "r", lambda: len(json_lines(out)) >= 12)
    assert sorted(json_lines(out), key=lambda r: r["id"]) == [json.loads(e) for e in _events(0, 12)]
