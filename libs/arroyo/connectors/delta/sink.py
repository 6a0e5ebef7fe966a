"""The delta sink's foreachBatch function: one Delta commit per micro-batch, idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.runtime.sinks import batch_in_flight, consume, error_summary, sink_id
from arroyo.formats import ParquetOptions, parse_format_options
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arroyo.connectors.delta.options import DeltaOptions


class DeltaBatches:
    """Batch N is appended to the table with ``txnAppId`` = the sink's id and ``txnVersion`` =
    N: Delta commits it once, however often Spark replays it, and a batch cut short before
    its commit left nothing a reader sees. The id is the sink's own, kept in its state: a
    pipeline started afresh on the same table (a new state) numbers its batches from 0 again
    under a new id.

    Delta skips a replayed batch's write without running the batch, which a stateful query
    cannot allow (its operators commit their state only when the batch runs to its end). So
    before its first batch the sink reads the table's transaction version for its id, and a
    batch at or before it is run to its end without writing."""

    def __init__(self, state_dir: Path, table: TableSpec, options: DeltaOptions) -> None:
        self.table = table
        self.options = options
        self.state_dir = state_dir
        spec = table.format
        fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
        self.compression = fmt.compression if isinstance(fmt, ParquetOptions) else None
        self._committed: int | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if self._committed is None:
                self._committed = self._last_committed(df.sparkSession)
            if batch_id <= self._committed:
                consume(df)
                return
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
                self._committed = None  # read again: the commit may have landed
                raise ConnectorError(
                    f"sink '{self.table.name}': cannot commit batch {batch_id} to the Delta "
                    f"table at {location.describe()}: {error_summary(err)}"
                ) from err

    def _last_committed(self, spark: SparkSession) -> int:
        """The table's transaction version for this sink's id (-1 for none, or no table)."""
        jvm = spark._jvm
        assert jvm is not None
        location = self.options.location
        try:
            log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
                spark._jsparkSession, location.uri
            )
            # DeltaLog.update's arguments all have defaults, which Scala compiles to methods.
            defaults = [getattr(log, f"update$default${i}")() for i in (1, 2, 3)]
            version = log.update(*defaults).transactions().get(sink_id(self.state_dir))
        except Exception as err:
            raise ConnectorError(
                f"sink '{self.table.name}': cannot read the Delta table's log at "
                f"{location.describe()}: {error_summary(err)}"
            ) from err
        return int(version.get()) if version.isDefined() else -1
