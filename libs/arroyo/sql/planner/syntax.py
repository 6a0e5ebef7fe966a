"""Readings of sqlglot trees that several steps of the planner share."""

from __future__ import annotations

from sqlglot import exp

from arroyo.sql.time import DurationError, interval_us

# The column under which a windowed aggregate's inner query selects its window (see
# plan.windows.windowed_aggregate), whatever the user named it.
WINDOW_HELPER = "__arroyo_window"

# The meta key marking a top-N's generated rows and its aggregate (plan.window_fn's
# unwindowed_top_n), which later steps must not take for a plain column.
RANKED_ROWS = "arroyo_ranked_rows"

# Comparisons that can bound one event time by another.
TIME_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE)

# The aggregates Arroyo's retracting and window aggregates run, by kind.
_PLAIN_AGGREGATES: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


def from_clause(select: exp.Expr) -> exp.From | None:
    """A query's FROM clause: under ``from_`` in the sqlglot we pin, under ``from`` in older
    releases, which is read too so that the planner does not depend on the spelling."""
    found: exp.From | None = select.args.get("from_") or select.args.get("from")
    return found


def conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    """The terms of a condition's top-level ANDs, through parentheses."""
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    return [condition]


def resolve_group_item(select: exp.Select, item: exp.Expression) -> exp.Expression:
    """A GROUP BY item as the expression it groups by: a position or a select alias resolved."""
    if isinstance(item, exp.Literal) and not item.is_string:
        index = int(item.name) - 1
        if 0 <= index < len(select.expressions):
            target: exp.Expression = select.expressions[index].unalias()
            return target
    if isinstance(item, exp.Column) and not item.table:
        for p in select.expressions:
            if isinstance(p, exp.Alias) and p.alias == item.name:
                aliased: exp.Expression = p.this
                return aliased
    return item


# The names of the aggregate functions of Arroyo's own that the planner calls (anonymous
# calls to sqlglot), as AggregateSpecs register them (sqlglot may write them in capitals).
OWN_AGGREGATE = "__arroyo_multiset_"


def has_aggregate(node: exp.Expression) -> bool:
    """Whether ``node`` calls an aggregate function (not as a window function)."""
    return any(agg.find_ancestor(exp.Window) is None for agg in node.find_all(exp.AggFunc)) or any(
        call.name.lower().startswith(OWN_AGGREGATE) for call in node.find_all(exp.Anonymous)
    )


def plain_aggregate(value: exp.Expression) -> tuple[str, exp.Expression] | None:
    """A call of count, sum, avg, min or max over a plain argument (``count(*)`` counting a
    constant) as its kind and argument; None for any other expression (DISTINCT, FILTER,
    several arguments, an aggregate or window inside)."""
    kind = _PLAIN_AGGREGATES.get(type(value))
    argument = value.this if kind else None
    if kind == "count" and (argument is None or isinstance(argument, exp.Star)):
        argument = exp.Literal.number(1)
    if (
        kind is None
        or argument is None
        or value.args.get("expressions")
        or isinstance(argument, exp.Distinct)
        or argument.find(exp.AggFunc, exp.Window)
    ):
        return None
    return kind, argument


def interval_shift(node: exp.Expression) -> tuple[exp.Expression, int] | None:
    """``(x, c)`` for ``x + INTERVAL`` / ``x - INTERVAL`` (``c`` the signed interval in
    microseconds), ``(node, 0)`` for anything else; None for an interval of no fixed length."""
    if not (isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval)):
        return node, 0
    try:
        offset = interval_us(node.expression)
    except DurationError:
        return None
    return node.this, -offset if isinstance(node, exp.Sub) else offset
