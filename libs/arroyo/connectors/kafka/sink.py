"""The Kafka sinks, by ``sink.commit_mode``:

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

import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from arroyo.connectors.base import ConnectorError, WriteContext
from arroyo.connectors.kafka.client import (
    METADATA_TIMEOUT_S,
    TRANSACTION_TIMEOUT_S,
    AbandonedCallError,
    KafkaUnavailableError,
    call,
    call_bounded,
    consumer,
    spark_options,
    stable_id,
)
from arroyo.connectors.kafka.options import KafkaOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

log = structlog.get_logger(__name__)

# (key, value, timestamp in ms) of one record.
Record = tuple[bytes | None, bytes, int | None]


def write_topic(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: KafkaOptions
) -> DataStreamWriter:
    """The sink of a streaming query: Spark's Kafka sink, or this module's transactional (or
    timestamping) writer called per micro-batch on the driver."""
    from arroyo.connectors.runtime.sinks import batch_in_flight, consume
    from arroyo.formats.codec import encode

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
    writer = record_writer(ctx, opts)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if writer.committed(batch_id):
                consume(batch)
                return
            writer.write_records(batch_id, _records(batch, opts))

    return encoded.writeStream.foreachBatch(write_batch)


def record_writer(ctx: WriteContext, opts: KafkaOptions) -> KafkaRecordWriter:
    """The sink's writer on the driver, named after the sink's state directory."""
    return KafkaRecordWriter(opts, stable_id(ctx.state_dir))


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


class KafkaRecordWriter:
    """Writes micro-batches to a topic from the driver through confluent-kafka's producer (a
    LineWriter, for updating and per-batch results, and the sink behind ``write_topic`` when
    Spark's Kafka sink cannot serve). Exactly once when the table asks for it: see the module
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
            config["transaction.timeout.ms"] = int(TRANSACTION_TIMEOUT_S * 1000)
        producer = Producer(config)
        # The transaction's marker offset is committed on the topic's partition 0, so the topic
        # must exist before the first (possibly empty) batch; asking for it creates it where
        # the brokers create topics on demand.
        metadata = call(
            self.opts, lambda: producer.list_topics(self.opts.topic, timeout=METADATA_TIMEOUT_S)
        )
        topic = metadata.topics.get(self.opts.topic)
        if topic is None or topic.error is not None:
            detail = topic.error.str() if topic is not None and topic.error else "not found"
            raise KafkaUnavailableError(f"Kafka topic '{self.opts.topic}': {detail}")
        if self.transactional:
            # Fences any producer with this id that is still alive (a worker being replaced) and
            # aborts the transaction it left open.
            call(self.opts, lambda: producer.init_transactions(METADATA_TIMEOUT_S))
            self._tracker = consumer(self.opts, self.sink_id)
        self._producer = producer
        return producer

    @classmethod
    def close_all(cls) -> None:
        """Close every writer's clients (their pipeline stopped); a writer used again reopens."""
        for writer in list(cls._open):
            if writer._producer is not None:
                writer._producer.flush(METADATA_TIMEOUT_S)
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
        [position] = call(
            self.opts,
            lambda: tracker.committed([self._marker(0)], timeout=METADATA_TIMEOUT_S),
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
            call(self.opts, producer.begin_transaction)
        try:
            for key, value, timestamp in records:
                self._produce(producer, key, value, timestamp, delivered)
            if self.transactional:
                assert self._tracker is not None
                tracker = self._tracker
                call_bounded(
                    self.opts,
                    "send_offsets_to_transaction",
                    lambda: producer.send_offsets_to_transaction(
                        [self._marker(batch_id + 1)],
                        tracker.consumer_group_metadata(),
                        METADATA_TIMEOUT_S,
                    ),
                    METADATA_TIMEOUT_S + 5,
                )
                call(self.opts, lambda: producer.commit_transaction(TRANSACTION_TIMEOUT_S))
            else:
                remaining = producer.flush(TRANSACTION_TIMEOUT_S)
                if remaining:
                    errors.append(f"{remaining} records not delivered in time")
        except AbandonedCallError:
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
                    producer.abort_transaction(METADATA_TIMEOUT_S)
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
