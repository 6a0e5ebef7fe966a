"""What a query reads and what it gives: its FROM items as relations, its result as Planned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.connectors import connector
from arroyo.program.names import EVENT_TIME, HIDDEN_KEY, KEEP, LOOKUP, TOUCHED
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.syntax import from_clause

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from arroyo.program.spec import TableSpec
    from arroyo.sql.planner.context import PlanContext
    from arroyo.sql.windows import WindowSpec


def is_hidden(name: str) -> bool:
    """Whether ``name`` is a column the planner adds for the engine, never shown by ``*``
    nor written to a sink as data."""
    return name in (EVENT_TIME, KEEP, TOUCHED) or name.startswith((HIDDEN_KEY, LOOKUP))


@dataclass(frozen=True, slots=True)
class Relation:
    """One FROM item of the SELECT being planned, as the rules see it."""

    alias: str
    columns: list[tuple[str, str]]  # (name, spark type) including _timestamp when present
    window: tuple[str, WindowSpec] | None
    updating: list[str] | None = None  # key columns, when the relation is an updating result
    batch_input: str | None = None  # see Planned
    static: bool = False  # a lookup table, or a query of lookup tables alone: not a stream
    # Columns equal to its event time (``_timestamp``) wherever set, lower-case dotted paths:
    # a table's WATERMARK FOR column, or its connector's (Connector.event_time_fields).
    time_fields: frozenset[str] = frozenset()

    @property
    def has_event_time(self) -> bool:
        return any(name == EVENT_TIME for name, _ in self.columns)


@dataclass
class Planned:
    """A rewritten query: its AST in Spark's terms, and what downstream needs to know of it."""

    node: exp.Query
    window: tuple[str, WindowSpec] | None = None
    updating: list[str] | None = None  # key columns of an updating result
    # Set when the query must run per micro-batch (window functions such as ROW_NUMBER, which
    # Spark cannot run on a stream): the streaming view that feeds it. The query reads that
    # view's batch as ``<view>__batch`` (batch_view_name).
    batch_input: str | None = None
    static: bool = False  # it reads lookup tables alone


def batch_view_name(view: str) -> str:
    """The name under which a streaming view's micro-batch is seen by per-batch queries."""
    return f"{view}__batch"


def columns(schema: StructType) -> list[tuple[str, str]]:
    """A schema as Relation.columns."""
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def table_relation(ctx: PlanContext, table: exp.Table) -> Relation:
    """A table or view named in FROM, after the checks of what may be read."""
    name = table.name
    span = span_of(ctx.text, table)
    names = ctx.names
    known = names.tables.get(name)
    if known is not None and known.role == "sink":
        raise error(
            ErrorCode.READ_FROM_SINK, f"cannot read from '{name}': it is a sink table", span
        )
    if name in names.memory and name not in names.memory_written:
        raise error(
            ErrorCode.MEMORY_TABLE_READ_BEFORE_WRITE,
            f"memory table '{name}' is read before any INSERT INTO it",
            span,
        )
    if known is None and name not in names.views:
        raise error(ErrorCode.UNKNOWN_TABLE, f"no table or view named '{name}'", span)
    shape = names.shape(name)
    return Relation(
        table.alias_or_name,
        columns(ctx.catalog.table_schema(name)),
        shape.window,
        shape.updating,
        static=shape.static,
        time_fields=_time_fields(known) if known is not None else frozenset(),
    )


def _time_fields(spec: TableSpec) -> frozenset[str]:
    """The columns of a table equal to its event time wherever they are set."""
    if spec.event_time_column:
        return frozenset({spec.event_time_column.lower()})
    conn = connector(spec.connector) if spec.connector else None
    if conn is None or not conn.capabilities.source_time:
        return frozenset()
    return frozenset(f.lower() for f in conn.event_time_fields)


def expand_stars(ctx: PlanContext, select: exp.Select, relations: list[Relation]) -> None:
    """``*`` and ``t.*`` as the columns they stand for, without the hidden ones."""
    expanded: list[exp.Expression] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star):
            targets = relations
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            targets = [r for r in relations if r.alias == projection.table]
            if not targets:
                raise error(
                    ErrorCode.UNKNOWN_TABLE,
                    f"no relation named '{projection.table}'",
                    span_of(ctx.text, projection),
                )
        else:
            expanded.append(projection)
            continue
        qualify = len(relations) > 1
        for rel in targets:
            for name, _ in rel.columns:
                if not is_hidden(name):
                    expanded.append(
                        exp.column(name, table=rel.alias if qualify else None, quoted=True)
                    )
    select.set("expressions", expanded)


def event_time(relations: list[Relation]) -> exp.Expression:
    """The event time a window over ``relations`` is computed on: the first one's that has
    one."""
    with_time = [r for r in relations if r.has_event_time]
    if not with_time:
        raise error(ErrorCode.NO_EVENT_TIME, "this input has no event time to window on", None)
    table = with_time[0].alias if len(relations) > 1 else None
    return exp.column(EVENT_TIME, table=table)


def reads_changelog(ctx: PlanContext, select: exp.Select) -> bool:
    """Whether the query reads a changelog source table directly."""
    from_ = from_clause(select)
    source = from_.this if from_ is not None else None
    if not isinstance(source, exp.Table):
        return False
    known = ctx.names.tables.get(source.name)
    return known is not None and known.is_changelog
