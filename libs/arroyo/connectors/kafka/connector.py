"""The Kafka connector.

Source: Spark's own Kafka source (JVM): records never pass through Python. Its offsets live in
the query's checkpoint, so a restart resumes exactly where the last committed micro-batch ended;
after each committed batch the offsets are also committed to the source's consumer group, so
that the usual lag tools see the pipeline's progress (the checkpoint, not the group, is what a
restart reads). Event time is the record's Kafka timestamp unless the table declares WATERMARK
FOR.

Sinks, by ``sink.commit_mode``:

- ``at_least_once`` (default): Spark's Kafka sink, writing from the executors. A micro-batch
  replayed after a crash is written again.
- ``exactly_once``: each micro-batch is one Kafka transaction, written from the driver by a
  transactional producer whose id is stable for the sink (a restarted pipeline fences and aborts
  the transaction a dead one left open). The transaction also commits ``batch id + 1`` as the
  offset of a consumer group of the sink's own; a replayed batch whose transaction committed is
  skipped, one whose transaction did not is written again. A ``read_committed`` consumer sees
  every record once.

Spark's Kafka sink cannot set record timestamps, so a table with ``sink.timestamp_field`` writes
through the driver's producer as well (non-transactionally when at least once).
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    Delivery,
    LineWriter,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.kafka.options import KafkaConnection, KafkaOptions
from arroyo.errors import ErrorDomain
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = structlog.get_logger(__name__)

_TEST_TIMEOUT_S = 10.0
_METADATA_TIMEOUT_S = 30.0
_TRANSACTION_TIMEOUT_S = 60.0
# Spark's name for "the earliest offset" in a startingOffsets JSON.
_SPARK_EARLIEST = -2


class KafkaUnavailableError(ConnectorError):
    """The brokers could not be reached or refused a request; retried by the controller."""

    code = "kafka_unavailable"
    domain = ErrorDomain.EXTERNAL
    retryable = True


def _stable_id(state_dir: Path) -> str:
    """A name for this pipeline's table that is the same across restarts of the pipeline."""
    return hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:12]


def group_id(opts: KafkaOptions, table: TableSpec, state_dir: Path) -> str:
    """The consumer group a source commits its progress to."""
    if opts.source_group_id:
        return opts.source_group_id
    prefix = opts.source_group_id_prefix or "arroyo"
    return f"{prefix}-{table.name}-{_stable_id(state_dir)}"


def spark_options(opts: KafkaConnection) -> dict[str, str]:
    """Options of Spark's Kafka source and sink: the Java client's settings under ``kafka.``."""
    options = {f"kafka.{k}": v for k, v in opts.client_config().items()}
    jaas = opts.jaas_config()
    if jaas is not None:
        options["kafka.sasl.jaas.config"] = jaas
    return options


def _source_description(topic: str) -> str:
    return f"KafkaV2[Subscribe[{topic}]]"


class KafkaConnector(Connector[KafkaOptions, KafkaConnection]):
    """Delivery: the source replays from the checkpoint's offsets; the sink is at least once
    or exactly once, by ``sink.commit_mode`` (see the module docstring)."""

    name = "kafka"
    description = "Apache Kafka topics"
    capabilities = Capabilities(
        source=True,
        sink=True,
        replayable=True,
        delivery="exactly_once",
        needs_format=True,
        writes_lines=True,
        source_time=True,
    )
    options_model = KafkaOptions
    connection_model = KafkaConnection
    formats = frozenset({"json", "debezium_json", "avro", "protobuf", "raw_string", "raw_bytes"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "offset_id": ("BIGINT",),
        "partition": ("INT", "BIGINT"),
        "topic": ("STRING",),
        "timestamp": ("TIMESTAMP",),
        "key": ("STRING", "BINARY"),
    }

    def delivery(self, options: KafkaOptions) -> Delivery:
        return options.sink_commit_mode

    def test_connection(self, options: KafkaConnection) -> str:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(options.librdkafka_config())
        metadata = _call(options, lambda: admin.list_topics(timeout=_TEST_TIMEOUT_S))
        topics = sorted(t for t in metadata.topics if not t.startswith("__"))
        return f"connected to {len(metadata.brokers)} broker(s); topics: {', '.join(topics)}"

    # -- source ----------------------------------------------------------------------------

    def read(self, ctx: ReadContext, table: TableSpec, options: KafkaOptions) -> DataFrame:
        from pyspark.sql import functions as F

        opts = options
        reader = ctx.spark.readStream.format("kafka").options(**spark_options(opts))
        reader = (
            reader.option("subscribe", opts.topic)
            .option("startingOffsets", self._starting_offsets(ctx, table, opts))
            .option("kafka.isolation.level", opts.source_read_mode)
            .option("includeHeaders", "false")
        )
        if ctx.max_records_per_batch:
            reader = reader.option("maxOffsetsPerTrigger", ctx.max_records_per_batch)
        df = reader.load()
        return df.select(
            F.col("value"),
            F.col("timestamp").alias("_source_time"),
            F.lit(False).alias("_eoi"),
            F.col("offset").alias("_meta_offset_id"),
            F.col("partition").alias("_meta_partition"),
            F.col("topic").alias("_meta_topic"),
            F.col("timestamp").alias("_meta_timestamp"),
            F.col("key").alias("_meta_key"),
        )

    def _starting_offsets(self, ctx: ReadContext, table: TableSpec, opts: KafkaOptions) -> str:
        """Where a new pipeline starts (a restored one resumes from its checkpoint instead)."""
        if opts.source_offset != "group" or ctx.planning:
            return "earliest" if opts.source_offset == "earliest" else "latest"
        from confluent_kafka import TopicPartition

        consumer = _consumer(opts, group_id(opts, table, ctx.state_dir))
        try:
            metadata = _call(
                opts, lambda: consumer.list_topics(opts.topic, timeout=_METADATA_TIMEOUT_S)
            )
            topic = metadata.topics[opts.topic]
            if topic.error is not None:
                raise KafkaUnavailableError(f"topic '{opts.topic}': {topic.error.str()}")
            partitions = [TopicPartition(opts.topic, p) for p in sorted(topic.partitions)]
            committed = _call(
                opts, lambda: consumer.committed(partitions, timeout=_METADATA_TIMEOUT_S)
            )
        finally:
            consumer.close()
        # A partition the group never committed starts at its beginning.
        starts = {
            str(tp.partition): tp.offset if tp.offset >= 0 else _SPARK_EARLIEST for tp in committed
        }
        return json.dumps({opts.topic: starts})

    def source_committed(
        self, state_dir: Path, table: TableSpec, options: KafkaOptions, offsets: dict[str, str]
    ) -> None:
        opts = options
        end = offsets.get(_source_description(opts.topic))
        if not end:
            return
        from confluent_kafka import KafkaException, TopicPartition

        positions = json.loads(end).get(opts.topic, {})
        partitions = [TopicPartition(opts.topic, int(p), int(o)) for p, o in positions.items()]
        if not partitions:
            return
        group = group_id(opts, table, state_dir)
        try:
            _GroupCommitters.commit(opts, group, partitions)
        except KafkaException as err:
            log.warning("kafka_group_commit_failed", group=group, error=str(err))

    def release(self) -> None:
        _GroupCommitters.close_all()
        KafkaRecordWriter.close_all()

    # -- sinks -----------------------------------------------------------------------------

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: KafkaOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.runtime.sinks import batch_in_flight, consume
        from arroyo.formats.codec import encode

        opts = options
        keep = [c for c in (opts.sink_key_field, opts.sink_timestamp_field) if c]
        for name in keep:
            if name not in df.columns:
                raise ConnectorError(
                    f"'{table.name}': sink.key_field/sink.timestamp_field names '{name}', "
                    f"which is not one of its columns ({', '.join(df.columns)})"
                )
        encoded = encode(df, table, keep=keep)
        if opts.sink_commit_mode == "at_least_once" and not opts.sink_timestamp_field:
            key = opts.sink_key_field
            columns = ["value", *([f"CAST(`{key}` AS STRING) AS key"] if key else [])]
            return (
                encoded.selectExpr(*columns)
                .writeStream.format("kafka")
                .options(**spark_options(opts))
                .option("topic", opts.topic)
            )
        writer = KafkaRecordWriter(opts, _stable_id(ctx.state_dir))

        def write_batch(batch: DataFrame, batch_id: int) -> None:
            with batch_in_flight():
                if writer.committed(batch_id):
                    consume(batch)
                    return
                writer.write_records(batch_id, _records(batch, opts))

        return encoded.writeStream.foreachBatch(write_batch)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: KafkaOptions) -> LineWriter:
        return KafkaRecordWriter(options, _stable_id(ctx.state_dir))


Record = tuple[bytes | None, bytes, int | None]


def _records(batch: DataFrame, opts: KafkaOptions) -> Iterator[Record]:
    """(key, value, timestamp in ms) of each encoded row, computed by Spark."""
    from pyspark.sql import functions as F

    key = (
        F.col(f"`{opts.sink_key_field}`").cast("BINARY")
        if opts.sink_key_field
        else F.lit(None).cast("BINARY")
    )
    timestamp = (
        F.unix_millis(F.col(f"`{opts.sink_timestamp_field}`"))
        if opts.sink_timestamp_field
        else F.lit(None).cast("BIGINT")
    )
    rows = batch.select(key, F.col("value").cast("BINARY"), timestamp)
    for k, v, ts in rows.toLocalIterator(prefetchPartitions=True):
        if v is not None:
            yield (bytes(k) if k is not None else None), bytes(v), ts


def _call(opts: KafkaConnection, request: Any) -> Any:
    """Run a client request, turning Kafka's errors into one that names the cluster."""
    from confluent_kafka import KafkaException

    try:
        return request()
    except KafkaException as err:
        detail = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
        raise KafkaUnavailableError(f"Kafka at {opts.bootstrap_servers}: {detail}") from err


class _AbandonedCallError(KafkaUnavailableError):
    """A client call that ignored its own timeout; the client it was made on is unusable."""


def _call_bounded(opts: KafkaConnection, what: str, request: Any, timeout: float) -> Any:
    """``_call`` on a thread of its own, given up after ``timeout`` seconds. For the librdkafka
    calls that can ignore their own timeout: ``send_offsets_to_transaction`` blocks for ever when
    the group coordinator went away and came back (librdkafka issues 5456 and 5511). The thread
    is left behind (a daemon, it holds nothing of ours) and the caller drops the client."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, _call(opts, request)))
        except BaseException as err:
            outcome.append((False, err))

    thread = threading.Thread(target=run, name=f"kafka-{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise _AbandonedCallError(
            f"Kafka at {opts.bootstrap_servers}: {what} did not finish in {timeout:.0f} s"
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _consumer(opts: KafkaConnection, group: str) -> Consumer:
    from confluent_kafka import Consumer

    return Consumer(
        {
            **opts.librdkafka_config(),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )


class _GroupCommitters:
    """One long-lived consumer per group, used only to commit a source's offsets: after each
    batch without waiting for the answer, and the last ones again, waiting, when the pipeline
    stops (an asynchronous commit still in flight would be lost with the consumer)."""

    _by_group: ClassVar[dict[tuple[str, str], tuple[Consumer, list[Any]]]] = {}

    @classmethod
    def commit(cls, opts: KafkaConnection, group: str, partitions: list[Any]) -> None:
        key = (opts.bootstrap_servers, group)
        consumer = cls._by_group[key][0] if key in cls._by_group else _consumer(opts, group)
        cls._by_group[key] = (consumer, partitions)
        consumer.commit(offsets=partitions, asynchronous=True)
        consumer.poll(0)

    @classmethod
    def close_all(cls) -> None:
        from confluent_kafka import KafkaException

        while cls._by_group:
            (_, group), (consumer, last) = cls._by_group.popitem()
            try:
                consumer.commit(offsets=last, asynchronous=False)
            except KafkaException as err:
                log.warning("kafka_group_commit_failed", group=group, error=str(err))
            consumer.close()


class KafkaRecordWriter:
    """Writes micro-batches to a topic from the driver through confluent-kafka's producer (a
    LineWriter, for updating and per-batch results, and the sink behind ``write`` when Spark's
    Kafka sink cannot serve). Exactly once when the table asks for it: see the module
    docstring. Created on the driver when a query starts; the producer is made on first use."""

    _open: ClassVar[weakref.WeakSet[KafkaRecordWriter]] = weakref.WeakSet()

    def __init__(self, opts: KafkaOptions, sink_id: str) -> None:
        KafkaRecordWriter._open.add(self)
        self.opts = opts
        self.transactional = opts.sink_commit_mode == "exactly_once"
        self.sink_id = f"arroyo-sink-{opts.topic}-{sink_id}"
        self._producer: Producer | None = None
        self._tracker: Consumer | None = None

    def _ensure(self) -> Producer:
        if self._producer is not None:
            return self._producer
        from confluent_kafka import Producer

        config: dict[str, str | int | float | bool] = {
            **self.opts.librdkafka_config(),
            "linger.ms": 20,
            "enable.idempotence": True,
        }
        if self.transactional:
            config["transactional.id"] = self.sink_id
            config["transaction.timeout.ms"] = int(_TRANSACTION_TIMEOUT_S * 1000)
        producer = Producer(config)
        # The transaction's marker offset is committed on the topic's partition 0, so the topic
        # must exist before the first (possibly empty) batch; asking for it creates it where
        # the brokers create topics on demand.
        metadata = _call(
            self.opts, lambda: producer.list_topics(self.opts.topic, timeout=_METADATA_TIMEOUT_S)
        )
        topic = metadata.topics.get(self.opts.topic)
        if topic is None or topic.error is not None:
            detail = topic.error.str() if topic is not None and topic.error else "not found"
            raise KafkaUnavailableError(f"Kafka topic '{self.opts.topic}': {detail}")
        if self.transactional:
            # Fences any producer with this id that is still alive (a worker being replaced) and
            # aborts the transaction it left open.
            _call(self.opts, lambda: producer.init_transactions(_METADATA_TIMEOUT_S))
            self._tracker = _consumer(self.opts, self.sink_id)
        self._producer = producer
        return producer

    @classmethod
    def close_all(cls) -> None:
        """Close every writer's clients (their pipeline stopped); a writer used again reopens."""
        for writer in list(cls._open):
            if writer._producer is not None:
                writer._producer.flush(_METADATA_TIMEOUT_S)
            if writer._tracker is not None:
                writer._tracker.close()
            writer._producer = writer._tracker = None

    def _marker(self, offset: int) -> Any:
        from confluent_kafka import TopicPartition

        return TopicPartition(self.opts.topic, 0, offset)

    def committed(self, batch_id: int) -> bool:
        if not self.transactional:
            return False
        self._ensure()
        assert self._tracker is not None
        tracker = self._tracker
        [position] = _call(
            self.opts,
            lambda: tracker.committed([self._marker(0)], timeout=_METADATA_TIMEOUT_S),
        )
        return bool(position.offset > batch_id)

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        self.write_records(batch_id, ((None, line.rstrip(b"\n"), None) for line in lines))

    def write_records(self, batch_id: int, records: Iterable[Record]) -> None:
        producer = self._ensure()
        errors: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err.str())

        if self.transactional:
            _call(self.opts, producer.begin_transaction)
        try:
            for key, value, timestamp in records:
                self._produce(producer, key, value, timestamp, delivered)
            if self.transactional:
                assert self._tracker is not None
                tracker = self._tracker
                _call_bounded(
                    self.opts,
                    "send_offsets_to_transaction",
                    lambda: producer.send_offsets_to_transaction(
                        [self._marker(batch_id + 1)],
                        tracker.consumer_group_metadata(),
                        _METADATA_TIMEOUT_S,
                    ),
                    _METADATA_TIMEOUT_S + 5,
                )
                _call(self.opts, lambda: producer.commit_transaction(_TRANSACTION_TIMEOUT_S))
            else:
                remaining = producer.flush(_TRANSACTION_TIMEOUT_S)
                if remaining:
                    errors.append(f"{remaining} records not delivered in time")
        except _AbandonedCallError:
            # The producer is stuck inside a transactional call, so it cannot abort: drop it.
            # The next batch makes a new one, whose init_transactions fences this one and
            # aborts the transaction it left open.
            if self._tracker is not None:
                self._tracker.close()
            self._producer = self._tracker = None
            raise
        except BaseException:
            if self.transactional:
                try:
                    producer.abort_transaction(_METADATA_TIMEOUT_S)
                except Exception as err:
                    log.warning("kafka_abort_failed", error=str(err))
            raise
        if errors:
            raise KafkaUnavailableError(
                f"writing to Kafka topic '{self.opts.topic}' failed: {errors[0]}"
            )

    def _produce(
        self,
        producer: Producer,
        key: bytes | None,
        value: bytes,
        timestamp: int | None,
        delivered: Any,
    ) -> None:
        kwargs: dict[str, Any] = {"on_delivery": delivered}
        if key is not None:
            kwargs["key"] = key
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                producer.produce(self.opts.topic, value, **kwargs)
                return
            except BufferError:
                # The local queue is full: let it drain into the brokers.
                producer.poll(0.05)
