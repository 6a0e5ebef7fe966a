"""Time windows: ``tumble``/``hop``/``session`` in GROUP BY as Spark's ``window`` and
``session_window`` over the event time, and the windowed aggregate whose rows carry
``window_time(window)`` as their event time, so that aggregates and joins over windowed
results work downstream."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.program.names import EVENT_TIME
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.relations import Planned, Relation, event_time
from arroyo.sql.planner.syntax import WINDOW_HELPER, resolve_group_item
from arroyo.sql.time import DurationError, interval_us
from arroyo.sql.windows import WindowSpec, window_name

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def rewrite_windows(
    ctx: PlanContext, select: exp.Select, relations: list[Relation]
) -> tuple[exp.Expression, WindowSpec] | None:
    """Replace window calls with Spark's; returns the grouping window if there is one."""
    group = select.args.get("group")
    found: list[tuple[exp.Anonymous, WindowSpec]] = []
    for node in list(select.find_all(exp.Anonymous)):
        kind = window_name(node)
        if kind is None or node.find_ancestor(exp.Select) is not select:
            continue
        spec = _window_spec(ctx, node, kind)
        found.append((node, spec))
    if not found:
        return None
    for node, _ in found:
        clause = node.find_ancestor(exp.Group, exp.Where, exp.Having, exp.Join, exp.Order)
        if group is None or (clause is not None and not isinstance(clause, exp.Group)):
            raise error(
                ErrorCode.WINDOW_OUTSIDE_GROUP_BY,
                f"window function {window_name(node)}() can only be used in "
                f"GROUP BY (or selected and grouped by)",
                span_of(ctx.text, node),
            )
    input_window = next((r.window for r in relations if r.window), None)
    specs = {spec for _, spec in found}
    if len(specs) > 1:
        raise error(
            ErrorCode.MISMATCHED_WINDOWS,
            "a query can group by only one window",
            span_of(ctx.text, found[1][0]),
        )
    spec = found[0][1]
    if input_window is not None:
        name, in_spec = input_window
        if in_spec != spec:
            raise error(
                ErrorCode.MISMATCHED_WINDOWS,
                f"the input is already windowed by {in_spec.describe()} "
                f"(column '{name}'), which does not match {spec.describe()}; "
                f"group by '{name}' instead",
                span_of(ctx.text, found[0][0]),
            )
        rel = next(r for r in relations if r.window)
        replacement: exp.Expression = exp.column(name, table=rel.alias, quoted=True)
    else:
        replacement = spec.spark_call(event_time(relations))
    for node, _ in found:
        node.replace(replacement.copy())
    if spec.kind == "session" and input_window is None:
        _key_global_session(select, replacement, event_time(relations))
    return replacement, spec


def _key_global_session(select: exp.Select, window: exp.Expression, time: exp.Expression) -> None:
    """A session window with no other key is one session stream for all rows, as in Arroyo;
    Spark refuses a streaming session window without a key (and drops a literal one), so
    the rows are grouped by a key every row has the same value of, computed from the row."""
    group = select.args["group"]
    if any(resolve_group_item(select, g) != window for g in group.expressions):
        return
    constant = exp.Mul(
        this=exp.Cast(this=time.copy(), to=exp.DataType.build("BIGINT")),
        expression=exp.Literal.number(0),
    )
    group.append("expressions", constant)


def refuse_aggregate_without_window(
    ctx: PlanContext, select: exp.Select, relations: list[Relation]
) -> None:
    """An aggregate over windowed input must keep the window (group by it) or window again,
    as Arroyo requires: dropping it would turn closed windows into a result that changes."""
    for rel in relations:
        if rel.window is not None:
            name = rel.window[0]
            raise error(
                ErrorCode.AGGREGATE_WITHOUT_WINDOW,
                f"'{rel.alias}' is windowed (column '{name}'): an aggregate over it must group "
                f"by '{name}' too, or window again with tumble(), hop() or session()",
                span_of(ctx.text, select),
            )


def _window_spec(ctx: PlanContext, node: exp.Anonymous, kind: str) -> WindowSpec:
    span = span_of(ctx.text, node)
    args = node.expressions
    expected = 2 if kind == "hop" else 1
    if len(args) != expected:
        raise error(ErrorCode.BAD_WINDOW, f"{kind}() takes {expected} interval argument(s)", span)
    try:
        values = [interval_us(a) for a in args]
    except DurationError as err:
        raise error(ErrorCode.BAD_WINDOW, f"{kind}(): {err}", span) from err
    if any(v <= 0 for v in values):
        raise error(ErrorCode.BAD_WINDOW, f"{kind}() intervals must be positive", span)
    if kind == "hop":
        slide, width = values
        if width % slide != 0:
            raise error(
                ErrorCode.BAD_HOP,
                f"hop() width ({args[1].sql('postgres')}) must be a multiple of "
                f"its slide ({args[0].sql('postgres')})",
                span,
            )
        return WindowSpec("hop", width, slide)
    return WindowSpec(kind, values[0], values[0])  # type: ignore[arg-type]


def grouped_input_window(
    select: exp.Select, relations: list[Relation]
) -> tuple[exp.Expression, WindowSpec] | None:
    """An aggregate grouping by the window column of an already windowed input."""
    group = select.args.get("group")
    if group is None:
        return None
    for rel in relations:
        if rel.window is None:
            continue
        name, spec = rel.window
        for g in group.expressions:
            target = resolve_group_item(select, g)
            if isinstance(target, exp.Column) and target.name == name:
                return target.copy(), spec
    return None


def windowed_aggregate(
    ctx: PlanContext, select: exp.Select, window: tuple[exp.Expression, WindowSpec]
) -> Planned:
    """SELECT <user columns>, window_time(w) AS _timestamp FROM (agg + w) — Spark refuses
    window_time beside the aggregate itself."""
    call, spec = window
    inner = select.copy()
    inner.append("expressions", exp.alias_(call.copy(), WINDOW_HELPER))
    schema = ctx.analyse(inner.sql(dialect="spark"), select)
    names = [f.name for f in schema.fields if f.name != WINDOW_HELPER]
    out_window = None
    for p in select.expressions:
        target = p.unalias()
        if target == call or (
            isinstance(target, exp.Column)
            and isinstance(call, exp.Column)
            and target.name == call.name
        ):
            out_window = (p.alias_or_name, spec)
    alias = ctx.fresh_name("__agg")
    outer = exp.select(
        *[exp.column(n, table=alias, quoted=True) for n in names],
        exp.alias_(
            exp.Anonymous(this="window_time", expressions=[exp.column(WINDOW_HELPER, table=alias)]),
            EVENT_TIME,
        ),
    ).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return Planned(outer, out_window)
