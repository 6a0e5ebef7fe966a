"""``kafka``: topics as sources and sinks, on Spark's own Kafka connector."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    Delivery,
    LineWriter,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.kafka.options import KafkaConnection, KafkaOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class KafkaConnector(Connector[KafkaOptions, KafkaConnection]):
    """Source: Spark's own Kafka source (JVM), replayable: its offsets live in the query's
    checkpoint, so a restart resumes exactly where the last committed micro-batch ended, and
    each committed batch's offsets also go to the source's consumer group for lag tools
    (``source.py``). Event time is the record's Kafka timestamp unless the table declares
    WATERMARK FOR.

    Sink, by ``sink.commit_mode`` (``sink.py``): at least once by default (Spark's Kafka sink;
    a micro-batch replayed after a crash is written again), or exactly once (one Kafka
    transaction per micro-batch, which also records the batch id; a ``read_committed``
    consumer sees every record once).
    """

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

    def test_connection(self, settings: KafkaConnection) -> str:
        from arroyo.connectors.kafka.client import describe_cluster

        return describe_cluster(settings)

    def autocomplete(self, settings: KafkaConnection) -> dict[str, list[str]]:
        from arroyo.connectors.kafka.client import topic_names

        return {"topic": topic_names(settings)}

    def sample(self, options: KafkaOptions, count: int, timeout_s: float) -> list[bytes] | None:
        from arroyo.connectors.kafka.client import newest_records

        return newest_records(options, options.topic, count, timeout_s)

    def read(self, ctx: ReadContext, table: TableSpec, options: KafkaOptions) -> DataFrame:
        from arroyo.connectors.kafka.source import read_topic

        return read_topic(ctx, table, options)

    def source_committed(
        self, state_dir: Path, table: TableSpec, options: KafkaOptions, offsets: dict[str, str]
    ) -> None:
        from arroyo.connectors.kafka.source import commit_progress

        commit_progress(state_dir, table, options, offsets)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: KafkaOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.kafka.sink import write_topic

        return write_topic(ctx, df, table, options)

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: KafkaOptions) -> LineWriter:
        from arroyo.connectors.kafka.sink import record_writer

        return record_writer(ctx, options)

    def release(self) -> None:
        from arroyo.connectors.kafka.sink import KafkaRecordWriter
        from arroyo.connectors.kafka.source import GroupCommitters

        GroupCommitters.close_all()
        KafkaRecordWriter.close_all()


__all__ = ["KafkaConnection", "KafkaConnector", "KafkaOptions"]
