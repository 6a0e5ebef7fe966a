"""The iceberg sink: Iceberg's own streaming write, one snapshot per micro-batch, committed once
however often the batch is replayed, with no Python run per batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import ConnectorError, into_table
from arroyo.connectors.iceberg.tables import create_if_missing, quoted
from arroyo.connectors.runtime.sinks import error_summary
from arroyo.formats import ParquetOptions, parse_format_options
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from arroyo.connectors.iceberg.options import IcebergOptions


def write_table(
    df: DataFrame, table: TableSpec, options: IcebergOptions, catalog: str, state_dir: Path
) -> DataStreamWriter:
    """Batch N is appended as one snapshot whose summary carries the query's id (kept in its
    checkpoint: a pipeline restored elsewhere keeps it, one started afresh gets a new one) and
    N. Iceberg commits a batch only when no snapshot of the table's current history holds it
    already, after the batch has run (a stateful query's batch must run to its end), and
    atomically (the catalog swaps the table's metadata): a batch cut short committed nothing,
    and a replayed one that was committed is not committed again.

    The table (and its namespace) is created first when missing, with the PARTITIONED BY
    spec, and the rows are written in its columns' order: an existing table's may differ.

    A replayed batch Iceberg had committed runs again and writes its files, which no snapshot
    names (orphans, for ``remove_orphan_files``)."""
    if (state_dir / "sink_id").exists():
        from arroyo.connectors.iceberg.legacy import IcebergBatches

        return df.writeStream.foreachBatch(IcebergBatches(state_dir, table, options, catalog))
    frame = df.drop(EVENT_TIME) if EVENT_TIME in df.columns else df
    namespace = ".".join(quoted(p) for p in options.namespace.split("."))
    ident = f"{catalog}.{namespace}.{quoted(options.table_name)}"
    where = f"{options.namespace}.{options.table_name} ({options.catalog_type} catalog)"
    try:
        create_if_missing(frame, options, catalog, namespace, ident)
        columns = frame.sparkSession.table(ident).columns
    except Exception as err:
        raise ConnectorError(
            f"sink '{table.name}': cannot reach or create the Iceberg table {where}: "
            f"{error_summary(err)}"
        ) from err
    missing = [c for c in columns if c not in frame.columns]
    extra = [c for c in frame.columns if c not in columns]
    if missing or extra:
        raise ConnectorError(
            f"sink '{table.name}': the Iceberg table {where} has columns {columns}, the sink "
            f"writes {frame.columns}"
            + (f"; missing {missing}" if missing else "")
            + (f"; not in the table {extra}" if extra else "")
        )
    frame = frame.select(*columns)
    spec = table.format
    fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
    writer = (
        frame.writeStream.format("iceberg")
        # Rows gathered by partition before the write (shuffle_by_partition.enabled), or
        # written where they are, a file open per partition a task meets (fanout).
        .option("distribution-mode", "hash" if options.shuffle_by_partition else "none")
        .option("fanout-enabled", "true")
    )
    if isinstance(fmt, ParquetOptions):
        writer = writer.option("compression-codec", fmt.compression)
    # Started into the catalog's table: Iceberg's catalog then plans the write, its partition
    # transforms included (a path would leave Spark without them).
    return into_table(writer, ident)
