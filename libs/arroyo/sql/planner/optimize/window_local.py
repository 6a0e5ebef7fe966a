"""Joins of windowed views on their windows, run per micro-batch where every view derives,
window by window, from one streaming windowed aggregate (their root): Nexmark q5 and q7.

All the rows of a window leave the root in the micro-batch in which the watermark passes the
window's end, so the join of that window's rows can be computed from that batch alone: the
root's aggregate is kept once (Spark would keep it once per side of the join), and the join
and the derived aggregates keep no state. Same rows, in the same micro-batch. The root itself
may then be smaller (optimize.top_rows) or Arroyo's window aggregate
(optimize.window_aggregate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.sql.planner.optimize.top_rows import top_rows_root
from arroyo.sql.planner.optimize.window_aggregate import window_aggregate_root
from arroyo.sql.planner.plan.projection import projection
from arroyo.sql.planner.plan.window_fn import register_batch_view
from arroyo.sql.planner.relations import Planned, Relation, batch_view_name
from arroyo.sql.planner.syntax import WINDOW_HELPER, conjuncts, from_clause, resolve_group_item

if TYPE_CHECKING:
    from arroyo.program.spec import ViewSpec
    from arroyo.sql.planner.context import PlanContext


def window_local_join(
    ctx: PlanContext, select: exp.Select, relations: list[Relation]
) -> Planned | None:
    """A join of windowed views on their windows, where every view derives, window by
    window, from one streaming windowed aggregate (its root; e.g. Nexmark q5: the counts
    per auction and window, and the maximum count per window of those counts). All the
    rows of a window leave the root in the micro-batch in which the watermark passes the
    window's end, so each view's rows of that window, and the join of them, can be computed
    from that batch alone. The query runs per batch over the root's batch instead of as a
    streaming join: the root's aggregate is kept once (Spark would run it once per side of
    the join) and the join and the derived aggregates keep no state. Same rows, emitted in
    the same micro-batch as the streaming join would emit them."""
    from_ = from_clause(select)
    assert from_ is not None
    sources = [from_.this, *(j.this for j in select.args.get("joins") or [])]
    if not all(isinstance(t, exp.Table) for t in sources):
        return None
    roots = {ctx.window_roots.roots.get(t.name) for t in sources}
    if len(roots) != 1 or None in roots:
        return None
    windows = {(r.alias, r.window[0]) for r in relations if r.window is not None}
    for join, rel in zip(select.args.get("joins") or [], relations[1:], strict=True):
        on = join.args.get("on")
        if (join.args.get("side") or "").upper() or on is None or rel.window is None:
            return None
        mine = (rel.alias, rel.window[0])
        if not any(
            isinstance(eq.this, exp.Column)
            and isinstance(eq.expression, exp.Column)
            and mine in (sides := {(c.table, c.name) for c in (eq.this, eq.expression)})
            and len(sides) == 2
            and sides <= windows
            for eq in conjuncts(on)
            if isinstance(eq, exp.EQ)
        ):
            return None
    (root,) = roots
    assert root is not None
    reduced = top_rows_root(ctx, select, sources, root)
    batch_root, root_form = reduced or (root, None)
    if reduced is None and root not in ctx.window_roots.window_aggregates:
        stream = window_aggregate_root(ctx, root)
        if stream is not None:
            ctx.window_roots.window_aggregates[root] = stream
    register_batch_view(ctx, batch_root)
    # A view grouped by the window alone has a row per window the batch closes: sent whole
    # to each task, it spares shuffling and sorting the other side (q5's counts) to join.
    # (Not for session windows, of which a batch may close one per key.)
    per_window = [t.alias_or_name for t in sources if _grouped_by_window(ctx, t.name)]
    window = ctx.names.shape(root).window
    if per_window and len(per_window) < len(sources) and window and window[1].kind != "session":
        hint = select.args.get("hint") or exp.Hint(expressions=[])
        hint.append(
            "expressions",
            exp.JoinHint(
                this="BROADCAST",
                expressions=[exp.to_table(exp.to_identifier(a)) for a in per_window],
            ),
        )
        select.set("hint", hint)
    for table in sources:
        assert isinstance(table, exp.Table)
        table.replace(
            exp.Subquery(
                this=_batch_form(ctx, table.name, root_form),
                alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
            )
        )
    planned = projection(select, relations)
    return Planned(planned.node, None, None, batch_root)


def _grouped_by_window(ctx: PlanContext, view: str) -> bool:
    """Whether ``view`` is a windowed aggregate grouped by its input's window alone."""
    node = ctx.window_roots.nodes.get(view)
    source = from_clause(node) if isinstance(node, exp.Select) else None
    inner = source.this.this if source and isinstance(source.this, exp.Subquery) else None
    group = inner.args.get("group") if isinstance(inner, exp.Select) else None
    if inner is None or group is None or len(group.expressions) != 1:
        return False
    window = next(
        (p.unalias() for p in inner.expressions if p.alias_or_name == WINDOW_HELPER), None
    )
    grouped = resolve_group_item(inner, group.expressions[0])
    return window is not None and grouped.sql(dialect="spark") == window.sql(dialect="spark")


def _batch_form(ctx: PlanContext, view: str, root_form: exp.Query | None = None) -> exp.Query:
    """A window-local view's query, reading its root's micro-batch instead of the stream
    (or, given ``root_form``, reading that in place of the root's batch)."""
    root = ctx.window_roots.roots[view]
    if root == view:
        if root_form is not None:
            return root_form.copy()
        return exp.select("*").from_(exp.to_identifier(batch_view_name(root)))
    node = ctx.window_roots.nodes[view].copy()
    for table in list(node.find_all(exp.Table)):
        table.replace(
            exp.Subquery(
                this=_batch_form(ctx, table.name, root_form),
                alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
            )
        )
    return node


def note_window_root(ctx: PlanContext, view: ViewSpec, planned: Planned) -> None:
    """Record the view's root if it is window-local (see window_local_join): a
    windowed aggregate over unwindowed input is its own root; a windowed query over exactly one
    window-local view shares that view's root."""
    if planned.window is None or planned.updating is not None or planned.batch_input is not None:
        return
    tables = {t.name for t in planned.node.find_all(exp.Table)}
    if len(tables) != 1:
        return
    (table,) = tables
    records = ctx.window_roots
    shape = ctx.names.shape(table)
    if table in records.roots:
        records.roots[view.name] = records.roots[table]
    elif shape.window is None and shape.updating is None:
        records.roots[view.name] = view.name
    else:
        return
    records.nodes[view.name] = planned.node.copy()
