"""``kinesis``: Amazon Kinesis Data Streams as sources and sinks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.kinesis.options import (
    SINK_ONLY,
    SOURCE_ONLY,
    KinesisConnection,
    KinesisOptions,
)
from arroyo.program.spec import Role, TableSpec

T = TypeVar("T")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class KinesisConnector(Connector[KinesisOptions, KinesisConnection]):
    """Source (``source.py``): every shard of ``stream_name`` read with GetRecords, each
    shard's sequence number kept in the query's checkpoint, so a restart resumes after the last
    committed micro-batch and a replayed batch is read again from the stream: exactly once with
    an exactly-once sink (while the stream retains the batch's records). Resharding is
    followed: a split or merged shard's children are read once their parents are read to the
    end. ``source.offset`` says where a new pipeline starts: ``latest`` or ``earliest``. Event
    time: the record's arrival time. Metadata: ``shard_id``, ``sequence_number``,
    ``partition_key``.

    Sink (``sink.py``): each row encoded in the table's format and put with PutRecords, batched
    by ``sink.max_records_per_batch``, ``sink.max_bytes_per_batch`` and
    ``sink.flush_interval_millis``, refused records sent again. At least once: a replayed
    micro-batch is put again.
    """

    name = "kinesis"
    description = "Amazon Kinesis Data Streams"
    capabilities = Capabilities(
        source=True,
        sink=True,
        replayable=True,
        delivery="at_least_once",
        needs_format=True,
        source_time=True,
    )
    options_model = KinesisOptions
    connection_model = KinesisConnection
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "shard_id": ("STRING",),
        "sequence_number": ("STRING",),
        "partition_key": ("STRING",),
    }

    def test_connection(self, settings: KinesisConnection) -> str:
        from arroyo.connectors.kinesis.client import stream_names, where

        streams = _calling(settings, lambda: stream_names(settings))
        return f"connected to Kinesis at {where(settings)}: {len(streams)} streams"

    def autocomplete(self, settings: KinesisConnection) -> dict[str, list[str]]:
        from arroyo.connectors.kinesis.client import stream_names

        return {"stream_name": _calling(settings, lambda: stream_names(settings))}

    def sample(self, options: KinesisOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.kinesis.client import newest_records

        return _calling(options, lambda: newest_records(options, count, timeout_s))

    def misplaced_options(self, options: KinesisOptions, role: Role) -> list[str]:
        set_ = options.model_dump(by_alias=True, exclude_unset=True)
        wrong = SINK_ONLY if role == "source" else SOURCE_ONLY
        return [name for name in wrong if name in set_]

    def read(self, ctx: ReadContext, table: TableSpec, options: KinesisOptions) -> DataFrame:
        from arroyo.connectors.kinesis.source import read_kinesis

        return read_kinesis(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: KinesisOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.kinesis.sink import write_kinesis

        return write_kinesis(ctx, df, table, options)


def _calling(settings: KinesisConnection, call: Callable[[], T]) -> T:
    """``call()`` (of ``client``'s), its failures as ``ConnectorError``s that say where Kinesis is
    and why."""
    from arroyo.connectors.kinesis import client

    try:
        return call()
    except client.KinesisError as err:
        raise ConnectorError(str(err)) from err
    except Exception as err:  # botocore's errors
        raise ConnectorError(
            f"cannot reach Kinesis at {client.where(settings)}: {client.cause(err)}"
        ) from err


__all__ = ["KinesisConnector"]
