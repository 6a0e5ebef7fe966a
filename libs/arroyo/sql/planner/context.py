"""What the planner needs of the engine, as a protocol the engine implements.

The planner does not import ``arroyo.engine``: whoever builds a Planner hands it a Catalog
(``arroyo.engine.catalog.SparkCatalog``, or ``arroyo.engine.catalog.spark_planner`` for both
at once). Everything the planner asks of Spark goes through it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.program.spec import (
        AggregateSpec,
        ChangesSpec,
        TableSpec,
        ViewSpec,
        WindowAggregateSpec,
    )
    from arroyo.udfs import UdfLibrary


class Catalog(Protocol):
    """The Spark session a plan is analysed in, seen as the tables and views it registers.

    Called by the planner on the thread that plans, one plan at a time; a plan starts with
    ``start_plan`` and registers its tables and views in order, each visible by its name to
    the queries analysed after it. Nothing registered while planning runs: sources are built
    as for planning (no external system is contacted). Errors are Spark's own
    (``pyspark.errors``: AnalysisException, ParseException, IllegalArgumentException), which the
    planner turns into diagnostics or takes as a "no" (see each method)."""

    def start_plan(self, udfs: UdfLibrary | None) -> None:
        """Forget the tables and views of the last plan, and register ``udfs``' functions."""

    def schema(self, sql: str) -> StructType:
        """The result schema of a query, as Spark's analysis gives it."""

    def table_schema(self, name: str) -> StructType:
        """The schema of a registered table or view."""

    def register_source(self, table: TableSpec) -> None:
        """A source table's rows, its event time and watermark (a changelog's signed rows
        too), under its name. A lookup table is read while planning: one Spark cannot read
        raises (AnalysisException, or the connector's ConnectorError)."""

    def register_view(self, view: ViewSpec) -> None:
        """A view under its name: its SQL, or the Arroyo operator it names (an interval join,
        a retracting or a window aggregate)."""

    def register_frame(self, name: str, frame: DataFrame) -> None:
        """A DataFrame made by ``changes`` or ``window_aggregate``, under ``name``."""

    def register_empty(self, name: str, schema: StructType | str) -> None:
        """A table of no rows under ``name``, of ``schema`` (a StructType or a DDL string):
        a stand-in that lets the queries reading it be analysed."""

    def register_aggregate(self, aggregate: AggregateSpec) -> None:
        """One of Arroyo's aggregate functions, under the name queries call it by."""

    def changes(self, spec: ChangesSpec) -> DataFrame:
        """The signed rows of Arroyo's retracting aggregate; IllegalArgumentException where it
        does not take one of the functions or types."""

    def window_aggregate(self, spec: WindowAggregateSpec) -> tuple[DataFrame, StructType]:
        """The partial results of Arroyo's window aggregate, and the schema of the results
        they sum to (per key and window, as Spark's windowed aggregate gives them);
        IllegalArgumentException or AnalysisException where it does not take the query."""

    def reads_bounded_only(self, sql: str) -> bool:
        """Whether every stream the query reads ends by itself."""

    def reads_views(self, sql: str, views: Collection[str]) -> bool:
        """Whether the query reads, through any views, one of ``views``."""
