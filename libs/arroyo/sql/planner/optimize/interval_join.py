"""Arroyo's interval join in place of Spark's stream-stream join, where a join's condition
bounds each side's event time against the other's (IntervalJoin.java says why it is cheaper:
a key's rows of both sides in one state value). Same pairs as Spark's join."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from arroyo.program.names import EVENT_TIME, quote_name
from arroyo.program.spec import IntervalJoinSpec, ViewSpec
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.relations import Relation
from arroyo.sql.planner.syntax import TIME_COMPARISONS, conjuncts, from_clause, interval_shift

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def interval_join_view(
    ctx: PlanContext, select: exp.Select, relations: list[Relation]
) -> str | None:
    """Runs a join of two streams through Arroyo's interval join when its condition bounds
    each side's event time against the other's (after plan.joins.bound_unwindowed_joins, every join
    of two streams with event times whose ON it could extend): the pairs with equal keys
    and times within the bounds, from state that holds a key's rows of both sides in one
    value (IntervalJoin.java says why that is cheaper than Spark's join). The rest of the
    condition (ON and WHERE) filters the pairs. ``select`` is rewritten in place to read
    the join's view, each input a struct column named by its alias (``A.auction.id`` reads
    as before); returns the view's name. Joins in any other form are left to Spark."""
    joins = select.args.get("joins") or []
    from_ = from_clause(select)
    if len(relations) != 2 or len(joins) != 1 or from_ is None:
        return None
    join = joins[0]
    on = join.args.get("on")
    left, right = relations
    if (
        on is None
        or join.args.get("side")
        or (join.args.get("kind") or "").upper() not in ("", "INNER")
        or left.static
        or right.static
        or not (left.has_event_time and right.has_event_time)
        or left.alias.lower() == right.alias.lower()
    ):
        return None
    aliases = {left.alias.lower(): left.alias, right.alias.lower(): right.alias}
    owners: dict[str, str] = {}
    for rel in relations:
        for name, _ in rel.columns:
            owners[name.lower()] = "" if name.lower() in owners else rel.alias
    parts: list[exp.Expression] = [*select.expressions, on]
    where = select.args.get("where")
    if where is not None:
        parts.append(where)
    for part in parts:
        for col in list(part.find_all(exp.Column)):
            if col.find_ancestor(exp.Select) is not select or col.is_star:
                continue
            head = col.parts[0].name.lower()
            if head in aliases and len(col.parts) > 1:
                continue  # qualified (a lone name is a column, even one named as an alias)
            owner = owners.get(head)
            if owner == "":
                return None  # ambiguous: Spark's join reports it
            if owner is not None:
                qualified = f"{quote_name(owner)}.{col.sql(dialect='spark')}"
                col.replace(sqlglot.parse_one(qualified, read="spark"))
    # Read again: a column qualified above may have been one of these nodes itself.
    on = join.args["on"]
    where = select.args.get("where")
    parts = [*select.expressions, on, *([where] if where is not None else [])]
    # The fields each side's rows carry through the join's state: those the query reads
    # (the join cannot see which the query drops after it, as Spark's join can).
    paths: dict[str, list[list[str]]] = {a: [[EVENT_TIME]] for a in aliases}
    for part in parts:
        for col in part.find_all(exp.Column):
            names = [p.name for p in col.parts]
            if col.find_ancestor(exp.Select) is select and names[0].lower() in aliases:
                paths[names[0].lower()].append(names[1:])
    keys = None
    lower, upper = -math.inf, math.inf
    for conjunct in conjuncts(on):
        if isinstance(conjunct, exp.EQ) and keys is None:
            sides = {
                (c.parts[0].name.lower() if len(c.parts) > 1 else ""): c
                for c in (conjunct.this, conjunct.expression)
                if isinstance(c, exp.Column)
            }
            if set(sides) == {left.alias.lower(), right.alias.lower()}:
                keys = (sides[left.alias.lower()], sides[right.alias.lower()])
        bound = _time_difference(conjunct, left.alias, right.alias)
        if bound is not None:
            at_least, offset = bound
            if at_least:
                lower = max(lower, offset)
            else:
                upper = min(upper, offset)
    if keys is None or math.isinf(lower) or math.isinf(upper):
        return None
    # Conditions on one input's columns alone filter that input before the join (as
    # Spark's optimizer would push them, which it cannot through the interval join): rows
    # they drop never reach its state. They stay in the condition on the pairs too.
    conditions = conjuncts(on) + (conjuncts(where.this) if where is not None else [])
    filters: dict[str, list[str]] = {a: [] for a in aliases}
    for condition in conditions:
        heads = {c.parts[0].name.lower() for c in condition.find_all(exp.Column)}
        if (
            len(heads) == 1
            and heads <= set(aliases)
            and not condition.find(exp.Subquery, exp.Rand, exp.Window, exp.AggFunc)
        ):
            filters[heads.pop()].append(f"({condition.sql(dialect='spark')})")

    def inner(source: exp.Expression) -> str:
        if isinstance(source, exp.Subquery):
            return str(source.this.sql(dialect="spark"))
        return f"SELECT * FROM {quote_name(source.name)}"

    def side(rel: Relation, key: exp.Column, tag: str) -> tuple[str, str | None]:
        """The side's columns (key, event time, its struct) and its filter, if any."""
        alias = quote_name(rel.alias)
        mine = filters[rel.alias.lower()]
        columns = (
            f"{key.sql(dialect='spark')} AS __{tag}k, {alias}.{EVENT_TIME} AS __{tag}t, "
            f"{_fields_struct(alias, paths[rel.alias.lower()])} AS {alias}"
        )
        return columns, " AND ".join(mine) if mine else None

    def query(columns: str, source: str, alias: str, condition: str | None) -> str:
        where = f" WHERE {condition}" if condition else ""
        return f"SELECT {columns} FROM ({source}) AS {quote_name(alias)}{where}"

    (left_columns, left_filter), (right_columns, right_filter) = (
        side(left, keys[0], "l"),
        side(right, keys[1], "r"),
    )
    left_source, right_source = inner(from_.this), inner(join.this)
    left_sql = query(left_columns, left_source, left.alias, left_filter)
    right_sql = query(right_columns, right_source, right.alias, right_filter)
    shared_sql = None
    if left_source == right_source:
        # A self-join: one read of the relation gives both sides' rows. The right side's
        # columns are restated over the left's alias.
        right_columns = _requalified(right_columns, right.alias, left.alias)
        right_filter = right_filter and _requalified(right_filter, right.alias, left.alias)
        both = (
            f"{left_columns}, coalesce({left_filter or 'TRUE'}, FALSE) AS __lon, "
            f"{right_columns}, coalesce({right_filter or 'TRUE'}, FALSE) AS __ron"
        )
        either = f"({left_filter}) OR ({right_filter})" if left_filter and right_filter else None
        shared_sql = query(both, left_source, left.alias, either)
    key_types = [
        ctx.catalog.schema(q)["__lk" if i == 0 else "__rk"].dataType
        for i, q in enumerate((left_sql, right_sql))
    ]
    if key_types[0] != key_types[1]:
        return None  # Spark's join coerces them to a common type

    def seconds(us: float) -> str:
        return f"INTERVAL '{us / 1_000_000:.6f}' SECOND"

    name = ctx.fresh_name("__interval_join")
    view = ViewSpec(
        name,
        f"SELECT * FROM ({left_sql}) AS __l JOIN ({right_sql}) AS __r "
        f"ON __l.__lk = __r.__rk AND __r.__rt >= __l.__lt + {seconds(lower)} "
        f"AND __r.__rt <= __l.__lt + {seconds(upper)}",
        IntervalJoinSpec(left_sql, right_sql, int(lower), int(upper), shared_sql),
    )
    ctx.add_view(view, select, ViewShape())
    residual = on.copy() if where is None else exp.and_(exp.paren(on.copy()), where.this)
    from_.set("this", exp.Table(this=exp.to_identifier(name)))
    select.set("joins", None)
    select.set("where", exp.Where(this=residual))
    return name


def _time_difference(condition: exp.Expression, left: str, right: str) -> tuple[bool, int] | None:
    """``(True, c)`` when ``condition`` says ``right._timestamp - left._timestamp >= c``
    (microseconds), ``(False, c)`` when it says ``<= c``; None for anything else."""

    def term(node: exp.Expression) -> tuple[str, int] | None:
        shifted = interval_shift(node.this if isinstance(node, exp.Paren) else node)
        if shifted is None:
            return None
        node, offset = shifted
        if not isinstance(node, exp.Column) or node.name != EVENT_TIME or len(node.parts) != 2:
            return None
        return node.parts[0].name.lower(), offset

    if not isinstance(condition, TIME_COMPARISONS):
        return None
    a, b = term(condition.this), term(condition.expression)
    if a is None or b is None or {a[0], b[0]} != {left.lower(), right.lower()}:
        return None
    # a_t + a_off >= b_t + b_off (or <=); turned around so that right's time is on the left.
    at_least = isinstance(condition, exp.GT | exp.GTE)
    if a[0] == left.lower():
        (a, b), at_least = (b, a), not at_least
    # right_t - left_t >= (or <=) left_off - right_off
    return at_least, b[1] - a[1]


def _requalified(sql: str, alias: str, to: str) -> str:
    """``sql`` (Spark SQL: a list of columns, or a condition) with the columns qualified by
    ``alias`` qualified by ``to`` instead (``B.bid.auction`` becomes ``A.bid.auction``)."""
    tree = sqlglot.parse_one(f"SELECT {sql}", read="spark")
    for col in tree.find_all(exp.Column):
        for arg in ("catalog", "db", "table"):
            head = col.args.get(arg)
            if head is not None:
                if head.name.lower() == alias.lower():
                    col.set(arg, exp.to_identifier(to))
                break
    assert isinstance(tree, exp.Select)
    return ", ".join(e.sql(dialect="spark") for e in tree.expressions)


def _fields_struct(alias: str, paths: list[list[str]]) -> str:
    """A struct of ``alias``'s fields at ``paths`` (names below it; a path that is a prefix of
    another takes its whole field), nested as they are: ``A.auction.id`` reads the same from
    it as from the relation."""
    if any(not path for path in paths):
        return f"struct({alias}.*)"  # the whole row
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for i, name in enumerate(path):
            key = name.lower()
            entry = node.setdefault(key, [name, {}, False])
            if i == len(path) - 1:
                entry[2] = True
            node = entry[1]

    def build(prefix: str, node: dict[str, Any]) -> str:
        fields = []
        for name, children, whole in node.values():
            ref = f"{prefix}.{quote_name(name)}"
            value = ref if whole or not children else build(ref, children)
            fields.append(f"{exp.Literal.string(name).sql(dialect='spark')}, {value}")
        return f"named_struct({', '.join(fields)})"

    return build(alias, tree)
