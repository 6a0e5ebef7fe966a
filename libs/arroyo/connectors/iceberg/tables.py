"""An Iceberg table's name in a catalog of the session, and its creation when missing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.iceberg.options import IcebergOptions


def quoted(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def create_if_missing(
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
