"""The Kafka source: Spark's own Kafka source (JVM), and the consumer group it reports to.

Records never pass through Python. The offsets live in the query's checkpoint, so a restart
resumes exactly where the last committed micro-batch ended; after each committed batch they are
also committed to the source's consumer group, so that the usual lag tools see the pipeline's
progress (the checkpoint, not the group, is what a restart reads).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from arroyo.connectors.base import ReadContext
from arroyo.connectors.kafka.client import (
    METADATA_TIMEOUT_S,
    KafkaUnavailableError,
    call,
    consumer,
    spark_options,
    stable_id,
)
from arroyo.connectors.kafka.options import KafkaConnection, KafkaOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from pyspark.sql import DataFrame

log = structlog.get_logger(__name__)

# Spark's name for "the earliest offset" in a startingOffsets JSON.
_SPARK_EARLIEST = -2


def group_id(opts: KafkaOptions, table: TableSpec, state_dir: Path) -> str:
    """The consumer group a source commits its progress to."""
    if opts.source_group_id:
        return opts.source_group_id
    prefix = opts.source_group_id_prefix or "arroyo"
    return f"{prefix}-{table.name}-{stable_id(state_dir)}"


def _source_description(topic: str) -> str:
    return f"KafkaV2[Subscribe[{topic}]]"


def read_topic(ctx: ReadContext, table: TableSpec, opts: KafkaOptions) -> DataFrame:
    """The topic's records as ``value``, their Kafka timestamp as the source time, and the
    metadata columns (``_meta_offset_id``...)."""
    from pyspark.sql import functions as F

    reader = ctx.spark.readStream.format("kafka").options(**spark_options(opts))
    reader = (
        reader.option("subscribe", opts.topic)
        .option("startingOffsets", _starting_offsets(ctx, table, opts))
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


def _starting_offsets(ctx: ReadContext, table: TableSpec, opts: KafkaOptions) -> str:
    """Where a new pipeline starts (a restored one resumes from its checkpoint instead)."""
    if opts.source_offset != "group" or ctx.planning:
        return "earliest" if opts.source_offset == "earliest" else "latest"
    from confluent_kafka import TopicPartition

    client = consumer(opts, group_id(opts, table, ctx.state_dir))
    try:
        metadata = call(opts, lambda: client.list_topics(opts.topic, timeout=METADATA_TIMEOUT_S))
        topic = metadata.topics[opts.topic]
        if topic.error is not None:
            raise KafkaUnavailableError(f"topic '{opts.topic}': {topic.error.str()}")
        partitions = [TopicPartition(opts.topic, p) for p in sorted(topic.partitions)]
        committed = call(opts, lambda: client.committed(partitions, timeout=METADATA_TIMEOUT_S))
    finally:
        client.close()
    # A partition the group never committed starts at its beginning.
    starts = {
        str(tp.partition): tp.offset if tp.offset >= 0 else _SPARK_EARLIEST for tp in committed
    }
    return json.dumps({opts.topic: starts})


def commit_progress(
    state_dir: Path, table: TableSpec, opts: KafkaOptions, offsets: dict[str, str]
) -> None:
    """Commit a committed micro-batch's end offsets to the source's consumer group, without
    waiting for the answer (``Connector.source_committed``)."""
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
        GroupCommitters.commit(opts, group, partitions)
    except KafkaException as err:
        log.warning("kafka_group_commit_failed", group=group, error=str(err))


class GroupCommitters:
    """One long-lived consumer per group, used only to commit a source's offsets: after each
    batch without waiting for the answer, and the last ones again, waiting, when the pipeline
    stops (an asynchronous commit still in flight would be lost with the consumer)."""

    _by_group: ClassVar[dict[tuple[str, str], tuple[Consumer, list[Any]]]] = {}

    @classmethod
    def commit(cls, opts: KafkaConnection, group: str, partitions: list[Any]) -> None:
        key = (opts.bootstrap_servers, group)
        committer = cls._by_group[key][0] if key in cls._by_group else consumer(opts, group)
        cls._by_group[key] = (committer, partitions)
        committer.commit(offsets=partitions, asynchronous=True)
        committer.poll(0)

    @classmethod
    def close_all(cls) -> None:
        from confluent_kafka import KafkaException

        while cls._by_group:
            (_, group), (committer, last) = cls._by_group.popitem()
            try:
                committer.commit(offsets=last, asynchronous=False)
            except KafkaException as err:
                log.warning("kafka_group_commit_failed", group=group, error=str(err))
            committer.close()
