"""The planner's entry: a script's statements in order, then the program they make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.errors import PlanningError
from arroyo.program.spec import PipelineProgram, TableSpec, ViewSpec
from arroyo.sql.planner import sinks, tables
from arroyo.sql.planner.context import PlanContext, ViewShape
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.optimize.window_local import note_window_root
from arroyo.sql.planner.plan.stages import stage_writers
from arroyo.sql.planner.rewriter import Rewriter
from arroyo.sql.planner.saved_tables import declare_saved_tables
from arroyo.sql.statements import (
    CreateTable,
    CreateView,
    Insert,
    Query,
    SetOption,
    Statement,
    parse_script,
)
from arroyo.sql.time import DurationError, parse_duration_us

if TYPE_CHECKING:
    from arroyo.connectors.base import ConnectionProfile
    from arroyo.sql.planner.context import Catalog
    from arroyo.udfs import UdfLibrary

_KNOWN_SETTINGS = {"updating_ttl"}


class Planner:
    """Plans Arroyo SQL, letting Spark analyse each query through ``catalog`` (for analysis
    only: no query runs, no external system is contacted). ``arroyo.engine.catalog`` makes
    one on a SparkSession (``spark_planner``).

    ``parallelism`` is the program's; ``udfs`` the functions its queries may call;
    ``profiles`` the connection profiles its tables may name (``connection_profile``);
    ``saved_tables`` the saved connection tables a script may name without declaring them,
    each as the CREATE TABLE statement that declares it. One plan at a time: each ``plan``
    starts by clearing the catalog of the last one."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        parallelism: int = 1,
        udfs: UdfLibrary | None = None,
        profiles: Mapping[str, ConnectionProfile] | None = None,
        saved_tables: Mapping[str, str] | None = None,
    ) -> None:
        self.catalog = catalog
        self.parallelism = parallelism
        self.udfs = udfs
        self.profiles = dict(profiles or {})
        self.saved_tables = dict(saved_tables or {})

    def plan(self, sql: str) -> PipelineProgram:
        """The program of a script, or a PlanningError with a diagnostic for each statement
        that cannot be planned (planning goes on after one, to find the others)."""
        text, statements = parse_script(sql)
        ctx = PlanContext(
            self.catalog, text, self.parallelism, udfs=self.udfs, profiles=self.profiles
        )
        self.catalog.start_plan(self.udfs)
        sources: list[TableSpec] = []
        diagnostics = declare_saved_tables(
            ctx, self.saved_tables, statements, lambda stmt: _statement(ctx, stmt, sources)
        )
        for stmt in statements:
            try:
                _statement(ctx, stmt, sources)
            except PlanningError as err:
                diagnostics.extend(err.diagnostics)
        if diagnostics:
            raise PlanningError(diagnostics)
        queries = [sinks.sink_query(ctx, name, writes) for name, writes in ctx.sinks.items()]
        if not queries:
            raise error(
                ErrorCode.NO_SINK,
                "the query writes nowhere: add an INSERT INTO a sink table or a SELECT",
                text.span(0),
            )
        writers = stage_writers(ctx, queries)
        written = {w.sink.name for w in writers}
        sources += [stage for stage, _ in ctx.program.stages if stage.name in written]
        queries += writers
        return PipelineProgram(
            sources=sources,
            views=ctx.program.views,
            queries=queries,
            parallelism=self.parallelism,
            udfs=self.udfs.source if self.udfs else None,
            udfs_path=self.udfs.path if self.udfs else None,
            aggregates=ctx.program.aggregates,
        )


# Names the planner gives its own columns start with this; users' may not (as in Arroyo).
RESERVED_PREFIX = "__arroyo"


def _reserved_names(ctx: PlanContext, stmt: Statement) -> None:
    """Arroyo's refusal of a column named ``__arroyo...`` (any case), declared or aliased."""
    if isinstance(stmt, CreateTable):
        for col in stmt.columns:
            if col.name.lower().startswith(RESERVED_PREFIX):
                raise error(
                    ErrorCode.RESERVED_NAME,
                    f"column name '{col.name}' in table '{stmt.name}' is invalid; names "
                    f"starting with '{RESERVED_PREFIX}' are reserved",
                    ctx.text.span(col.offset),
                )
    query = getattr(stmt, "query", None) or getattr(stmt, "as_query", None)
    if query is None:
        return
    for alias in query.find_all(exp.Alias):
        if alias.alias.lower().startswith(RESERVED_PREFIX):
            raise error(
                ErrorCode.RESERVED_NAME,
                f"column name '{alias.alias}' is invalid; names starting with "
                f"'{RESERVED_PREFIX}' are reserved",
                span_of(ctx.text, alias) or ctx.text.span(0),
            )


def _statement(ctx: PlanContext, stmt: Statement, sources: list[TableSpec]) -> None:
    """One statement; a table it declares that the program reads is added to ``sources``."""
    _reserved_names(ctx, stmt)
    if isinstance(stmt, CreateTable) and stmt.as_query is None:
        if not any(o.key == "connector" for o in stmt.options):
            tables.declare_memory_table(ctx, stmt)
            return
        spec = tables.connector_table(ctx, stmt)
        ctx.names.tables[stmt.name] = spec
        if spec.is_lookup or spec.role == "source":
            sources.append(spec)
            tables.register_table(ctx, stmt, spec)
    elif isinstance(stmt, CreateTable | CreateView):
        query = stmt.as_query if isinstance(stmt, CreateTable) else stmt.query
        assert query is not None
        tables.ensure_new_name(ctx, stmt.name, stmt.offset)
        planned = Rewriter(ctx).top_level(query)
        view = ViewSpec(stmt.name, planned.node.sql(dialect="spark"))
        ctx.add_view(view, query, ViewShape(planned.window, planned.updating, planned.static))
        note_window_root(ctx, view, planned)
    elif isinstance(stmt, Insert) and stmt.table in ctx.names.memory:
        tables.write_memory_table(ctx, stmt)
    elif isinstance(stmt, Insert):
        sinks.insert(ctx, stmt)
    elif isinstance(stmt, Query):
        sinks.select(ctx, stmt)
    elif isinstance(stmt, SetOption):
        _set(ctx, stmt)


def _set(ctx: PlanContext, stmt: SetOption) -> None:
    """``SET key = value`` of a setting the planner knows."""
    text = ctx.text
    if stmt.key not in _KNOWN_SETTINGS:
        raise error(
            ErrorCode.UNKNOWN_SETTING,
            f"unknown setting '{stmt.key}' (known: {', '.join(sorted(_KNOWN_SETTINGS))})",
            text.span(stmt.offset),
        )
    if stmt.key == "updating_ttl":
        try:
            ctx.updating_ttl_us = _setting_duration_us(stmt.value)
        except DurationError as err:
            raise error(
                ErrorCode.BAD_SETTING,
                f"updating_ttl: {err} (write e.g. INTERVAL '1 hour')",
                text.span(stmt.offset),
            ) from err


def _setting_duration_us(value: str) -> int:
    """A duration setting as written: ``INTERVAL '1 hour'``, ``'1 hour'`` or ``1 hour``."""
    text = value.strip()
    if text[:8].upper() == "INTERVAL":
        text = text[8:]
    us = parse_duration_us(text.strip().strip("'"))
    if us <= 0:
        raise DurationError("the duration must be positive")
    return us
