"""What the Kafka source and sink share: the clients' settings, the requests' errors, and names
that stay the same across restarts of a pipeline."""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.kafka.options import KafkaConnection
from arroyo.connectors.runtime.remote_state import identity
from arroyo.errors import ErrorDomain

if TYPE_CHECKING:
    from confluent_kafka import Consumer

TEST_TIMEOUT_S = 10.0
METADATA_TIMEOUT_S = 30.0
TRANSACTION_TIMEOUT_S = 60.0
_librdkafka_log = logging.getLogger("arroyo.connectors.kafka.librdkafka")


class KafkaUnavailableError(ConnectorError):
    """The brokers could not be reached or refused a request; retried by the controller."""

    code = "kafka_unavailable"
    domain = ErrorDomain.EXTERNAL
    retryable = True


class AbandonedCallError(KafkaUnavailableError):
    """A client call that ignored its own timeout; the client it was made on is unusable."""


def stable_id(state_dir: Path) -> str:
    """A name for this pipeline's table that is the same across restarts of the pipeline, on
    whichever machine when its state is in an object store."""
    return hashlib.sha1(identity(state_dir).encode()).hexdigest()[:12]


def spark_options(opts: KafkaConnection) -> dict[str, str]:
    """Options of Spark's Kafka source and sink: the Java client's settings under ``kafka.``."""
    options = {f"kafka.{k}": v for k, v in opts.client_config().items()}
    jaas = opts.jaas_config()
    if jaas is not None:
        options["kafka.sasl.jaas.config"] = jaas
    return options


def call(opts: KafkaConnection, request: Any) -> Any:
    """Run a client request, turning Kafka's errors into one that names the cluster."""
    from confluent_kafka import KafkaException

    try:
        return request()
    except KafkaException as err:
        detail = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
        raise KafkaUnavailableError(f"Kafka at {opts.bootstrap_servers}: {detail}") from err


def call_bounded(opts: KafkaConnection, what: str, request: Any, timeout: float) -> Any:
    """``call`` on a thread of its own, given up after ``timeout`` seconds. For the librdkafka
    calls that can ignore their own timeout: ``send_offsets_to_transaction`` blocks for ever when
    the group coordinator went away and came back (librdkafka issues 5456 and 5511). The thread
    is left behind (a daemon, it holds nothing of ours) and the caller drops the client."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call(opts, request)))
        except BaseException as err:
            outcome.append((False, err))

    thread = threading.Thread(target=run, name=f"kafka-{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise AbandonedCallError(
            f"Kafka at {opts.bootstrap_servers}: {what} did not finish in {timeout:.0f} s"
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def consumer(opts: KafkaConnection, group: str) -> Consumer:
    from confluent_kafka import Consumer

    return Consumer(
        {
            **opts.librdkafka_config(),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )


def describe_cluster(opts: KafkaConnection) -> str:
    """What a connection profile's test finds: the brokers and the topics. When it finds
    nothing, the error names the cause the client met on its way (a refused login, a
    certificate it could not verify), not only the failed request's own ("transport failure")."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    met: list[KafkaError] = []
    # librdkafka's log lines go to logging, not to the process's stderr.
    config: dict[str, Any] = {
        **opts.librdkafka_config(),
        "error_cb": met.append,
        "logger": _librdkafka_log,
    }
    admin = AdminClient(config)
    try:
        metadata = call(opts, lambda: admin.list_topics(timeout=TEST_TIMEOUT_S))
    except KafkaUnavailableError as err:
        admin.poll(0)  # the errors met are handed over here
        causes = [e for e in met if e.code() != KafkaError._ALL_BROKERS_DOWN]
        if not causes:
            raise
        raise KafkaUnavailableError(
            f"Kafka at {opts.bootstrap_servers}: {causes[0].str()}"
        ) from err
    topics = sorted(t for t in metadata.topics if not t.startswith("__"))
    return f"connected to {len(metadata.brokers)} broker(s); topics: {', '.join(topics)}"


def topic_names(opts: KafkaConnection) -> list[str]:
    """The cluster's topics, internal ones (``__consumer_offsets``) left out."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(opts.librdkafka_config())
    metadata = call(opts, lambda: admin.list_topics(timeout=TEST_TIMEOUT_S))
    return sorted(t for t in metadata.topics if not t.startswith("__"))


def newest_records(opts: KafkaConnection, topic: str, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the newest committed records of ``topic`` (from each partition, the
    last ``count``), oldest first; read without a group's offsets, committing none."""
    import time

    from confluent_kafka import TopicPartition

    client = consumer(opts, f"arroyo-sample-{time.time_ns()}")
    try:
        metadata = call(opts, lambda: client.list_topics(topic, timeout=TEST_TIMEOUT_S))
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            raise ConnectorError(f"Kafka at {opts.bootstrap_servers}: no topic '{topic}'")
        assigned, highs = [], []
        for partition in described.partitions:
            low, high = call(
                opts,
                lambda p=partition: client.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=TEST_TIMEOUT_S
                ),
            )
            if high > low:
                assigned.append(TopicPartition(topic, partition, max(low, high - count)))
                highs.append(high)
        if not assigned:
            return []
        client.assign(assigned)
        # Offsets that hold no record (transaction markers) leave fewer: then the time is up.
        expected = sum(high - p.offset for p, high in zip(assigned, highs, strict=True))
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < expected and time.monotonic() < deadline:
            message = client.poll(0.2)
            if message is None or message.error() is not None:
                continue
            records.append((message.timestamp()[1], message.value() or b""))
        return [value for _, value in sorted(records, key=lambda r: r[0])][-count:]
    finally:
        client.close()
