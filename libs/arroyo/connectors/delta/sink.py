"""The delta sink's foreachBatch function: one Delta commit per micro-batch, idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.runtime.sinks import batch_in_flight, error_summary, sink_id
from arroyo.formats import ParquetOptions, parse_format_options
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.delta.options import DeltaOptions


class DeltaBatches:
    """Batch N is appended to the table with ``txnAppId`` = the sink's id and ``txnVersion`` =
    N: Delta commits it once, however often Spark replays it (a replay of a committed batch
    is a no-op commit Delta skips), and a batch cut short before its commit left nothing a
    reader sees. The id is the sink's own, kept in its state: a pipeline started afresh on the
    same table (a new state) numbers its batches from 0 again under a new id."""

    def __init__(self, state_dir: Path, table: TableSpec, options: DeltaOptions) -> None:
        self.table = table
        self.options = options
        self.state_dir = state_dir
        spec = table.format
        fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
        self.compression = fmt.compression if isinstance(fmt, ParquetOptions) else None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            frame = df.drop(EVENT_TIME) if EVENT_TIME in df.columns else df
            fields = self.options.fields or []
            if fields and self.options.shuffle_by_partition:
                frame = frame.repartition(*fields)
            writer = (
                frame.write.format("delta")
                .mode("append")
                .option("txnAppId", sink_id(self.state_dir))
                .option("txnVersion", str(batch_id))
            )
            if self.compression is not None:
                writer = writer.option("compression", self.compression)
            if fields:
                writer = writer.partitionBy(*fields)
            location = self.options.location
            try:
                writer.save(location.uri)
            except Exception as err:
                raise ConnectorError(
                    f"sink '{self.table.name}': cannot commit batch {batch_id} to the Delta "
                    f"table at {location.describe()}: {error_summary(err)}"
                ) from err
