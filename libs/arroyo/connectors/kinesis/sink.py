"""The Kinesis sink: each micro-batch's records put from the executors with PutRecords, in
requests of at most ``sink.max_records_per_batch`` records and ``sink.max_bytes_per_batch``
bytes, a request sent as soon as it is full or its first record has waited
``sink.flush_interval_millis``, and the rest at the partition's end. Each record's partition
key is random (as Arroyo's), which spreads records over the shards.

Records that Kinesis refuses in a request (throttled, an internal error) are sent again,
backing off, up to ``_ATTEMPTS`` times; then the micro-batch fails, naming the stream and the
error codes. At least once: a micro-batch replayed after a crash is put again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arroyo.connectors.kinesis.client import KinesisError, cause, client, where
from arroyo.connectors.kinesis.options import KinesisOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from arroyo.connectors.base import WriteContext
    from arroyo.program.spec import TableSpec

# Kinesis's limit on one record (its data and partition key).
MAX_RECORD_BYTES = 1_048_576
_ATTEMPTS = 10
_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class PartitionWriter:
    """Puts one partition's encoded rows (``value``) to the stream; pickled to the executors."""

    sink: str
    options: KinesisOptions

    def __call__(self, rows: Iterator[Row]) -> None:
        opts = self.options
        kinesis = client(opts)
        batch: list[dict[str, Any]] = []
        size = 0
        began = time.monotonic()
        for row in rows:
            value = row["value"]
            value = value.encode() if isinstance(value, str) else bytes(value)
            key = str(uuid.uuid4())
            record_size = len(value) + len(key)
            if record_size > MAX_RECORD_BYTES:
                raise KinesisError(
                    f"kinesis sink '{self.sink}': a record of {len(value)} bytes is more than "
                    f"the {MAX_RECORD_BYTES} bytes Kinesis takes in one record"
                )
            if batch and size + record_size > opts.sink_max_bytes_per_batch:
                self._put(kinesis, batch)
                batch, size = [], 0
            if not batch:
                began = time.monotonic()
            batch.append({"Data": value, "PartitionKey": key})
            size += record_size
            waited_ms = (time.monotonic() - began) * 1000
            if (
                len(batch) >= opts.sink_max_records_per_batch
                or size >= opts.sink_max_bytes_per_batch
                or waited_ms >= opts.sink_flush_interval_millis
            ):
                self._put(kinesis, batch)
                batch, size = [], 0
        if batch:
            self._put(kinesis, batch)

    def _put(self, kinesis: Any, records: list[dict[str, Any]]) -> None:
        """PutRecords, sending again what Kinesis refused until every record is in."""
        opts = self.options
        codes: set[str] = set()
        for attempt in range(_ATTEMPTS):
            try:
                answer = kinesis.put_records(StreamName=opts.stream_name, Records=records)
            except Exception as err:  # botocore's ClientError, EndpointConnectionError...
                raise KinesisError(
                    f"kinesis sink '{self.sink}' could not write to stream "
                    f"'{opts.stream_name}' at {where(opts)}: {cause(err)}"
                ) from err
            if not answer.get("FailedRecordCount"):
                return
            refused = [
                (record, result)
                for record, result in zip(records, answer["Records"], strict=True)
                if result.get("ErrorCode")
            ]
            codes = {str(result["ErrorCode"]) for _, result in refused}
            records = [record for record, _ in refused]
            time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
        refusals = ", ".join(sorted(codes))
        raise KinesisError(
            f"kinesis sink '{self.sink}': stream '{opts.stream_name}' at {where(opts)} still "
            f"refused {len(records)} records after {_ATTEMPTS} attempts ({refusals})"
        )


def write_kinesis(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: KinesisOptions
) -> DataStreamWriter:
    """The sink of a streaming query: each micro-batch's rows, encoded in the table's format,
    put by the executors (``PartitionWriter``)."""
    from arroyo.connectors.runtime.sinks import write_partitions
    from arroyo.formats.codec import encode

    return write_partitions(encode(df, table), PartitionWriter(table.name, opts))
