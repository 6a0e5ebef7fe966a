"""A real Apache Kafka broker (KRaft, one node acting as broker and controller) for tests and
for local use.

The broker runs from its Maven jars, fetched once by ``fetch_broker()`` into
``~/.cache/arroyo/kafka-<version>/`` with pyspark's Ivy (``arroyo.engine.jars.retrieve``); it needs
only ``java`` on PATH. ``KafkaBroker.start(data_dir)`` formats ``data_dir`` on first use, starts
the JVM and returns once the broker answers metadata requests; it listens on 127.0.0.1 only:

- PLAINTEXT at ``bootstrap_servers``,
- SASL_PLAINTEXT with mechanism PLAIN at ``sasl_bootstrap_servers`` (``users``: name -> password),
- SASL_SSL with mechanism PLAIN, as Confluent Cloud takes logins, at ``sasl_ssl_bootstrap_servers``
  (a certificate for 127.0.0.1 signed by a local CA whose certificate is ``ca_file``),
- CONTROLLER (the KRaft quorum, not for clients).

Everything the broker writes stays under ``data_dir``: ``server.properties``, the log segments
(``kafka-logs/``), the certificates (``tls/``) and the JVM's output (``broker.log``). Settings
suit one node: replication factor 1 everywhere, topics auto-created with one partition, no
initial rebalance delay, one partition for the offsets and transaction state topics (they are
created on first use, and 50 partitions each cost seconds on a small machine).

From a shell, ``python -m arroyo.testing.kafka [--port 9092] [--dir DIR]`` runs one in the
foreground until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal, NamedTuple, Self

from arroyo.engine.jars import retrieve
from arroyo.engine.session import QUICK_JIT_OPTIONS
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.filelock import file_lock
from arroyo.testing import processes
from arroyo.testing.certificates import Certificates, write_certificates
from arroyo.testing.ports import free_port

KAFKA_VERSION = "4.1.1"
BROKER_PACKAGES: tuple[str, ...] = (
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    # Kafka logs through SLF4J 1.7 and ships no binding: without one it is silent, and a broker
    # that dies at startup would leave nothing to read in broker.log.
    "org.slf4j:slf4j-simple:1.7.36",
)
DEFAULT_USERS: dict[str, str] = {"alice": "alice-secret"}
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
_COMPLETE = "complete"
_JVM_OPTIONS = (
    "-Xmx512m",
    # Start fast: one GC thread, no C2 compiler (a test broker never runs long enough to gain).
    "-XX:+UseSerialGC",
    *QUICK_JIT_OPTIONS.split(),
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
)
_LOGS = "kafka-logs"
_TLS = "tls"
_client_log = logging.getLogger("arroyo.testing.kafka.client")

Isolation = Literal["read_uncommitted", "read_committed"]


class KafkaBrokerError(ArroyoError):
    """The test broker could not be fetched, started or used; when its JVM failed, the message
    carries the errors from ``broker.log``."""

    code = "kafka_broker"
    domain = ErrorDomain.EXTERNAL


class KafkaRecord(NamedTuple):
    """One record as ``KafkaBroker.consume`` read it; ``timestamp`` in epoch milliseconds."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int


def broker_jar_dir() -> Path:
    """Where the broker's jars live once fetched (shared by every checkout and virtualenv)."""
    return Path.home() / ".cache" / "arroyo" / f"kafka-{KAFKA_VERSION}"


def fetch_broker() -> Path:
    """Fetch the broker's jars into ``broker_jar_dir()`` unless they are there already; returns
    that directory.

    Safe to call from several processes at once (a file lock), and a fetch killed half-way leaves
    no directory that passes for complete: jars are retrieved into a temporary sibling, which is
    marked complete and then renamed into place. Needs the network only the first time.
    """
    target = broker_jar_dir()
    if (target / _COMPLETE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f"{target.name}.lock"):
        if (target / _COMPLETE).is_file():
            return target
        for stale in target.parent.glob(f"{target.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
        try:
            for coordinate in BROKER_PACKAGES:
                retrieve(coordinate, staging)
            (staging / _COMPLETE).write_text("\n".join(BROKER_PACKAGES) + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


class KafkaBroker:
    """One Kafka broker process (KRaft combined mode) and its data directory.

    Made by ``start()``; use it as a context manager, or call ``stop()``. The object owns the JVM
    it started and nothing else: ``stop()``/``kill()`` end that process, ``restart()`` starts a
    new one on the same ports and data (the "broker goes away mid-run" case). Not thread-safe:
    one test (or fixture) drives it. The admin helpers (``create_topic``, ``produce``,
    ``consume``) go through the PLAINTEXT listener.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int,
        sasl_port: int,
        sasl_ssl_port: int,
        controller_port: int,
        users: dict[str, str],
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.sasl_port = sasl_port
        self.sasl_ssl_port = sasl_ssl_port
        self.controller_port = controller_port
        self.users = dict(users)
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        port: int | None = None,
        sasl_port: int | None = None,
        sasl_ssl_port: int | None = None,
        users: dict[str, str] | None = None,
        timeout: float = START_TIMEOUT_S,
    ) -> KafkaBroker:
        """Start a broker on 127.0.0.1 keeping its data in ``data_dir`` (created, and formatted
        unless it already holds a broker's data); return once it serves metadata requests, or
        raise ``KafkaBrokerError`` (with the errors from its log) when the JVM exits first or
        ``timeout`` seconds pass. Ports left as None are picked free (``arroyo.testing.ports``).
        Fetches the jars first if needed (``fetch_broker``)."""
        users = DEFAULT_USERS if users is None else users
        for name, password in users.items():
            # They are written into a JAAS line unquoted (names) and double-quoted (passwords).
            if not name.isidentifier() or any(c in password for c in '"\\;\n'):
                raise KafkaBrokerError(
                    f"unsupported SASL user {name!r}: a name must be an identifier, a password "
                    "must not hold quotes, backslashes, semicolons or newlines"
                )
        broker = cls(
            data_dir.resolve(),
            port=port or free_port(),
            sasl_port=sasl_port or free_port(),
            sasl_ssl_port=sasl_ssl_port or free_port(),
            controller_port=free_port(),
            users=users,
        )
        broker._launch(timeout)
        return broker

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT listener, ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT (PLAIN) listener, ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def sasl_ssl_bootstrap_servers(self) -> str:
        """The SASL_SSL (PLAIN) listener, ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def ca_file(self) -> Path:
        """The PEM certificate of the CA that signed the SASL_SSL listener's certificate."""
        return self.data_dir / _TLS / "ca.pem"

    @property
    def log_path(self) -> Path:
        """The JVM's stdout and stderr, appended to across restarts."""
        return self.data_dir / "broker.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def sasl_config(self, username: str, password: str, *, tls: bool = False) -> dict[str, str]:
        """librdkafka settings for a client of the SASL listener as ``username``; ``tls``: of
        the SASL_SSL one, trusting ``ca_file``."""
        config = {
            "bootstrap.servers": self.sasl_bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": username,
            "sasl.password": password,
        }
        if tls:
            config["bootstrap.servers"] = self.sasl_ssl_bootstrap_servers
            config["security.protocol"] = "SASL_SSL"
            config["ssl.ca.location"] = str(self.ca_file)
        return config

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a clean shutdown, logs flushed), then SIGKILL if the JVM is still there after
        ``timeout`` seconds. Does nothing when the broker is not running."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)  # a paused broker would not hear SIGTERM
        processes.stop(self._process, timeout=timeout)
        self._process = None

    def kill(self) -> None:
        """SIGKILL: the broker vanishes as in a crash (no controlled shutdown)."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        self._process = None

    def pause(self) -> None:
        """SIGSTOP: the broker hangs as in a long GC pause or a frozen machine; its sockets stay
        open but nothing answers until ``resume()``."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        if self._process is None or self._process.poll() is not None:
            raise KafkaBrokerError("the broker is not running")
        self._process.send_signal(signum)

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the broker again on the same ports and data (stopping it first if it runs);
        returns once it serves metadata requests, like ``start``."""
        self.stop()
        self._launch(timeout)

    def wait(self) -> int:
        """Block until the broker process exits; its exit code."""
        if self._process is None:
            raise KafkaBrokerError("the broker is not running")
        return self._process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create topic ``name`` (an existing one is fine, whatever its partitions) and wait
        until every partition has a leader, so producing and consuming can start at once."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient(self._client_config())
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        try:
            futures[name].result(timeout)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaBrokerError(f"could not create topic {name!r}: {err}") from err
        deadline = time.monotonic() + timeout
        while True:
            topic = admin.list_topics(name, timeout=timeout).topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and topic.partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"topic {name!r} has no leader after {timeout}s")
            time.sleep(0.05)

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | str],
        *,
        key: bytes | str | None = None,
        partition: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Write ``values`` in order (all with ``key``, to ``partition`` or the partitioner's
        choice) and return once every one is acknowledged by the broker; raise on any failure."""
        from confluent_kafka import Producer

        producer = Producer(self._client_config({"acks": "all", "linger.ms": 0}))
        failures: list[str] = []

        def delivered(err: Any, _message: Any) -> None:
            if err is not None:
                failures.append(str(err))

        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        for value in values:
            producer.produce(topic, value=value, key=key, on_delivery=delivered, **extra)
            producer.poll(0)
        left = producer.flush(timeout)
        if left or failures:
            raise KafkaBrokerError(
                f"producing to {topic!r}: {left} unacknowledged, failures: {failures[:5]}"
            )

    def consume(
        self, topic: str, *, isolation: Isolation = "read_uncommitted", timeout: float = 30.0
    ) -> list[KafkaRecord]:
        """Every record of ``topic`` from the beginning up to the end offsets of each partition
        as of the call (the high watermark; for ``read_committed`` the last stable offset, so
        records of open or aborted transactions are not returned), ordered by partition and
        offset. Needs no consumer group (partitions are assigned, nothing is committed); raises
        ``KafkaBrokerError`` when the ends are not reached within ``timeout`` seconds."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            self._client_config(
                {
                    "group.id": f"arroyo-testing-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "isolation.level": isolation,
                    "auto.offset.reset": "earliest",
                }
            )
        )
        try:
            metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
            if metadata is None or metadata.error is not None:
                raise KafkaBrokerError(f"no topic {topic!r}: {metadata and metadata.error}")
            deadline = time.monotonic() + timeout
            ends = {
                partition: self._high_watermark(consumer, topic, partition, deadline)
                for partition in metadata.partitions
            }
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(ends)])
            records: list[KafkaRecord] = []
            while not self._reached(consumer, topic, ends):
                if time.monotonic() > deadline:
                    raise KafkaBrokerError(
                        f"consuming {topic!r}: end offsets {ends} not reached in {timeout}s "
                        f"({len(records)} records read)"
                    )
                message = consumer.poll(0.1)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaBrokerError(f"consuming {topic!r}: {error}")
                partition, offset = message.partition(), message.offset()
                if partition is None or offset is None or offset >= ends[partition]:
                    continue
                records.append(
                    KafkaRecord(
                        key=message.key(),
                        value=message.value(),
                        partition=partition,
                        offset=offset,
                        timestamp=message.timestamp()[1],
                    )
                )
            return sorted(records, key=lambda r: (r.partition, r.offset))
        finally:
            consumer.close()

    @staticmethod
    def _high_watermark(consumer: Any, topic: str, partition: int, deadline: float) -> int:
        """The end offset of one partition (for a read_committed consumer its last stable
        offset). Just after a topic is created its metadata can already name a leader that does
        not yet act as one (NOT_LEADER_FOR_PARTITION): leadership errors are retried until the
        deadline."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        retried = {
            KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.LEADER_NOT_AVAILABLE,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
        }

        while True:
            try:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition),
                    timeout=max(deadline - time.monotonic(), 0.1),
                    cached=False,
                )
                return int(high)
            except KafkaException as err:
                if err.args[0].code() not in retried or time.monotonic() > deadline:
                    raise KafkaBrokerError(
                        f"end offset of {topic!r} partition {partition}: {err}"
                    ) from err
                time.sleep(0.05)

    @staticmethod
    def _reached(consumer: Any, topic: str, ends: dict[int, int]) -> bool:
        # The position moves past transaction markers and aborted records too, so it reaches
        # the end offset even when the last offsets hold no record for the application.
        from confluent_kafka import TopicPartition

        positions = consumer.position([TopicPartition(topic, p) for p in ends])
        return all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions)

    def _client_config(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            # librdkafka's own log lines (connection refused while the broker starts, ...) go
            # to Python logging instead of stderr.
            "logger": _client_log,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            **(settings or {}),
        }

    def _properties(self, tls: Certificates) -> str:
        jaas = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
        login = f"org.apache.kafka.common.security.plain.PlainLoginModule required {jaas};"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"{self._client_listeners()},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": self._client_listeners(),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                "CONTROLLER:PLAINTEXT"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": login,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": login,
            # The certificate and its key inline (PEM), where the key may be unencrypted (a
            # file-based PEM keystore wants it encrypted); _inline escapes the line breaks.
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.certificate.chain": _inline(tls.cert),
            "listener.name.sasl_ssl.ssl.keystore.key": _inline(tls.key),
            "log.dirs": str(self.data_dir / _LOGS),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "min.insync.replicas": "1",
            "default.replication.factor": "1",
            # After a kill, the new process can register only once the old one's session has
            # expired: keep that short (default 9 s) so restart() is quick.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _client_listeners(self) -> str:
        return (
            f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
            f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}"
        )

    def _java(self, jars: Path, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise KafkaBrokerError("no java on PATH: the Kafka broker needs a Java runtime")
        return [java, *_JVM_OPTIONS, "-cp", f"{jars}/*", main, *args]

    def _launch(self, timeout: float) -> None:
        jars = fetch_broker()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tls_dir = self.data_dir / _TLS
        tls = Certificates(tls_dir / "ca.pem", tls_dir / "server.pem", tls_dir / "server.key")
        if not all(path.is_file() for path in tls):
            tls = write_certificates(tls_dir, "127.0.0.1")
        properties = self.data_dir / "server.properties"
        properties.write_text(self._properties(tls))
        if not (self.data_dir / _LOGS / "meta.properties").is_file():
            cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
            formatted = subprocess.run(
                self._java(
                    jars,
                    "kafka.tools.StorageTool",
                    "format",
                    # One argument: an id may start with "-".
                    f"--cluster-id={cluster_id}",
                    "--config",
                    str(properties),
                ),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            if formatted.returncode != 0:
                raise KafkaBrokerError(
                    f"formatting {self.data_dir / _LOGS} failed ({formatted.returncode}):\n"
                    f"{_last_lines(formatted.stdout + formatted.stderr)}"
                )
        with self.log_path.open("ab") as log:
            run_start = log.tell()
            self._process = subprocess.Popen(
                self._java(jars, "kafka.Kafka", str(properties)),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                # Its own session: a Ctrl-C meant for the caller does not reach the JVM, whose
                # shutdown the caller drives (stop()).
                start_new_session=True,
            )
        try:
            self._wait_until_ready(timeout, run_start)
        except BaseException:
            self.kill()
            raise

    def _wait_until_ready(self, timeout: float, run_start: int) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self._client_config())
        deadline = time.monotonic() + timeout
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise KafkaBrokerError(
                    f"the Kafka broker exited ({code}) before it was ready; "
                    f"{self.log_path}:\n{_excerpt(self.log_path, run_start)}"
                )
            try:
                if admin.list_topics(timeout=1.0).brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise KafkaBrokerError(
                    f"the Kafka broker was not ready after {timeout}s; "
                    f"{self.log_path}:\n{_excerpt(self.log_path, run_start)}"
                )
            time.sleep(0.1)


def _inline(pem: Path) -> str:
    return pem.read_text().strip().replace("\n", "\\n")


def _last_lines(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


_PROBLEM = re.compile(r" (ERROR|FATAL) |^Caused by: |^[\w.$]+(Exception|Error)\b")


def _excerpt(path: Path, start: int, problems: int = 12, tail: int = 8) -> str:
    """What a failed start wrote to ``path`` from byte ``start`` on: its first error lines
    (exception headers and causes, not stack frames), then its last lines; a failed broker
    logs its whole shutdown after the error, so a plain tail hides the cause."""
    try:
        with path.open("rb") as log:
            log.seek(start)
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    found = [line for line in lines if _PROBLEM.search(line)][:problems]
    return "\n".join([*found, "...", *lines[-tail:]] if found else lines[-tail:])


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m arroyo.testing.kafka",
        description="Run a single-node Kafka broker in the foreground until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=9092, help="PLAINTEXT port (default 9092)")
    parser.add_argument(
        "--sasl-port", type=int, default=None, help="SASL_PLAINTEXT port (default: a free one)"
    )
    parser.add_argument(
        "--sasl-ssl-port", type=int, default=None, help="SASL_SSL port (default: a free one)"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="data directory, kept (default: a temporary one)"
    )
    args = parser.parse_args(argv)

    def interrupted(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    temporary = args.dir is None
    data_dir: Path = Path(tempfile.mkdtemp(prefix="arroyo-kafka-")) if temporary else args.dir
    broker: KafkaBroker | None = None
    try:
        broker = KafkaBroker.start(
            data_dir, port=args.port, sasl_port=args.sasl_port, sasl_ssl_port=args.sasl_ssl_port
        )
        users = ", ".join(f"{u}/{p}" for u, p in broker.users.items())
        print(f"kafka {KAFKA_VERSION}: PLAINTEXT on {broker.bootstrap_servers}", flush=True)
        print(f"SASL_PLAINTEXT (PLAIN, {users}) on {broker.sasl_bootstrap_servers}", flush=True)
        print(
            f"SASL_SSL (PLAIN, {users}) on {broker.sasl_ssl_bootstrap_servers}, "
            f"CA {broker.ca_file}",
            flush=True,
        )
        print(f"data and broker.log in {data_dir}; Ctrl-C stops it", flush=True)
        code = broker.wait()
        print(f"the broker exited ({code}); see {broker.log_path}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except KafkaBrokerError as err:
        print(err, file=sys.stderr)
        return 1
    finally:
        # A second Ctrl-C must not abandon the JVM half-way through its shutdown.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if broker is not None:
            broker.stop()
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_main())
