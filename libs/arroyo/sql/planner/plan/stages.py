"""Stages: where an aggregate reads a result that Spark cannot compute in the aggregate's own
query (a join of streams without windows, an updating result), that result runs as a query
of its own, writing into a stage (the pipeline's internal stream, arroyo.connectors.stage)
that the aggregate reads as a source."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from arroyo.program.names import EVENT_TIME, HIDDEN_KEY, KEEP, TOUCHED, quote_name, signed_view
from arroyo.program.spec import ColumnSpec, FormatSpec, SinkQuery, TableSpec
from arroyo.sql.planner.diagnostics import ErrorCode, error
from arroyo.sql.planner.optimize.interval_join import interval_join_view
from arroyo.sql.planner.plan.joins import bound_unwindowed_joins, check_unwindowed_joins
from arroyo.sql.planner.plan.projection import projection
from arroyo.sql.planner.relations import Relation, columns, is_hidden
from arroyo.sql.planner.syntax import RANKED_ROWS, from_clause

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def stage_join(ctx: PlanContext, select: exp.Select, relations: list[Relation]) -> Relation:
    """An aggregate over a join of streams without windows. Spark runs such a join in
    append mode only and such an aggregate in update mode only, never both in one query,
    so the join runs as a query of its own: it writes its rows into a stage (the
    pipeline's internal stream, arroyo.connectors.stage), which the aggregate reads. Each
    column the aggregate uses becomes one of the stage's columns (the join computes
    ``A.auction.id``; the aggregate reads ``__c0``), so the stage holds only those.
    ``select`` is rewritten in place to read the stage; returns the stage's relation.
    An interval join needs no stage: the aggregate reads the join's columns from a
    subquery of its own query (see below)."""
    from arroyo.connectors.stage import STAGE_CONNECTOR

    from_ = from_clause(select)
    assert from_ is not None
    # The result's column names stay what Spark names them now (``A.auction.category``
    # is ``category``, ``max(B.bid.price)`` is ``max(bid.price)``), not after the
    # rewrite below.
    names = ctx.catalog.schema(select.sql(dialect="spark")).fieldNames()
    for p, name in zip(select.expressions, names, strict=False):
        if p.meta.get(RANKED_ROWS):
            break  # a generator of several columns: the names no longer line up
        if not isinstance(p, exp.Alias):
            p.replace(exp.alias_(p.copy(), name, quoted=True))
    name = ctx.fresh_name("__stage")
    alias = "__staged"
    # Names are matched as Spark matches them, ignoring case. An unqualified column is
    # keyed by the relation that has it, so that ``customer`` and ``o.customer`` are one
    # stage column.
    aliases = {r.alias.lower() for r in relations}
    owners = {c.lower(): r.alias.lower() for r in relations for c, _ in r.columns}
    outputs = {p.alias_or_name.lower() for p in select.expressions}
    having = select.args.get("having")
    computed: dict[str, exp.Expression] = {}
    for part in [*select.expressions, select.args.get("group"), having]:
        for col in list(part.find_all(exp.Column)) if part is not None else []:
            if col.find_ancestor(exp.Select) is not select or col.is_star:
                continue
            qualifier = col.args.get("db") or col.args.get("table")
            head = (qualifier.name if qualifier is not None else col.name).lower()
            if head not in aliases and head not in owners:
                continue  # a projection's alias, a lambda's variable
            if part is having and qualifier is None and head in outputs:
                continue  # HAVING names the select list's columns first
            key = col.sql(dialect="spark").lower().replace("`", "")
            if qualifier is None or head not in aliases:
                key = f"{owners.get(head, '')}.{key}"
            if key not in computed:
                computed[key] = col.copy()
            stage_column = f"__c{list(computed).index(key)}"
            col.replace(exp.column(stage_column, table=alias, quoted=True))
    join = exp.select(
        *[exp.alias_(e, f"__c{i}", quoted=True) for i, e in enumerate(computed.values())]
    ).from_(from_.this.copy())
    join.set("joins", [j.copy() for j in select.args.get("joins") or []])
    where = select.args.get("where")
    if where is not None:
        join.set("where", where.copy())
    check_unwindowed_joins(ctx, join, relations)
    bound_unwindowed_joins(ctx, join, relations)
    interval_join = interval_join_view(ctx, join, relations)
    join_sql = projection(join, relations).node.sql(dialect="spark")
    schema = ctx.analyse(join_sql, select)
    if interval_join is not None:
        # Arroyo's interval join runs in append mode as Spark's flatMapGroupsWithState,
        # which Spark lets an update-mode aggregate follow in the same query: no stage,
        # so the pairs go straight to the aggregate's partial aggregation rather than
        # through Parquet files and a second query (Nexmark q4 and q9).
        ctx.program.fused_views.add(interval_join)
        from_.set(
            "this",
            exp.Subquery(
                this=sqlglot.parse_one(join_sql, read="spark"),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            ),
        )
        select.set("joins", None)
        select.set("where", None)
        return Relation(alias, columns(schema), None)
    spec = TableSpec(
        name,
        STAGE_CONNECTOR,
        "source",
        {},
        [
            ColumnSpec(f.name, f.dataType.simpleString(), f.nullable)
            for f in schema.fields
            if f.name != EVENT_TIME
        ],
    )
    relation = _add_stage(ctx, spec, SinkQuery(spec, join_sql))
    from_.set("this", exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=alias)))
    select.set("joins", None)
    select.set("where", None)
    return replace(relation, alias=alias)


def stage_changes(ctx: PlanContext, select: exp.Select, input_: Relation) -> Relation:
    """An aggregate over an updating result (Nexmark q4: the average, per category, of each
    auction's maximum bid, which changes while the auction is open). Spark cannot chain
    two aggregates in update mode, and the outer one must retract what a row contributed
    before it changed: the updating result is written into a stage as change records (a
    debezium changelog, as a sink would get it), and the aggregate reads the stage as a
    changelog source, weighing each row by its sign (plan.updating.changelog_aggregate). ``select``
    is rewritten in place to read the stage; returns the stage's relation."""
    from arroyo.connectors.stage import STAGE_CONNECTOR

    assert input_.updating is not None
    from_ = from_clause(select)
    assert from_ is not None
    source = from_.this
    if isinstance(source, exp.Subquery):
        query = source.this.sql(dialect="spark")
    else:
        query = f"SELECT * FROM {quote_name(source.name)}"
    fields = [f for f in ctx.catalog.schema(query).fields]
    names = {f.name for f in fields}
    # The data and the keys a projection carries hidden: the stage's rows are matched by key.
    data = [f for f in fields if not is_hidden(f.name) or f.name.startswith(HIDDEN_KEY)]
    columns = [ColumnSpec(f.name, f.dataType.simpleString(), f.nullable) for f in data]
    extra = [n for n in (KEEP, TOUCHED) if n in names]
    sql = (
        f"SELECT {', '.join(quote_name(n) for n in [*(f.name for f in data), *extra])} "
        f"FROM ({query}) AS `__changes`"
    )
    name = ctx.fresh_name("__stage")
    spec = TableSpec(
        name,
        STAGE_CONNECTOR,
        "source",
        {},
        columns,
        FormatSpec("debezium_json"),
        primary_key=list(input_.updating),
    )
    writer = SinkQuery(
        replace(spec, role="sink"),
        sql,
        output_mode="update",
        key_columns=list(input_.updating),
        keep_column=KEEP if KEEP in names else None,
        updating_ttl_ms=ctx.updating_ttl_us // 1000 if TOUCHED in names else None,
        unchecked_chain=ctx.reads_fused_view(sql),
    )
    relation = _add_stage(ctx, spec, writer)
    from_.set(
        "this",
        exp.Table(
            this=exp.to_identifier(name),
            alias=exp.TableAlias(this=exp.to_identifier(input_.alias)),
        ),
    )
    return replace(relation, alias=input_.alias)


def _add_stage(ctx: PlanContext, spec: TableSpec, writer: SinkQuery) -> Relation:
    """Register a stage read by the query being planned, and the query that writes it."""
    catalog = ctx.catalog
    spec = replace(spec, bounded=catalog.reads_bounded_only(writer.sql))
    writer = replace(writer, sink=replace(spec, role="sink"))
    catalog.register_source(spec)
    ctx.program.stages.append((spec, writer))
    return Relation(spec.name, columns(catalog.table_schema(spec.name)), None)


def stage_writers(ctx: PlanContext, queries: list[SinkQuery]) -> list[SinkQuery]:
    """The queries writing the stages that some query reads (a stage is planned with the
    view that needs it, and a view nobody reads needs none), after checking that each has
    one reader: the reader removes the files it has read, so a second would miss them."""
    stages = ctx.program.stages
    if not stages:
        return []
    views = {v.name: v.sql for v in ctx.program.views}
    by_name = {spec.name: writer for spec, writer in stages}
    signed = {signed_view(name): name for name in by_name}

    def tables(sql: str) -> set[str]:
        try:
            return {t.name for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)}
        except sqlglot.errors.ParseError:
            # Spark SQL sqlglot cannot read (a column named ``window``): every identifier,
            # more than the tables, which can only make a stage look read more.
            return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql))

    def reads(sql: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found: set[str] = set()
        for table_name in tables(sql):
            name = signed.get(table_name, table_name)
            if name in by_name:
                found.add(name)
            elif name in views and name not in seen:
                found |= reads(views[name], seen | {name})
        return found

    needed: list[SinkQuery] = []
    readers: dict[str, list[SinkQuery]] = {}
    pending = list(queries)
    while pending:
        query = pending.pop()
        for stage in reads(query.sql):
            if stage not in readers:
                needed.append(by_name[stage])
                pending.append(by_name[stage])
            readers.setdefault(stage, []).append(query)
    for sharing in readers.values():
        if len(sharing) > 1:
            sinks = [q.sink.name for q in sharing if q.sink.name in ctx.sinks]
            where = max((ctx.sinks[s].inserts[0][1] for s in sinks), default=0)
            raise error(
                ErrorCode.UPDATING_JOIN_SHARED,
                "an aggregate over a join without windows that Spark runs (not an "
                "interval join: keys of two types, more than two inputs), or over an "
                "updating result with a HAVING, a DISTINCT count or a sum of decimals, "
                "can feed one query, and two read the same one (repeat the aggregate for "
                "each instead of sharing it through a view)",
                ctx.text.span(where),
            )
    return needed
