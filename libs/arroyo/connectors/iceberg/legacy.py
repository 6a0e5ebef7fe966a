"""The iceberg sink as it was before it used Iceberg's streaming write: a foreachBatch
function, one snapshot per micro-batch tagged with the sink's id and batch. Kept for the
pipelines it began (their state holds the sink's id): their snapshots name their batches its
way, which Iceberg's streaming write does not read, so a batch replayed on resume would be
committed twice."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.iceberg.tables import create_if_missing, quoted
from arroyo.connectors.runtime.sinks import batch_in_flight, consume, error_summary, sink_id
from arroyo.formats import ParquetOptions, parse_format_options
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arroyo.connectors.iceberg.options import IcebergOptions

# Snapshot summary properties: which sink and batch a snapshot holds.
SINK_PROPERTY = "arroyo.sink-id"
BATCH_PROPERTY = "arroyo.batch"


class IcebergBatches:
    """Batch N is appended as one snapshot whose summary carries the sink's id and N
    (``snapshot-property.*``). Before its first batch the sink reads the table's snapshots for
    the last batch it committed, and a batch at or before it is not written again: Iceberg
    commits a snapshot atomically (the catalog swaps the table's metadata), so a batch cut
    short committed nothing, and one committed is found. The table (and its namespace) is
    created by the first batch when missing, with the PARTITIONED BY spec."""

    def __init__(
        self, state_dir: Path, table: TableSpec, options: IcebergOptions, catalog: str
    ) -> None:
        self.table = table
        self.options = options
        self.state_dir = state_dir
        self.namespace = ".".join(quoted(p) for p in options.namespace.split("."))
        self.ident = f"{catalog}.{self.namespace}.{quoted(options.table_name)}"
        self.catalog = catalog
        self._committed: int | None = None
        spec = table.format
        fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
        # Iceberg's write options: the Parquet codec, and whether rows are gathered by
        # partition before the write (shuffle_by_partition.enabled) or written where they are.
        self.write_options = {
            "distribution-mode": "hash" if options.shuffle_by_partition else "none",
        }
        if isinstance(fmt, ParquetOptions):
            self.write_options["compression-codec"] = fmt.compression

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            frame = df.drop(EVENT_TIME) if EVENT_TIME in df.columns else df
            try:
                if self._committed is None:
                    self._create_if_missing(frame)
                    self._committed = self._last_committed(frame.sparkSession)
                if batch_id <= self._committed:
                    consume(df)  # a stateful query's batch still runs to its end
                    return
                (
                    frame.writeTo(self.ident)
                    .options(**self.write_options)
                    .option(f"snapshot-property.{SINK_PROPERTY}", sink_id(self.state_dir))
                    .option(f"snapshot-property.{BATCH_PROPERTY}", str(batch_id))
                    .append()
                )
                self._committed = batch_id
            except Exception as err:
                self._committed = None  # read again: the commit may have landed
                raise ConnectorError(
                    f"sink '{self.table.name}': cannot commit batch {batch_id} to the Iceberg "
                    f"table {self.options.namespace}.{self.options.table_name} "
                    f"({self.options.catalog_type} catalog): {error_summary(err)}"
                ) from err

    def _create_if_missing(self, frame: DataFrame) -> None:
        create_if_missing(frame, self.options, self.catalog, self.namespace, self.ident)

    def _last_committed(self, spark: SparkSession) -> int:
        """The last batch of this sink among the snapshots of the table's current state (not
        those a rollback left behind), or -1."""
        me = sink_id(self.state_dir)
        rows = spark.sql(
            f"SELECT max(CAST(s.summary['{BATCH_PROPERTY}'] AS BIGINT)) AS last "
            f"FROM {self.ident}.snapshots AS s JOIN {self.ident}.history AS h "
            "ON s.snapshot_id = h.snapshot_id "
            f"WHERE h.is_current_ancestor AND s.summary['{SINK_PROPERTY}'] = '{me}'"
        ).collect()
        last = rows[0]["last"] if rows else None
        return int(last) if last is not None else -1
