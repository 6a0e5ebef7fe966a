"""``confluent``: Kafka topics on Confluent Cloud, through the Kafka connector.

A ``confluent`` table is a ``kafka`` table whose connection is a Confluent Cloud cluster and an
API key (``options.py``): each hook maps the options onto the Kafka connector's and hands over
to it, so sources, sinks, formats and the schema registry behave exactly as ``kafka``'s do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import (
    Connector,
    Delivery,
    LineWriter,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.confluent.options import ConfluentConnection, ConfluentOptions
from arroyo.connectors.kafka import KafkaConnector
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

_KAFKA = KafkaConnector()


class ConfluentConnector(Connector[ConfluentOptions, ConfluentConnection]):
    """Kafka on Confluent Cloud: SASL_SSL with mechanism PLAIN, the API key as the user and its
    secret as the password; everything else is the ``kafka`` connector's.

    Source: Spark's own Kafka source, replayable: its offsets live in the query's checkpoint.
    Sink, by ``sink.commit_mode``: at least once by default (a micro-batch replayed after a
    crash is written again), or exactly once (one Kafka transaction per micro-batch).
    """

    name = "confluent"
    description = "Kafka topics on Confluent Cloud"
    capabilities = KafkaConnector.capabilities
    options_model = ConfluentOptions
    connection_model = ConfluentConnection
    formats = KafkaConnector.formats
    default_format = KafkaConnector.default_format
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = KafkaConnector.metadata_keys

    def delivery(self, options: ConfluentOptions) -> Delivery | None:
        return _KAFKA.delivery(options.kafka_options())

    def test_connection(self, settings: ConfluentConnection) -> str:
        return _KAFKA.test_connection(settings.kafka_connection())

    def autocomplete(self, settings: ConfluentConnection) -> dict[str, list[str]]:
        return _KAFKA.autocomplete(settings.kafka_connection())

    def sample(self, options: ConfluentOptions, count: int, timeout_s: float) -> list[bytes] | None:
        return _KAFKA.sample(options.kafka_options(), count, timeout_s)

    def read(self, ctx: ReadContext, table: TableSpec, options: ConfluentOptions) -> DataFrame:
        return _KAFKA.read(ctx, table, options.kafka_options())

    def source_committed(
        self, state_dir: Path, table: TableSpec, options: ConfluentOptions, offsets: dict[str, str]
    ) -> None:
        _KAFKA.source_committed(state_dir, table, options.kafka_options(), offsets)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: ConfluentOptions
    ) -> DataStreamWriter:
        return _KAFKA.write(ctx, df, table, options.kafka_options())

    def line_writer(
        self, ctx: WriteContext, table: TableSpec, options: ConfluentOptions
    ) -> LineWriter:
        return _KAFKA.line_writer(ctx, table, options.kafka_options())

    def release(self) -> None:
        _KAFKA.release()


__all__ = ["ConfluentConnection", "ConfluentConnector", "ConfluentOptions"]
