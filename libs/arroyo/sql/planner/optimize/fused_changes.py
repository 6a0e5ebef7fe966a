"""An aggregate over an updating aggregate in one query, the inner one run by Arroyo's
retracting aggregate (RetractingAggregate.java), in place of a stage between two queries
(plan.stages.stage_changes): no Parquet files and no second query between them. Same rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from arroyo.program.names import EVENT_TIME, KEEP, TOUCHED
from arroyo.program.spec import ChangesSpec, ViewSpec
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.relations import Relation, columns
from arroyo.sql.planner.syntax import from_clause, plain_aggregate

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def fused_changes(ctx: PlanContext, select: exp.Select, input_: Relation) -> Relation | None:
    """An aggregate over an updating aggregate, both in one query: the inner aggregate
    runs as Arroyo's retracting aggregate (ChangesSpec), which gives its changes as signed
    rows, and ``select`` is rewritten in place to read them. Where the inner aggregate is
    not a plain GROUP BY of count, sum, avg, min and max over values the retracting
    aggregate takes (or has a HAVING), returns None: the changes go through a stage
    (plan.stages.stage_changes)."""
    from pyspark.errors import IllegalArgumentException

    from_ = from_clause(select)
    assert from_ is not None
    source = from_.this
    if isinstance(source, exp.Subquery):
        inner = source.this
    else:
        view = next((v for v in ctx.program.views if v.name == source.name), None)
        if view is None or view.interval_join is not None or view.changes is not None:
            return None
        inner = sqlglot.parse_one(view.sql, read="spark")
    group = inner.args.get("group") if isinstance(inner, exp.Select) else None
    if group is None or inner.args.get("having") is not None:
        return None
    grouped = {g.sql(dialect="spark") for g in group.expressions}
    keys: list[exp.Expr] = []
    arguments: list[exp.Expr] = []
    kinds: list[str] = []
    names: list[str] = []
    ttl = False
    for projection in inner.expressions:
        name, value = projection.alias_or_name, projection.unalias()
        if name == TOUCHED:
            ttl = True
        elif name in (KEEP, EVENT_TIME):
            return None  # a HAVING's flag; an event time, which the stage's rows drop
        elif value.sql(dialect="spark") in grouped:
            keys.append(exp.alias_(value.copy(), name))
        else:
            plain = plain_aggregate(value)
            if plain is None:
                return None
            kind, argument = plain
            arguments.append(exp.alias_(argument.copy(), f"__a{len(arguments)}"))
            kinds.append(kind)
            names.append(name)
    named = {k.alias_or_name for k in keys}
    if len(keys) != len(grouped) or named != set(input_.updating or []):
        return None
    catalog = ctx.catalog
    feed = inner.copy()
    feed.set("expressions", [*keys, *arguments])
    feed.set("group", None)
    ttl_ms = ctx.updating_ttl_us // 1000 if ttl else 0
    spec = ChangesSpec(feed.sql(dialect="spark"), len(keys), kinds, names, ttl_ms)
    try:
        fused = catalog.changes(spec)
    except IllegalArgumentException:
        return None  # a function or type the retracting aggregate does not take
    # Its results must have the types Spark's aggregate gives them (the outer query reads
    # them as it would read Spark's).
    aggregate = catalog.schema(inner.sql(dialect="spark"))
    if any(fused.schema[n].dataType != aggregate[n].dataType for n in names):
        return None
    name = ctx.fresh_name("__changes")
    catalog.register_frame(name, fused)
    ctx.keep_view(ViewSpec(name, inner.sql(dialect="spark"), changes=spec), ViewShape())
    ctx.program.fused_views.add(name)
    from_.set(
        "this",
        exp.Table(
            this=exp.to_identifier(name),
            alias=exp.TableAlias(this=exp.to_identifier(input_.alias)),
        ),
    )
    return Relation(input_.alias, columns(catalog.table_schema(name)), None)
