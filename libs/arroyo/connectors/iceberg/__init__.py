"""``iceberg``: an Apache Iceberg table in a REST, JDBC or Hadoop catalog (a sink, as in
Arroyo)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, WriteContext
from arroyo.connectors.iceberg.options import IcebergOptions
from arroyo.connectors.storage import configure
from arroyo.formats import FormatOptions
from arroyo.program.spec import Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class IcebergConnector(Connector[IcebergOptions]):
    """An Iceberg table ``namespace.table_name`` in the catalog ``catalog.*`` names: REST
    (Arroyo's), JDBC on PostgreSQL, or Hadoop (a directory, local or on S3), written through
    Iceberg's Spark runtime (its streaming write). Sink only. Exactly once for every Iceberg
    reader: a micro-batch is one snapshot whose summary holds the query's id and the batch; a
    replayed batch that a snapshot already holds is not committed again, and a batch cut short
    committed nothing
    (Iceberg's commits are atomic; its files are orphans for ``remove_orphan_files``).
    ``PARTITIONED BY`` takes Iceberg's transforms; the sink creates a missing table with
    that spec, and writes an existing one as its own spec says."""

    name = "iceberg"
    description = "An Apache Iceberg table in a REST, JDBC or Hadoop catalog (sink)"
    capabilities = Capabilities(sink=True, delivery="exactly_once", needs_format=True)
    options_model = IcebergOptions
    formats = frozenset({"parquet"})
    default_format = "parquet"

    def misplaced_format_options(self, fmt: FormatOptions, role: Role) -> list[str]:
        return []

    def named_columns(self, options: IcebergOptions) -> list[tuple[str, str]]:
        return [("PARTITIONED BY", f.column) for f in options.fields]

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: IcebergOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.iceberg.sink import write_table

        for location in options.locations:
            configure(ctx.spark, location)
        catalog = options.catalog_name()
        for key, value in options.catalog_settings().items():
            ctx.spark.conf.set(f"spark.sql.catalog.{catalog}" + (f".{key}" if key else ""), value)
        return write_table(df, table, options, catalog, ctx.state_dir)


__all__ = ["IcebergConnector", "IcebergOptions"]
