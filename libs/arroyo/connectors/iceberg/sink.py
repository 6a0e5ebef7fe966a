"""The iceberg sink: Iceberg's own streaming write, one snapshot per micro-batch, committed once
however often the batch is replayed, with no Python run per batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.runtime.sinks import error_summary
from arroyo.formats import ParquetOptions, parse_format_options
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from arroyo.connectors.iceberg.options import IcebergOptions

# Iceberg's snapshot summary properties for a streaming write: the query and its batch.
QUERY_PROPERTY = "spark.sql.streaming.queryId"
EPOCH_PROPERTY = "spark.sql.streaming.epochId"


def _quoted(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def write_table(
    df: DataFrame, table: TableSpec, options: IcebergOptions, catalog: str
) -> DataStreamWriter:
    """Batch N is appended as one snapshot whose summary carries the query's id (kept in its
    checkpoint: a pipeline restored elsewhere keeps it, one started afresh gets a new one) and
    N. Iceberg commits a batch only when no snapshot of the table's current history holds it
    already, after the batch has run (a stateful query's batch must run to its end), and
    atomically (the catalog swaps the table's metadata): a batch cut short committed nothing,
    and a replayed one that was committed is not committed again.

    The table (and its namespace) is created first when missing, with the PARTITIONED BY
    spec."""
    frame = df.drop(EVENT_TIME) if EVENT_TIME in df.columns else df
    namespace = ".".join(_quoted(p) for p in options.namespace.split("."))
    ident = f"{catalog}.{namespace}.{_quoted(options.table_name)}"
    try:
        _create_if_missing(frame, options, catalog, namespace, ident)
    except Exception as err:
        raise ConnectorError(
            f"sink '{table.name}': cannot create the Iceberg table "
            f"{options.namespace}.{options.table_name} ({options.catalog_type} catalog): "
            f"{error_summary(err)}"
        ) from err
    spec = table.format
    fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
    writer = (
        frame.writeStream.format("iceberg")
        .option("path", ident)
        # Rows gathered by partition before the write (shuffle_by_partition.enabled), or
        # written where they are, a file open per partition a task meets (fanout).
        .option("distribution-mode", "hash" if options.shuffle_by_partition else "none")
        .option("fanout-enabled", "true")
    )
    if isinstance(fmt, ParquetOptions):
        writer = writer.option("compression-codec", fmt.compression)
    return writer


def _create_if_missing(
    frame: DataFrame, options: IcebergOptions, catalog: str, namespace: str, ident: str
) -> None:
    spark = frame.sparkSession
    if spark.catalog.tableExists(ident):
        return
    if options.catalog_type != "hadoop":
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
    jvm = spark._jvm
    assert jvm is not None
    columns = jvm.org.apache.spark.sql.types.DataType.fromJson(frame.schema.json()).toDDL()
    spec = [sql for f in options.fields if (sql := f.spark_sql()) is not None]
    ddl = f"CREATE TABLE IF NOT EXISTS {ident} ({columns}) USING iceberg"
    if spec:
        ddl += f" PARTITIONED BY ({', '.join(spec)})"
    if options.location_path:
        location = options.locations[0].uri.replace("\\", "\\\\").replace("'", "\\'")
        ddl += f" LOCATION '{location}'"
    spark.sql(ddl)
