"""The planner's catalog on a SparkSession (arroyo.sql.planner.context.Catalog).

The planner does not import the engine; this is how the engine lends it Spark. Build a planner
with ``spark_planner(spark, ...)``, or ``Planner(SparkCatalog(spark, settings), ...)``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from arroyo.engine import build, plans
from arroyo.program.names import quote_name
from arroyo.sql.planner import Planner
from arroyo.udfs import register as register_udfs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ConnectionProfile
    from arroyo.program.spec import (
        AggregateSpec,
        ChangesSpec,
        TableSpec,
        ViewSpec,
        WindowAggregateSpec,
    )
    from arroyo.udfs import UdfLibrary

# Where sources keep their state while a plan is made, unless told otherwise: planning builds
# sources but never runs them, so nothing of worth is written there.
_PLANNING_STATE_DIR = Path("/tmp/arroyo-planning")


class SparkCatalog:
    """A SparkSession's temporary views as the planner's catalog. Sources are built with
    ``settings`` (which must say ``planning=True``: they contact no external system)."""

    def __init__(self, spark: SparkSession, settings: build.BuildSettings) -> None:
        assert settings.planning, "a catalog builds sources for planning only"
        self.spark = spark
        self.settings = settings

    def start_plan(self, udfs: UdfLibrary | None) -> None:
        if udfs is not None:
            register_udfs(self.spark, udfs)
        build.drop_temp_views(self.spark)

    def schema(self, sql: str) -> StructType:
        return self.spark.sql(sql).schema

    def table_schema(self, name: str) -> StructType:
        return self.spark.table(quote_name(name)).schema

    def register_source(self, table: TableSpec) -> None:
        build.register_source(self.spark, table, self.settings)

    def register_view(self, view: ViewSpec) -> None:
        build.register_view(self.spark, view)

    def register_frame(self, name: str, frame: DataFrame) -> None:
        frame.createOrReplaceTempView(name)

    def register_empty(self, name: str, schema: StructType | str) -> None:
        self.spark.createDataFrame([], schema).createOrReplaceTempView(name)

    def register_aggregate(self, aggregate: AggregateSpec) -> None:
        build.register_aggregate(self.spark, aggregate)

    def changes(self, spec: ChangesSpec) -> DataFrame:
        return build.changes(self.spark, spec)

    def window_aggregate(self, spec: WindowAggregateSpec) -> tuple[DataFrame, StructType]:
        partials = build.window_aggregate(self.spark, spec)
        return partials, build.window_aggregate_results(partials, spec).schema

    def reads_bounded_only(self, sql: str) -> bool:
        return plans.reads_bounded_only(self.spark.sql(sql))

    def reads_views(self, sql: str, views: Collection[str]) -> bool:
        return plans.reads_views(self.spark.sql(sql), views)


def spark_planner(
    spark: SparkSession,
    *,
    parallelism: int = 1,
    state_dir: Path | None = None,
    udfs: UdfLibrary | None = None,
    profiles: Mapping[str, ConnectionProfile] | None = None,
    saved_tables: Mapping[str, str] | None = None,
) -> Planner:
    """A Planner that analyses in ``spark`` (no query runs, no external system is contacted);
    sources keep what they write while planning under ``state_dir``."""
    settings = build.BuildSettings(state_dir or _PLANNING_STATE_DIR, parallelism, planning=True)
    return Planner(
        SparkCatalog(spark, settings),
        parallelism=parallelism,
        udfs=udfs,
        profiles=profiles,
        saved_tables=saved_tables,
    )
