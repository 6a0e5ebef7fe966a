"""The catalog a plan is analysed in, and the state of one plan in the making.

The planner does not import ``arroyo.engine``: whoever builds a Planner hands it a Catalog
(``arroyo.engine.catalog.SparkCatalog``, or ``arroyo.engine.catalog.spark_planner`` for both
at once). Everything the planner asks of Spark goes through it.

A PlanContext is made by ``Planner.plan`` for one script and handed to every step: what the
statements so far declared (``Names``), what the program has so far (``ProgramParts``), what
each sink is given (``SinkWrites``), the settings, and the speed-ups' own records.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from arroyo.sql.planner.diagnostics import spark_diagnostic
from arroyo.sql.text import SourceText

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType
    from sqlglot import exp

    from arroyo.connectors.base import ConnectionProfile
    from arroyo.program.spec import (
        AggregateSpec,
        ChangesSpec,
        ColumnSpec,
        SinkQuery,
        TableSpec,
        ViewSpec,
        WindowAggregateSpec,
    )
    from arroyo.sql.windows import WindowSpec
    from arroyo.udfs import UdfLibrary

# Arroyo's default updating_ttl: a join's rows are kept for a day of event time, an updating
# aggregate's keys for a day without an update.
DEFAULT_UPDATING_TTL_US = 24 * 3_600_000_000


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


@dataclass(frozen=True, slots=True)
class ViewShape:
    """What a query reading a table or view knows of its rows beyond their columns."""

    # The window column and its window, when the rows are a windowed result.
    window: tuple[str, WindowSpec] | None = None
    # The key columns, when the rows are an updating result (or a changelog's).
    updating: list[str] | None = None
    # A lookup table, or a query of lookup tables alone: not a stream.
    static: bool = False


@dataclass
class Names:
    """The tables and views the script has declared so far, by name."""

    # Connector tables (sources, sinks, lookup tables), and the stdout sinks of SELECTs.
    tables: dict[str, TableSpec] = field(default_factory=dict)
    # Views that queries read by name: the script's, its CTEs', written memory tables', and
    # those the planner adds (interval joins, retracting and window aggregates).
    views: dict[str, ViewShape] = field(default_factory=dict)
    # Memory tables (no connector): their declared columns, and those already written.
    memory: dict[str, list[ColumnSpec]] = field(default_factory=dict)
    memory_written: set[str] = field(default_factory=set)

    def defined(self, name: str) -> bool:
        return name in self.tables or name in self.views or name in self.memory

    def shape(self, name: str) -> ViewShape:
        """A view's shape; a table's follows from its spec (a lookup table is static, a
        changelog source updating by its primary key)."""
        view = self.views.get(name)
        if view is not None:
            return view
        table = self.tables.get(name)
        if table is None:
            return ViewShape()
        return ViewShape(
            updating=table.primary_key if table.is_changelog else None, static=table.is_lookup
        )


@dataclass
class ProgramParts:
    """What the program has so far, besides its sources and sink queries."""

    # Every view, in the order they are registered (the order the runner registers them).
    views: list[ViewSpec] = field(default_factory=list)
    # Arroyo's own aggregate functions that views call (optimize.top_rows).
    aggregates: list[AggregateSpec] = field(default_factory=list)
    # Joins and updating results that aggregates read through a stage: the stage (a source)
    # and the query writing it (plan.stages).
    stages: list[tuple[TableSpec, SinkQuery]] = field(default_factory=list)
    # Views whose stateful operator another reads in the same query, where Spark's checks of
    # the chain are off (SinkQuery.unchecked_chain): interval joins under an updating
    # aggregate (plan.stages.stage_join) and updating aggregates' changes
    # (optimize.fused_changes).
    fused_views: set[str] = field(default_factory=set)


@dataclass
class SinkWrites:
    """What the script writes into one sink table."""

    # Each INSERT's query (Spark SQL) and where it starts in the script.
    inserts: list[tuple[str, int]] = field(default_factory=list)
    # The key columns, when an insert gives an updating result.
    updating: list[str] | None = None
    # The streaming view feeding it, when an insert runs per micro-batch (Planned.batch_input).
    batch_input: str | None = None


@dataclass
class WindowRoots:
    """The records of the window-local speed-ups (optimize.window_local)."""

    # Views whose rows of each window all leave one streaming windowed aggregate (their root)
    # in the same micro-batch: the root's name.
    roots: dict[str, str] = field(default_factory=dict)
    # Their rewritten queries.
    nodes: dict[str, exp.Query] = field(default_factory=dict)
    # Roots run by Arroyo's window aggregate, and the view that runs them.
    window_aggregates: dict[str, str] = field(default_factory=dict)


@dataclass
class PlanContext:
    """One script being planned: the catalog it is analysed in, the planner's settings, and
    everything its statements have declared and produced so far. Made by ``Planner.plan``,
    handed to every step of it; not shared between plans."""

    catalog: Catalog
    text: SourceText
    parallelism: int
    udfs: UdfLibrary | None = None
    # The connection profiles tables may name (``connection_profile``).
    profiles: Mapping[str, ConnectionProfile] = field(default_factory=dict)
    # Set by ``SET updating_ttl``.
    updating_ttl_us: int = DEFAULT_UPDATING_TTL_US
    names: Names = field(default_factory=Names)
    program: ProgramParts = field(default_factory=ProgramParts)
    sinks: dict[str, SinkWrites] = field(default_factory=dict)
    window_roots: WindowRoots = field(default_factory=WindowRoots)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def fresh_name(self, prefix: str) -> str:
        """A name no table or view of the plan has: ``prefix`` and a number."""
        return f"{prefix}{next(self._counter)}"

    def analyse(self, sql: str, original: exp.Expr) -> StructType:
        """Let Spark analyse ``sql``; its errors become diagnostics on ``original`` (the
        user's query that ``sql`` was rewritten from)."""
        from pyspark.errors import AnalysisException, ParseException

        try:
            return self.catalog.schema(sql)
        except (AnalysisException, ParseException) as err:
            raise spark_diagnostic(self.text, err, original) from err

    def add_view(self, view: ViewSpec, original: exp.Expr, shape: ViewShape) -> None:
        """Analyse a view's query (errors pointing at ``original``), register it, and keep
        it in the program."""
        self.analyse(view.sql, original)
        self.catalog.register_view(view)
        self.keep_view(view, shape)

    def keep_view(self, view: ViewSpec, shape: ViewShape) -> None:
        """Keep an already registered view in the program, known to later queries by name."""
        self.program.views.append(view)
        self.names.views[view.name] = shape

    def reads_fused_view(self, sql: str) -> bool:
        """Whether a query reads, through any views, a view whose stateful operator another
        reads in the same query (ProgramParts.fused_views)."""
        fused = self.program.fused_views
        return bool(fused) and self.catalog.reads_views(sql, fused)
