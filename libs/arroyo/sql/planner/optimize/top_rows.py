"""For Nexmark q7's form, the rows holding each window's maximum (or minimum): a root that
keeps only those rows (ExtremeRows.java) in place of every distinct row of the window. Same
rows out of the window-local query that reads it (optimize.window_local)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.program.names import quote_name
from arroyo.program.spec import AggregateSpec, ViewSpec
from arroyo.sql.planner.relations import batch_view_name
from arroyo.sql.planner.syntax import (
    WINDOW_HELPER,
    conjuncts,
    from_clause,
    has_aggregate,
    resolve_group_item,
)

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def top_rows_root(
    ctx: PlanContext, select: exp.Select, sources: list[exp.Table], root: str
) -> tuple[str, exp.Query] | None:
    """A smaller root for the rows of a window that hold its maximum (or minimum).

    The pattern (Nexmark q7, the highest bids of each window): the root is a windowed
    GROUP BY without aggregates (distinct rows per window), joined on the window with a
    view ``SELECT window, max(x) AS m FROM root GROUP BY window``, on ``root.x = m``. Only
    the rows whose x is their window's maximum can meet that condition, and the maximum
    over those rows is the same maximum, so the root may keep just them: a streaming
    aggregate keyed by the window alone (ExtremeRows.java: the distinct rows of the
    largest x so far, ties included) in place of one keyed by every distinct row of the
    window, whose state holds every row until the window closes. Each batch expands the
    kept rows back into the root's columns, and the query runs over them as before.

    Returns the new root's view and the root's batch form read from it; None where the
    query is not of that form."""
    if len(sources) != 2 or [t.name for t in sources].count(root) != 1:
        return None
    (rows,) = [t for t in sources if t.name == root]
    (maxima,) = [t for t in sources if t.name != root]
    window = ctx.names.shape(root).window
    if window is None or window[1].kind == "session":
        # A session window is per group: grouped by the window alone, it would join
        # sessions that the query keeps apart.
        return None
    extreme = _per_window_extreme(ctx.window_roots.nodes.get(maxima.name), root, window[0])
    root_node = ctx.window_roots.nodes.get(root)
    distinct = _distinct_windowed(root_node, window[0])
    if extreme is None or distinct is None:
        return None
    largest, column, alias = extreme
    inner, payload = distinct
    if column not in payload:
        return None
    mine = {(rows.alias_or_name, column), (maxima.alias_or_name, alias)}
    joins = select.args.get("joins") or []
    conditions = [c for j in joins if j.args.get("on") for c in conjuncts(j.args["on"])]
    where = select.args.get("where")
    if where is not None:
        conditions += conjuncts(where.this)
    if not any(
        isinstance(c, exp.EQ)
        and all(isinstance(side, exp.Column) for side in (c.this, c.expression))
        and {(side.table, side.name) for side in (c.this, c.expression)} == mine
        for c in conditions
    ):
        return None
    schema = ctx.catalog.table_schema(root)
    types = {f.name: f.dataType for f in schema.fields}
    names = list(payload)
    key_type = types[column].simpleString()
    if not re.fullmatch(
        r"(tinyint|smallint|int|bigint|decimal\(.*\)|date|timestamp\w*)", key_type
    ) or any("binary" in types[n].simpleString() for n in names):
        # A key Java orders as Spark does; rows told apart by value (not a binary array).
        return None
    function = ctx.fresh_name("__arroyo_extreme_rows")
    ddl = ", ".join(f"{quote_name(n)} {types[n].simpleString()}" for n in names)
    spec = AggregateSpec(function, ddl, names.index(column), largest)
    from pyspark.errors import AnalysisException

    ctx.catalog.register_aggregate(spec)
    # The new root: the same query, grouped by its window alone, its other grouped
    # columns gathered into the top rows.
    helper = "__arroyo_rows"
    kept = [p for p in inner.expressions if p.alias_or_name not in payload]
    call = exp.Anonymous(this=function, expressions=[payload[n].copy() for n in names])
    grouped = {p.unalias().sql(): p.unalias() for p in kept}
    new_inner = inner.copy()
    new_inner.set("expressions", [*(p.copy() for p in kept), exp.alias_(call, helper)])
    new_inner.set("group", exp.Group(expressions=[e.copy() for e in grouped.values()]))
    assert isinstance(root_node, exp.Select)
    node = root_node.copy()
    columns = [p for p in node.expressions if p.alias_or_name not in payload]
    from_ = from_clause(node)
    assert from_ is not None
    columns.append(exp.column(helper, table=from_.this.alias_or_name))
    node.set("expressions", columns)
    from_.this.set("this", new_inner)
    view = ViewSpec(ctx.fresh_name(f"{root}__top_rows"), node.sql(dialect="spark"))
    try:
        ctx.catalog.register_view(view)
    except AnalysisException:
        # Spark refused the smaller root (say, a grouped column its aggregate's input
        # cannot take): the query runs over the root it was written with.
        return None
    ctx.program.aggregates.append(spec)
    ctx.program.views.append(view)
    expanded = exp.select(exp.Star(), exp.func("INLINE", exp.column("rows", table=helper))).from_(
        exp.to_identifier(batch_view_name(view.name))
    )
    form = exp.select(*(exp.column(f.name, quoted=True) for f in schema.fields)).from_(
        exp.Subquery(this=expanded, alias=exp.TableAlias(this=exp.to_identifier(helper)))
    )
    return view.name, form


def _per_window_extreme(
    node: exp.Query | None, view: str, window: str
) -> tuple[bool, str, str] | None:
    """If ``node`` (a windowed view's rewritten query) is ``SELECT window, max(x) AS m FROM
    view GROUP BY window`` (or min): whether max, x, and m."""
    inner = _aggregate_inner(node, window)
    if inner is None or inner.args.get("where"):
        return None
    from_ = from_clause(inner)
    source = from_.this if from_ is not None else None
    if not isinstance(source, exp.Table) or source.name != view or source.args.get("db"):
        return None
    group = inner.args.get("group")
    if group is None or any(
        not (isinstance(g, exp.Column) and g.name == window) for g in group.expressions
    ):
        return None
    extremes = []
    for projection in inner.expressions:
        value = projection.unalias()
        if isinstance(value, exp.Max | exp.Min) and isinstance(value.this, exp.Column):
            if value.args.get("expressions"):
                return None
            extremes.append((isinstance(value, exp.Max), value.this.name, projection.alias_or_name))
        elif not (isinstance(value, exp.Column) and value.name == window):
            return None
    return extremes[0] if len(extremes) == 1 else None


def _distinct_windowed(
    node: exp.Query | None, window: str
) -> tuple[exp.Select, dict[str, exp.Expression]] | None:
    """If ``node`` (a windowed view's rewritten query) groups by exactly the columns it selects
    and aggregates nothing (its rows are the distinct rows of each window): its inner
    aggregate query, and its grouped columns other than the window's, by name."""
    inner = _aggregate_inner(node, window)
    group = inner.args.get("group") if inner is not None else None
    if inner is None or group is None or any(has_aggregate(p) for p in inner.expressions):
        return None
    keys = {resolve_group_item(inner, g).sql() for g in group.expressions}
    if keys != {p.unalias().sql() for p in inner.expressions}:
        return None
    windows = {window, WINDOW_HELPER}
    payload = {
        p.alias_or_name: p.unalias() for p in inner.expressions if p.alias_or_name not in windows
    }
    return (inner, payload) if payload else None


def _aggregate_inner(node: exp.Query | None, window: str) -> exp.Select | None:
    """The aggregate query inside a windowed aggregate view's rewritten query (``SELECT ...
    FROM (aggregate) AS __aggN``), if ``node`` is one with nothing else around it."""
    if not isinstance(node, exp.Select) or node.args.get("joins") or node.args.get("where"):
        return None
    from_ = from_clause(node)
    subquery = from_.this if from_ is not None else None
    if not isinstance(subquery, exp.Subquery) or not isinstance(subquery.this, exp.Select):
        return None
    inner = subquery.this
    for clause in ("having", "qualify", "joins", "distinct", "with_"):
        if inner.args.get(clause):
            return None
    if window not in {p.alias_or_name for p in inner.expressions}:
        return None
    return inner
