"""Updating results: aggregates without windows (one row per key, changing as input
arrives), aggregates over changelogs that retract what a changed row contributed, and
projections of updating results.

How an updating result reaches a sink (the engine's changelog, KEEP and TOUCHED) is the
engine's; this is how the planner states them in Spark SQL.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from sqlglot import exp

from arroyo.program.names import EVENT_TIME, HIDDEN_KEY, KEEP, SIGN, TOUCHED, signed_view
from arroyo.program.spec import AggregateSpec
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.plan.stages import stage_join
from arroyo.sql.planner.relations import Planned, Relation
from arroyo.sql.planner.syntax import OWN_AGGREGATE, RANKED_ROWS, from_clause, has_aggregate

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


def updating_aggregate(ctx: PlanContext, select: exp.Select, relations: list[Relation]) -> Planned:
    """A GROUP BY without a window (or a global aggregate): one row per key, changing as
    input arrives. The keys are the selected non-aggregate columns."""
    if sum(not r.static for r in relations) > 1:
        relations = [stage_join(ctx, select, relations)]
    _name_keys(select)
    keys = [
        p.alias_or_name
        for p in select.expressions
        if not has_aggregate(p) and p.alias_or_name != EVENT_TIME and not p.meta.get(RANKED_ROWS)
    ]
    if rank := select.meta.get(RANKED_ROWS):
        keys.append(rank)  # a top-N's rows, one per rank: unwindowed_top_n
    having = select.args.get("having")
    if having is not None:
        select.set("having", None)
        select.append("expressions", exp.alias_(having.this.copy(), KEEP))
    # The time of the batch that last updated the key, for updating_ttl: last among the
    # aggregates, since the engine reads it as the last field of each key's state. Spark
    # takes no batch time inside an aggregate, so the input carries it as a column.
    from_ = from_clause(select)
    alias = relations[0].alias
    if from_ is not None:
        timed = exp.select(exp.Star(), exp.alias_(exp.CurrentTimestamp(), TOUCHED))
        from_.set(
            "this",
            exp.Subquery(
                this=timed.from_(from_.this.copy()),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            ),
        )
        touched = exp.Max(this=exp.column(TOUCHED, table=alias))
        select.append("expressions", exp.alias_(touched, TOUCHED))
    return Planned(select, None, keys)


def _name_keys(select: exp.Select) -> None:
    """Name each key the query leaves unnamed (``SELECT counter % 5, count(*) ... GROUP BY
    1``), whose name Spark makes up, by its text, so that the engine can find it in the
    result; a sink takes columns by position, so the name reaches no declared sink."""
    for p in list(select.expressions):
        named = isinstance(p, exp.Alias | exp.Column | exp.Dot | exp.Star)
        if not named and not has_aggregate(p) and not p.meta.get(RANKED_ROWS):
            p.replace(exp.alias_(p.copy(), p.sql(dialect="spark").replace("`", ""), quoted=True))


def changelog_aggregate(
    ctx: PlanContext, select: exp.Select, relations: list[Relation], *, signed: bool = False
) -> Planned:
    """An aggregate over a changelog source: it reads the source's signed rows (a change
    as +1 for the row after and -1 for the row before) and weighs each by its sign, so an
    update or a delete retracts what the old row contributed. count, sum and avg retract
    this way; a group whose rows are all gone is deleted. ``signed``: the query already
    reads signed rows (optimize.fused_changes)."""
    from_ = from_clause(select)
    assert from_ is not None
    table = from_.this
    alias = table.alias_or_name
    if not signed:
        table.replace(
            exp.Table(
                this=exp.to_identifier(signed_view(table.name)),
                alias=exp.TableAlias(this=exp.to_identifier(alias)),
            )
        )
    sign = exp.column(SIGN, table=alias)
    multisets = (exp.Min, exp.Max, exp.ArrayUniqueAgg)
    for p in list(select.expressions):
        if not isinstance(p, exp.Alias) and p.find(*multisets):
            # Named as Spark names what the query wrote, not by the calls it becomes.
            written = p.copy().transform(_count_distinct_as_written)
            name = written.sql(dialect="spark", normalize_functions="lower")
            p.replace(exp.alias_(p.copy(), name, quoted=True))
    aggregates = [n for n in select.find_all(exp.Func) if isinstance(n, exp.AggFunc)]
    for node in aggregates:
        if isinstance(node, multisets):
            _multiset_aggregate(ctx, node, sign, from_.this)
        else:
            node.replace(_signed_aggregate(ctx, node, sign))
    present = exp.GT(this=exp.Sum(this=sign.copy()), expression=exp.Literal.number(0))
    having = select.args.get("having")
    condition = present if having is None else exp.and_(present, having.this.copy())
    select.set("having", exp.Having(this=condition))
    return updating_aggregate(ctx, select, relations)


def _count_distinct_as_written(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.ArraySize) and isinstance(node.this, exp.ArrayUniqueAgg):
        return exp.Count(this=exp.Distinct(expressions=[node.this.this.copy()]))
    return node


def _signed_aggregate(ctx: PlanContext, node: exp.Func, sign: exp.Expression) -> exp.Expression:
    def weight(value: exp.Expression) -> exp.Expression:
        return exp.If(
            this=exp.Is(this=value.copy(), expression=exp.Null()),
            true=exp.Literal.number(0),
            false=sign.copy(),
        )

    if isinstance(node, exp.Count):
        value = node.this
        if value is None or isinstance(value, exp.Star):
            return exp.Sum(this=sign.copy())
        return exp.Sum(this=weight(value))
    if isinstance(node, exp.Sum):
        return exp.Sum(this=exp.Mul(this=exp.Paren(this=node.this.copy()), expression=sign.copy()))
    if isinstance(node, exp.Avg):
        total = exp.Sum(this=exp.Mul(this=exp.Paren(this=node.this.copy()), expression=sign.copy()))
        count = exp.Sum(this=weight(node.this))
        return exp.Div(
            this=exp.Cast(this=total, to=exp.DataType.build("DOUBLE")),
            expression=exp.Nullif(this=count, expression=exp.Literal.number(0)),
        )
    raise _cannot_retract(ctx, node, f"{node.key}()")


def _cannot_retract(ctx: PlanContext, node: exp.Expr, name: str) -> Exception:
    return error(
        ErrorCode.CHANGELOG_AGGREGATE,
        f"{name} cannot retract rows of a changelog (updates and deletes); over a changelog "
        f"use count, sum, avg, count(DISTINCT ...), or min and max of numbers, text, "
        f"booleans, dates and timestamps",
        span_of(ctx.text, node),
    )


# The types whose min and max SignedMultiset orders as Spark does.
_ORDERED = re.compile(
    r"tinyint|smallint|int|bigint|float|double|decimal\(.*\)|string|boolean|date|timestamp\w*"
)


def _multiset_aggregate(
    ctx: PlanContext, node: exp.Expression, sign: exp.Expression, table: exp.Expression
) -> None:
    """min, max or count(DISTINCT x) (rewritten as size(array_unique_agg(x)): see
    arroyo.sql.functions) over signed rows, replaced by a call of SignedMultiset, which keeps
    the group's multiset of values: a retraction forgets the value it retracts. A FILTER
    weighs the rows it leaves out by nothing."""
    kind: Literal["min", "max", "count_distinct"] = (
        "min"
        if isinstance(node, exp.Min)
        else "max"
        if isinstance(node, exp.Max)
        else "count_distinct"
    )
    name = "count(DISTINCT ...)" if kind == "count_distinct" else f"{kind}()"
    target = node.parent if kind == "count_distinct" else node
    if not isinstance(target, exp.Expression) or (
        kind == "count_distinct" and not isinstance(target, exp.ArraySize)
    ):
        raise _cannot_retract(ctx, node, "collect_set()")
    value = node.this
    if isinstance(value, exp.Distinct) and len(value.expressions) == 1:
        value = value.expressions[0]  # min(DISTINCT x) is min(x)
    if node.expressions or not isinstance(value, exp.Expression) or isinstance(value, exp.Distinct):
        raise _cannot_retract(ctx, node, f"{name} of more than one argument")
    weight: exp.Expression = exp.Cast(this=sign.copy(), to=exp.DataType.build("BIGINT"))
    if isinstance(target.parent, exp.Filter):
        target = target.parent
        condition = target.args["expression"].this
        weight = exp.If(this=condition.copy(), true=weight, false=exp.Null())
    probe = exp.select(exp.alias_(value.copy(), "value")).from_(table.copy())
    value_type = ctx.analyse(probe.sql(dialect="spark"), node).fields[0].dataType
    described = value_type.simpleString()
    if _unequal(value_type.jsonValue()) or (
        kind != "count_distinct" and not _ORDERED.fullmatch(described)
    ):
        raise _cannot_retract(ctx, node, f"{name} of {described}")
    spec = AggregateSpec(ctx.fresh_name(f"{OWN_AGGREGATE}{kind}"), value_type.json(), kind=kind)
    ctx.catalog.register_aggregate(spec)
    ctx.program.aggregates.append(spec)
    call = exp.Anonymous(this=spec.name, expressions=[value.copy(), weight])
    result: exp.Expr = exp.Dot(this=call, expression=exp.to_identifier("value"))
    target.replace(result)


def _unequal(type_json: object) -> bool:
    """Whether a type (as Spark's JSON) holds binary values or maps, which Java tells apart by
    identity, not by value."""
    if isinstance(type_json, dict):
        return type_json.get("type") == "map" or any(
            _unequal(v) for k, v in type_json.items() if k not in ("name", "metadata")
        )
    if isinstance(type_json, list):
        return any(_unequal(v) for v in type_json)
    return type_json == "binary"


def updating_projection(ctx: PlanContext, select: exp.Select, input_: Relation) -> Planned:
    """A projection over an updating result: updating too, keyed the same way; its WHERE
    joins the input's qualification."""
    assert input_.updating is not None
    if select.args.get("distinct"):
        raise error(
            ErrorCode.UPDATING_INPUT,
            "SELECT DISTINCT over an updating result is not supported; GROUP BY the columns "
            "instead",
            span_of(ctx.text, select),
        )
    # A key is kept where the query selects its column as it is, under its own name.
    kept = {
        p.alias_or_name
        for p in select.expressions
        if isinstance(p.unalias(), exp.Column) and p.unalias().name == p.alias_or_name
    }
    names = [p.alias_or_name for p in select.expressions]
    keys = []
    for key in input_.updating:
        if key in kept:
            keys.append(key)
            continue
        # Carried hidden, so that the sink still tells the rows apart.
        hidden = key if key.startswith(HIDDEN_KEY) else f"{HIDDEN_KEY}{key}"
        select.append(
            "expressions", exp.alias_(exp.column(key, table=input_.alias, quoted=True), hidden)
        )
        keys.append(hidden)
    conditions: list[exp.Expression] = []
    if any(name == KEEP for name, _ in input_.columns):
        conditions.append(exp.column(KEEP, table=input_.alias))
    where = select.args.get("where")
    if where is not None:
        select.set("where", None)
        conditions.append(exp.Coalesce(this=where.this.copy(), expressions=[exp.false()]))
    if conditions and KEEP not in names:
        select.append("expressions", exp.alias_(exp.and_(*conditions), KEEP))
    if any(name == TOUCHED for name, _ in input_.columns) and TOUCHED not in names:
        select.append("expressions", exp.column(TOUCHED, table=input_.alias))
    return Planned(select, None, keys)
