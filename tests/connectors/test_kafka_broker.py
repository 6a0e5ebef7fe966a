"""The test Kafka broker itself (``arroyo.testing.kafka``): a real broker that the Kafka tests
rely on, so its listeners, its helpers and its restart are checked here first."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from arroyo.testing.kafka import KafkaBroker, KafkaBrokerError

pytestmark = pytest.mark.kafka

_quiet = logging.getLogger("tests.kafka_broker.client")


def test_a_produced_record_is_consumed_back(kafka_broker: KafkaBroker, kafka_topic: str) -> None:
    kafka_broker.produce(kafka_topic, ["one", b"two"], key="k", partition=1)
    kafka_broker.produce(kafka_topic, [b"three"], partition=0)

    records = kafka_broker.consume(kafka_topic)

    assert [(r.key, r.value, r.partition, r.offset) for r in records] == [
        (None, b"three", 0, 0),
        (b"k", b"one", 1, 0),
        (b"k", b"two", 1, 1),
    ]
    assert all(r.timestamp > 0 for r in records)
    key, value, partition, offset, _timestamp = records[0]
    assert (key, value, partition, offset) == (None, b"three", 0, 0)


def test_an_empty_topic_reads_as_empty(kafka_broker: KafkaBroker, kafka_topic: str) -> None:
    assert kafka_broker.consume(kafka_topic) == []


def test_read_committed_hides_open_transactions(
    kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "transactional.id": f"{kafka_topic}-tx",
            "logger": _quiet,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(kafka_topic, f"committed-{i}", partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(kafka_topic, "open", partition=0)
    producer.flush(30)

    committed = kafka_broker.consume(kafka_topic, isolation="read_committed")
    uncommitted = kafka_broker.consume(kafka_topic, isolation="read_uncommitted")

    assert sorted(r.value for r in committed) == [f"committed-{i}".encode() for i in range(4)]
    assert b"open" in {r.value for r in uncommitted}
    producer.abort_transaction(30)


def test_creating_an_existing_topic_is_fine(kafka_broker: KafkaBroker, kafka_topic: str) -> None:
    kafka_broker.create_topic(kafka_topic, partitions=2)


def test_the_sasl_listener_accepts_alice(kafka_broker: KafkaBroker, kafka_topic: str) -> None:
    admin = AdminClient({**kafka_broker.sasl_config("alice", "alice-secret"), "logger": _quiet})

    metadata = admin.list_topics(timeout=30)

    assert kafka_topic in metadata.topics
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [
        kafka_broker.sasl_bootstrap_servers
    ]


def test_the_sasl_listener_refuses_a_wrong_password(kafka_broker: KafkaBroker) -> None:
    errors: list[Any] = []
    admin = AdminClient(
        {
            **kafka_broker.sasl_config("alice", "not-her-password"),
            "error_cb": errors.append,
            "logger": _quiet,
        }
    )

    # The client connects at once; its errors arrive through poll().
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        admin.poll(0.1)

    assert errors, "no error reported for a wrong password"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()


def test_the_sasl_ssl_listener_accepts_alice_trusting_its_ca(
    kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    config = kafka_broker.sasl_config("alice", "alice-secret", tls=True)
    admin = AdminClient({**config, "logger": _quiet})

    metadata = admin.list_topics(timeout=30)

    assert kafka_topic in metadata.topics
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [
        kafka_broker.sasl_ssl_bootstrap_servers
    ]


def test_restart_after_kill_keeps_the_topic_data(tmp_path: Path) -> None:
    with KafkaBroker.start(tmp_path / "kafka") as broker:
        ports = (
            broker.bootstrap_servers,
            broker.sasl_bootstrap_servers,
            broker.sasl_ssl_bootstrap_servers,
        )
        broker.create_topic("kept", partitions=2)
        broker.produce("kept", [f"before-{i}" for i in range(10)])
        before = broker.consume("kept")

        broker.kill()
        assert not broker.running
        broker.restart()

        assert ports == (
            broker.bootstrap_servers,
            broker.sasl_bootstrap_servers,
            broker.sasl_ssl_bootstrap_servers,
        )
        assert broker.consume("kept") == before
        broker.produce("kept", ["after"])
        assert [r.value for r in broker.consume("kept")].count(b"after") == 1
    assert not broker.running


def test_a_taken_port_fails_the_start_with_the_cause(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(KafkaBrokerError) as failure:
            KafkaBroker.start(tmp_path / "kafka", port=port)

    assert failure.value.code == "kafka_broker"
    # The broker's own error, picked out of the shutdown noise that follows it in broker.log.
    assert "Address already in use" in failure.value.message
