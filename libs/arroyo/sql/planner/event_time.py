"""A table's event time and watermark, as Arroyo declares them: ``WATERMARK FOR`` (its
expression over the row, virtual columns expanded), or the older table options
``event_time_field`` and ``watermark_field``; and the idleness options ``idle_micros`` and
``idle_time``.

Spark's watermark is the largest event time a table has shown, less a fixed delay. Arroyo's
is the smallest value of a per-row watermark expression in a batch. The two agree whenever
the expression is the event time less a constant, which is what every watermark declared
over a row's time is once its virtual columns are expanded; any other expression is refused,
with what to write instead (README, "where it differs")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.program.spec import ColumnSpec
from arroyo.sql.planner.diagnostics import ErrorCode, error
from arroyo.sql.statements import CreateTable, OptionDecl
from arroyo.sql.time import DurationError, interval_us, parse_duration_us

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext

# The options every source table may take about its time, whatever its connector.
EVENT_TIME_OPTIONS = frozenset({"event_time_field", "watermark_field", "idle_micros", "idle_time"})

# Arroyo's watermark for a table with an event time but no watermark: 1 second behind it.
DEFAULT_DELAY_MS = 1000


def event_time(
    ctx: PlanContext, stmt: CreateTable, columns: list[ColumnSpec], options: dict[str, OptionDecl]
) -> tuple[str | None, int]:
    """The column holding each row's event time (None: the connector's own time) and the
    watermark's delay behind it, in milliseconds. WATERMARK FOR wins over the options, as in
    Arroyo; both are checked."""
    check_idleness(ctx, options)
    generated = {c.name.lower(): g for c in stmt.columns if (g := c.generated) is not None}
    found: tuple[str | None, int] = (None, DEFAULT_DELAY_MS)
    if "event_time_field" in options:
        decl = options["event_time_field"]
        column = _timestamp_column(ctx, columns, decl.value, decl.offset, "event_time_field")
        found = (column, DEFAULT_DELAY_MS)
        if "watermark_field" in options:
            wm = options["watermark_field"]
            wm_column = _timestamp_column(ctx, columns, wm.value, wm.offset, "watermark_field")
            found = (column, _delay_ms(ctx, column, exp.column(wm_column), generated, wm.offset))
    elif "watermark_field" in options:
        raise error(
            ErrorCode.BAD_WATERMARK,
            "watermark_field needs event_time_field: name the column that holds each row's "
            "event time too, or write WATERMARK FOR <column> AS <expression>",
            ctx.text.span(options["watermark_field"].offset),
        )
    if stmt.watermark_column is None:
        return found
    offset = stmt.watermark_offset
    column = _timestamp_column(ctx, columns, stmt.watermark_column, offset, "WATERMARK FOR")
    declared = stmt.watermark_expr if stmt.watermark_expr is not None else exp.column(column)
    return column, _delay_ms(ctx, column, declared, generated, offset)


def check_idleness(ctx: PlanContext, options: dict[str, OptionDecl]) -> None:
    """``idle_micros`` (a whole number of microseconds) and ``idle_time`` (an interval):
    checked, and nothing more to do on Spark, whose watermark for a table follows its most
    advanced partition, so a partition that stops sending never holds it back."""
    if "idle_micros" in options:
        decl = options["idle_micros"]
        try:
            int(decl.value)
        except ValueError:
            raise error(
                ErrorCode.BAD_OPTION,
                f"idle_micros must be a whole number of microseconds, not '{decl.value}'",
                ctx.text.span(decl.offset),
            ) from None
    if "idle_time" in options:
        decl = options["idle_time"]
        try:
            option_duration_us(decl.value)
        except DurationError as err:
            raise error(
                ErrorCode.BAD_OPTION,
                f"idle_time must be an interval such as '30 seconds': {err}",
                ctx.text.span(decl.offset),
            ) from err


def option_duration_us(value: str) -> int:
    """An option's duration, written ``'30 seconds'`` or ``INTERVAL '30 seconds'``."""
    text = value.strip()
    if text[:8].lower() == "interval":
        text = text[8:].strip()
        if len(text) >= 2 and text[0] == text[-1] == "'":
            text = text[1:-1]
    us = parse_duration_us(text)
    if us < 0:
        raise DurationError("an interval must not be negative")
    return us


def _timestamp_column(
    ctx: PlanContext, columns: list[ColumnSpec], name: str, offset: int, what: str
) -> str:
    column = next((c for c in columns if c.name == name), None)
    if column is None:
        raise error(
            ErrorCode.UNKNOWN_COLUMN,
            f"{what} names unknown column '{name}' "
            f"(columns: {', '.join(c.name for c in columns) or 'none'})",
            ctx.text.span(offset),
        )
    if column.spark_type != "TIMESTAMP":
        raise error(
            ErrorCode.BAD_WATERMARK,
            f"{what} column '{name}' is {column.spark_type}; it must be a TIMESTAMP",
            ctx.text.span(offset),
        )
    return column.name


def _delay_ms(
    ctx: PlanContext,
    column: str,
    watermark: exp.Expression,
    generated: dict[str, exp.Expression],
    offset: int,
) -> int:
    """The delay of a watermark over the event time ``column``: the expression, with virtual
    columns written out, must be the column's value or that value less an interval."""
    event = _expanded(exp.column(column), generated)
    wm = _expanded(watermark, generated)
    if wm == event:
        return 0
    if isinstance(wm, exp.Sub) and _unwrapped(wm.this) == event:
        try:
            return interval_us(wm.expression) // 1000
        except DurationError as err:
            raise error(ErrorCode.BAD_WATERMARK, str(err), ctx.text.span(offset)) from err
    raise error(
        ErrorCode.BAD_WATERMARK,
        f"the watermark must be the event time '{column}', or '{column}' less an interval "
        f"(WATERMARK FOR {column} AS {column} - INTERVAL '5 seconds'), not "
        f"'{watermark.sql(dialect='postgres')}': Spark's watermark is the latest event time "
        f"less a fixed delay",
        ctx.text.span(offset),
    )


def _expanded(node: exp.Expression, generated: dict[str, exp.Expression]) -> exp.Expression:
    """``node`` with each virtual column written as its expression (and the virtual columns
    that one names, and so on: a cycle stops at its second visit), without parentheses, its
    names in lower case and unquoted."""

    def expand(n: exp.Expression, seen: frozenset[str]) -> exp.Expression:
        name = n.name.lower() if isinstance(n, exp.Column) and not n.table else None
        if name is not None and name in generated:
            if name in seen:
                return n
            inner = generated[name].copy()
            return _unwrapped(inner.transform(expand, seen | {name}, copy=False))
        return n

    expanded = _unwrapped(node.copy().transform(expand, frozenset(), copy=False))
    # Spark's names are case-insensitive, quoted or not: compare them as such.
    return expanded.transform(
        lambda n: exp.to_identifier(n.name.lower()) if isinstance(n, exp.Identifier) else n,
        copy=False,
    )


def _unwrapped(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
