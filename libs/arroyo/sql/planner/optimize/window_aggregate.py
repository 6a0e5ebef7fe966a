"""Arroyo's window aggregate in place of Spark's windowed aggregate, for the root of
window-local queries (optimize.window_local): state per pane of time instead of per key and
window. Same rows, in the same micro-batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import ViewSpec, WindowAggregateSpec
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.relations import columns
from arroyo.sql.planner.syntax import (
    WINDOW_HELPER,
    from_clause,
    plain_aggregate,
    resolve_group_item,
)

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def window_aggregate_root(ctx: PlanContext, root: str) -> str | None:
    """A view giving the partial results of ``root``, a keyed tumbling or hopping window
    aggregate, from Arroyo's window aggregate (WindowAggregateSpec, WindowAggregate.java:
    state kept per pane of time, where Spark keeps an entry per key and window, reads and
    writes it in every batch that touches it, and reads its whole state in every batch to
    find the closed windows). Each micro-batch sums the partial results into the root's
    rows, so only for a root whose rows go to per-batch queries alone. None where the
    aggregate is not of that form (count, sum, avg, min and max of plain arguments, grouped
    by the window and at least one key), or its types are not ones it takes."""
    from pyspark.errors import AnalysisException, IllegalArgumentException

    view = next((v for v in ctx.program.views if v.name == root), None)
    window = ctx.names.shape(root).window
    if view is None or window is None or view.interval_join or view.changes:
        return None
    window_column, spec = window
    if spec.kind == "session":
        return None
    outer = sqlglot.parse_one(view.sql, read="spark")
    source = from_clause(outer)
    if not isinstance(outer, exp.Select) or source is None:
        return None
    inner = source.this.this if isinstance(source.this, exp.Subquery) else None
    group = inner.args.get("group") if isinstance(inner, exp.Select) else None
    if (
        not isinstance(inner, exp.Select)
        or group is None
        or inner.args.get("having") is not None
        or inner.args.get("distinct") is not None
    ):
        return None
    call = next(
        (p.unalias() for p in inner.expressions if p.alias_or_name == WINDOW_HELPER),
        None,
    )
    if not isinstance(call, exp.Anonymous) or not call.expressions:
        return None
    window_sql = call.sql(dialect="spark")
    grouped = [resolve_group_item(inner, g).sql(dialect="spark") for g in group.expressions]
    if grouped.count(window_sql) != 1:
        return None
    keys: list[exp.Expr] = []
    arguments: list[exp.Expr] = []
    kinds: list[str] = []
    names: list[str] = []
    selected: set[str] = set()
    for projection in inner.expressions:
        name, value = projection.alias_or_name, projection.unalias()
        sql = value.sql(dialect="spark")
        if name == WINDOW_HELPER or sql == window_sql:
            continue
        if sql in grouped:
            keys.append(exp.alias_(value.copy(), name))
            selected.add(sql)
            continue
        plain = plain_aggregate(value)
        if plain is None:
            return None
        kind, argument = plain
        arguments.append(exp.alias_(argument.copy(), f"__a{len(arguments)}"))
        kinds.append(kind)
        names.append(name)
    # Keys grouped by but not selected are keys all the same.
    for i, sql in enumerate(grouped):
        if sql != window_sql and sql not in selected:
            keys.append(exp.alias_(sqlglot.parse_one(sql, read="spark"), f"__k{i}"))
    feed = inner.copy()
    feed.set("expressions", [*keys, exp.alias_(call.expressions[0].copy(), EVENT_TIME), *arguments])
    feed.set("group", None)
    catalog = ctx.catalog
    schema = catalog.table_schema(root)
    aggregate = WindowAggregateSpec(
        feed.sql(dialect="spark"),
        len(keys),
        kinds,
        names,
        window_column,
        spec.width_us,
        spec.slide_us,
        [f.name for f in schema.fields],
        # Buckets of keys, each pane's state split among them: enough for the tasks to
        # share the work evenly, few enough that each holds many keys.
        max(64, 8 * ctx.parallelism),
    )
    try:
        # Per-batch queries read its rows as they would read Spark's.
        partials, summed = catalog.window_aggregate(aggregate)
    except (IllegalArgumentException, AnalysisException):
        return None  # a function, key or type it does not take; a name its columns use
    if columns(summed) != columns(schema):
        return None
    name = ctx.fresh_name("__window_aggregate")
    catalog.register_frame(name, partials)
    ctx.keep_view(ViewSpec(name, view.sql, window_aggregate=aggregate), ViewShape(window))
    return name
