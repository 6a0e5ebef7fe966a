"""What the Kafka source and sink share: the clients' settings, the requests' errors, and names
that stay the same across restarts of a pipeline."""

from __future__ import annotations

import hashlib
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
    """What a connection profile's test finds: the brokers and the topics."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(opts.librdkafka_config())
    metadata = call(opts, lambda: admin.list_topics(timeout=TEST_TIMEOUT_S))
    topics = sorted(t for t in metadata.topics if not t.startswith("__"))
    return f"connected to {len(metadata.brokers)} broker(s); topics: {', '.join(topics)}"
