"""INSERT INTO and top-level SELECT: what each sink is given, checked against what it can
write, and at the end of the script one query per sink."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from arroyo.connectors import connector
from arroyo.program.names import EVENT_TIME, KEEP, TOUCHED, quote_name
from arroyo.program.spec import ColumnSpec, FormatSpec, SinkQuery, TableSpec
from arroyo.sql.planner.context import SinkWrites
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.relations import Planned, batch_view_name, is_hidden
from arroyo.sql.planner.rewriter import Rewriter

if TYPE_CHECKING:
    from sqlglot import exp

    from arroyo.sql.planner.context import PlanContext
    from arroyo.sql.statements import Insert, Query


def insert(ctx: PlanContext, stmt: Insert) -> None:
    """An INSERT INTO a connector table."""
    target = ctx.names.tables.get(stmt.table)
    if target is None:
        raise error(
            ErrorCode.UNKNOWN_TABLE, f"no table named '{stmt.table}'", ctx.text.span(stmt.offset)
        )
    if target.role != "sink":
        raise error(
            ErrorCode.INSERT_INTO_SOURCE,
            f"cannot insert into '{stmt.table}': it is a source table",
            ctx.text.span(stmt.offset),
        )
    sink_connector = connector(target.connector)
    local_joins = sink_connector is not None and sink_connector.capabilities.writes_lines
    planned = Rewriter(ctx, local_joins=local_joins, into_sink=True).top_level(stmt.query)
    sql_text = planned.node.sql(dialect="spark")
    _check_streaming(ctx, sql_text, stmt.query, planned)
    if planned.updating is not None:
        _check_updating_sink(ctx, target, stmt.offset)
    if planned.batch_input is not None:
        _check_batch_sink(ctx, target, stmt.offset)
    _add_insert(ctx, stmt.table, planned, sql_text, stmt.offset)


def select(ctx: PlanContext, stmt: Query) -> None:
    """A top-level SELECT: its rows printed (stdout), as JSON or as change records."""
    planned = Rewriter(ctx, local_joins=True, into_sink=True).top_level(stmt.query)
    sql_text = planned.node.sql(dialect="spark")
    _check_streaming(ctx, sql_text, stmt.query, planned)
    name = f"select_{sum(1 for q in ctx.sinks if q.startswith('select_'))}"
    fmt = "json" if planned.updating is None else "debezium_json"
    ctx.names.tables[name] = TableSpec(name, "stdout", "sink", {}, [], FormatSpec(fmt))
    _add_insert(ctx, name, planned, sql_text, stmt.offset)


def _add_insert(ctx: PlanContext, sink: str, planned: Planned, sql_text: str, offset: int) -> None:
    writes = ctx.sinks.setdefault(sink, SinkWrites())
    if planned.updating is not None:
        writes.updating = planned.updating
    if planned.batch_input is not None:
        writes.batch_input = planned.batch_input
    writes.inserts.append((sql_text, offset))


def sink_query(ctx: PlanContext, name: str, writes: SinkWrites) -> SinkQuery:
    """The query writing sink ``name``: its inserts, cast to its columns (taken from the
    first insert when the table declares none), and how the engine writes them."""
    spec = ctx.names.tables[name]
    inserts = writes.inserts
    selects = []
    columns = spec.columns
    keys = writes.updating
    if (keys is not None or writes.batch_input is not None) and len(inserts) > 1:
        raise error(
            ErrorCode.UPDATING_UNION,
            f"'{name}' takes an updating result; it cannot take other inserts too",
            ctx.text.span(inserts[1][1]),
        )
    keep = False
    conn = connector(spec.connector)
    options = conn.table_options(spec) if conn is not None else None
    event_time = conn is not None and conn.wants_event_time(options)
    for sql_text, offset in inserts:
        schema = ctx.catalog.schema(sql_text)
        keep = keep or KEEP in schema.fieldNames()
        fields = [f for f in schema.fields if not is_hidden(f.name)]
        if not columns:
            columns = [ColumnSpec(f.name, f.dataType.simpleString(), f.nullable) for f in fields]
        writable = [c for c in columns if c.physical]
        if len(fields) != len(writable):
            raise error(
                ErrorCode.COLUMN_COUNT_MISMATCH,
                f"'{name}' has {len(writable)} columns but the query gives {len(fields)}",
                ctx.text.span(offset),
            )
        casts = ", ".join(
            f"CAST({quote_name(f.name)} AS {c.spark_type}) AS {quote_name(c.name)}"
            for f, c in zip(fields, writable, strict=True)
        )
        casts += "".join(
            f", {quote_name(n)}" for n in schema.fieldNames() if is_hidden(n) and n != EVENT_TIME
        )
        if event_time:
            if EVENT_TIME not in schema.fieldNames():
                raise error(
                    ErrorCode.BAD_OPTION,
                    f"'{name}' lays its files out by event time (partitioning.time_pattern), "
                    f"which this query's rows do not carry",
                    ctx.text.span(offset),
                )
            casts += f", `{EVENT_TIME}`"
        selects.append(f"SELECT {casts} FROM ({sql_text}) AS `__insert`")
    spec = replace(spec, columns=columns)
    if conn is not None:
        have = {c.name for c in columns}
        for option, column in conn.named_columns(options):
            if column not in have:
                raise error(
                    ErrorCode.BAD_OPTION,
                    f"{option}: partition field '{column}' does not exist in the schema of "
                    f"'{name}' (columns: {', '.join(c.name for c in columns)})",
                    ctx.text.span(inserts[0][1]),
                )
        for problem in conn.column_errors(options, columns):
            raise error(ErrorCode.BAD_OPTION, f"'{name}': {problem}", ctx.text.span(inserts[0][1]))
    batch_input = writes.batch_input
    if batch_input is not None:
        merge = ctx.window_roots.window_aggregates.get(batch_input)
        return SinkQuery(
            spec,
            f"SELECT * FROM {quote_name(merge or batch_input)}",
            batch_sql=selects[0],
            batch_view=batch_view_name(batch_input),
            batch_merge=merge,
        )
    if keys is None:
        return SinkQuery(spec, " UNION ALL ".join(selects))
    # The keys are named as the query names them; the sink may rename columns by position.
    names = [f.name for f in ctx.catalog.schema(inserts[0][0]).fields]
    renamed = {
        n: c.name for n, c in zip([n for n in names if not is_hidden(n)], columns, strict=False)
    }
    return SinkQuery(
        spec,
        selects[0],
        output_mode="update",
        key_columns=[renamed.get(k, k) for k in keys],
        keep_column=KEEP if keep else None,
        updating_ttl_ms=(ctx.updating_ttl_us // 1000 if TOUCHED in schema.fieldNames() else None),
        unchecked_chain=ctx.reads_fused_view(selects[0]),
    )


def _check_batch_sink(ctx: PlanContext, sink: TableSpec, offset: int) -> None:
    conn = connector(sink.connector)
    if conn is None or not conn.capabilities.writes_lines:
        raise error(
            ErrorCode.WINDOW_FUNCTION_SINK,
            f"connector '{sink.connector}' cannot take the result of a window function yet",
            ctx.text.span(offset),
        )


def _check_updating_sink(ctx: PlanContext, sink: TableSpec, offset: int) -> None:
    conn = connector(sink.connector)
    takes_any = conn is not None and not conn.capabilities.needs_format  # blackhole
    if not takes_any and (sink.format is None or sink.format.name != "debezium_json"):
        raise error(
            ErrorCode.UPDATING_INTO_APPEND_SINK,
            f"this query gives an updating result (rows change as input arrives), which "
            f"'{sink.name}' cannot write as format "
            f"'{sink.format.name if sink.format else 'none'}'; "
            f"use format = 'debezium_json'",
            ctx.text.span(offset),
        )
    if conn is None or not conn.capabilities.writes_lines:
        raise error(
            ErrorCode.UPDATING_UNSUPPORTED_SINK,
            f"connector '{sink.connector}' cannot write updating results yet",
            ctx.text.span(offset),
        )


def _check_streaming(
    ctx: PlanContext, sql_text: str, original: exp.Query, planned: Planned
) -> None:
    """A query into a sink must read a stream: lookup tables alone are static."""
    ctx.analyse(sql_text, original)
    if planned.static:
        raise error(
            ErrorCode.LOOKUP_ONLY,
            "this query reads only lookup tables, which are static: join them with a "
            "stream (a source table)",
            span_of(ctx.text, original),
        )
