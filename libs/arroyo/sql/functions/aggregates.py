"""Aggregates as DataFusion computes them. Each rewrite keeps a sqlglot aggregate node in its
result (``collect_list``, ``min_by``...), which is how the planner tells an aggregate query.

* ``array_agg`` keeps NULLs and honours ``ORDER BY`` (Spark's ``collect_list`` does neither).
* ``first_value``/``last_value`` with ``ORDER BY`` are ``min_by``/``max_by``.
* ``median`` of integers is an integer (the mean of the middle two, truncated).
* ``approx_distinct`` is Spark's HyperLogLog++ with DataFusion's 2^14 registers.
* ``approx_percentile_cont`` (and ``_with_weight``, ``approx_median``) is DataFusion's t-digest
  estimate, computed over every value of the group: exactly Arroyo's answer while its digest
  keeps one centroid per value (up to some 70 values), close to it beyond. It keeps the
  group's values in state, as ``median`` does.
* the aliases ``mean``, ``var``, ``var_sample``, ``var_population``, ``covar``.
"""

from __future__ import annotations

from sqlglot import exp

from arroyo.sql.functions.core import (
    Call,
    Context,
    FunctionError,
    Rewrite,
    as_node,
    spark,
    typed,
)
from arroyo.sql.functions.inference import is_float, is_integer

WITHIN_GROUP = frozenset({"approx_percentile_cont", "approx_percentile_cont_with_weight"})


def count(node: exp.Expr, _context: Context) -> exp.Expr | None:
    """``count(DISTINCT x)``: Spark runs no DISTINCT aggregate on a stream; a set is one."""
    assert isinstance(node, exp.Count)
    distinct = node.this
    if not isinstance(distinct, exp.Distinct) or node.find_ancestor(exp.Window) is not None:
        return None
    values = distinct.expressions
    if len(values) == 1:
        value = values[0].copy()
    else:
        # A row counts only where none of the values is NULL, as SQL has it (a set of
        # structs would count a struct holding a NULL).
        value = exp.If(
            this=exp.or_(*(exp.Is(this=v.copy(), expression=exp.Null()) for v in values)),
            true=exp.Null(),
            false=exp.Anonymous(this="struct", expressions=[v.copy() for v in values]),
        )
    # Real sqlglot nodes (not anonymous calls), so that it still counts as an aggregate.
    return typed(exp.ArraySize(this=exp.ArrayUniqueAgg(this=value)), "bigint")


def within_group(root: exp.Expr) -> None:
    """``approx_percentile_cont(p) WITHIN GROUP (ORDER BY x)``, DataFusion's spelling since
    version 48, is the older ``approx_percentile_cont(x, p)`` (and likewise with weight)."""
    for node in list(root.find_all(exp.WithinGroup)):
        inner, order = node.this, node.expression
        if not isinstance(inner, exp.Anonymous) or not isinstance(order, exp.Order):
            continue
        name = inner.name.lower()
        if name not in WITHIN_GROUP:
            continue
        if len(order.expressions) != 1 or order.expressions[0].args.get("desc"):
            raise FunctionError(
                f"{name}(): WITHIN GROUP takes one ascending ORDER BY expression", order
            )
        value = order.expressions[0].this.copy()
        args = [value, *[a.copy() for a in inner.expressions]]
        call = exp.Anonymous(this=name, expressions=args)
        if node is root:
            raise FunctionError("cannot rewrite the root expression in place", node)
        node.replace(call)


def _comparator(keys: list[exp.Ordered]) -> str:
    """A comparator of ``__l``/``__r`` (structs with fields k0, k1...) for ``array_sort``."""
    result = "0"
    for i in reversed(range(len(keys))):
        desc = bool(keys[i].args.get("desc"))
        nulls_first = keys[i].args.get("nulls_first")
        if nulls_first is None:
            nulls_first = desc  # Postgres' (and DataFusion's) default
        less, more = ("1", "-1") if desc else ("-1", "1")
        null_l, null_r = ("-1", "1") if nulls_first else ("1", "-1")
        left, right = f"__l.k{i}", f"__r.k{i}"
        result = (
            f"CASE WHEN {left} IS NULL AND {right} IS NULL THEN {result} "
            f"WHEN {left} IS NULL THEN {null_l} WHEN {right} IS NULL THEN {null_r} "
            f"WHEN {left} < {right} THEN {less} WHEN {left} > {right} THEN {more} "
            f"ELSE {result} END"
        )
    return result


def array_agg(node: exp.Expr, _context: Context) -> exp.Expr | None:
    """Every value, NULLs included, in the ``ORDER BY`` order when there is one."""
    assert isinstance(node, exp.ArrayAgg)
    if node.find_ancestor(exp.Window) is not None:
        return None
    inner = node.this
    if isinstance(inner, exp.Distinct):
        if len(inner.expressions) != 1:
            raise FunctionError("array_agg(DISTINCT ...) takes one value", node)
        value = inner.expressions[0]
        collected = spark("array_distinct(collect_list(named_struct('v', {0})))", value)
        return spark("transform({0}, __s -> __s.v)", collected)
    keys: list[exp.Ordered] = []
    if isinstance(inner, exp.Order):
        keys = [k for k in inner.expressions if isinstance(k, exp.Ordered)]
        inner = inner.this
    fields: list[exp.Expr] = [exp.Literal.string("v"), inner.copy()]
    for i, key in enumerate(keys):
        fields.extend([exp.Literal.string(f"k{i}"), key.this.copy()])
    collected = spark("collect_list({0})", exp.Anonymous(this="named_struct", expressions=fields))
    if keys:
        collected = spark(f"array_sort({{0}}, (__l, __r) -> {_comparator(keys)})", collected)
    return spark("transform({0}, __s -> __s.v)", collected)


def _by(node: exp.Expr, first: bool) -> exp.Expr | None:
    """``first_value(x ORDER BY y)`` is ``min_by(x, y)`` (``max_by`` for DESC or last_value);
    without ORDER BY, Spark's ``first_value``/``last_value`` (arrival order)."""
    if node.find_ancestor(exp.Window) is not None or not isinstance(node.this, exp.Order):
        return None
    order = node.this
    keys = [k for k in order.expressions if isinstance(k, exp.Ordered)]
    name = "first_value" if first else "last_value"
    directions = {bool(k.args.get("desc")) for k in keys}
    if len(directions) != 1:
        raise FunctionError(
            f"{name}(): ORDER BY keys in mixed directions are not supported; "
            "order by one key or keys in one direction",
            node,
        )
    ascending = not directions.pop()
    key = (
        keys[0].this.copy()
        if len(keys) == 1
        else exp.Anonymous(this="struct", expressions=[k.this.copy() for k in keys])
    )
    by = "min_by" if ascending == first else "max_by"
    return spark(f"{by}({{0}}, {{1}})", order.this.copy(), key)


def first_value(node: exp.Expr, _context: Context) -> exp.Expr | None:
    return _by(node, first=True)


def last_value(node: exp.Expr, _context: Context) -> exp.Expr | None:
    return _by(node, first=False)


def _in_input_type(call: Call, result: exp.Expr) -> exp.Expr:
    """DataFusion answers in the argument's type: an integer is truncated."""
    kind = call.type_of(0)
    if is_integer(kind):
        return typed(exp.cast(result, "BIGINT"), "bigint")
    if kind is not None and not is_float(kind) and kind.this == exp.DataType.Type.DECIMAL:
        cast = exp.Cast(this=result, to=kind.copy())
        return typed(cast, kind.sql(dialect="spark"))
    return typed(result, "double")


def _median(call: Call) -> exp.Expr:
    call.arity(1)
    return _in_input_type(call, exp.Median(this=call.arg(0)))


def _approx_distinct(call: Call) -> exp.Expr:
    call.arity(1)
    # rsd 0.0087 gives HyperLogLog++ 2^14 registers, as many as DataFusion's HyperLogLog.
    return typed(
        exp.ApproxDistinct(this=call.arg(0), accuracy=exp.Literal.number("0.0087")), "bigint"
    )


def _percentile_of(sorted_pairs: exp.Expr, percentile: float, weighted: bool) -> exp.Expr:
    """DataFusion's ``TDigest::estimate_quantile`` over centroids (x, w), one per input row,
    sorted by x. Its count is the number of rows, also for a weighted digest (whose centroids
    carry the weights), as in DataFusion.

    In the expression, ``__a`` is the sorted centroids, ``__m`` their cumulative weights and
    total weight, ``__p`` the centroid the rank falls in (``pos``) and the weight before it as
    DataFusion counts it (``t``)."""
    if percentile <= 0:
        return spark("try_element_at({0}, 1).x", sorted_pairs)
    if percentile >= 1:
        return spark("try_element_at({0}, -1).x", sorted_pairs)
    rank = f"(CAST({percentile!r} AS DOUBLE) * size(__a))"
    if not weighted:
        # Each centroid weighs 1: the rank falls in centroid floor(rank), after as many.
        position = f"named_struct('pos', CAST(floor({rank}) AS INT), 't', floor({rank}))"
    elif percentile <= 0.5:
        # The first centroid whose cumulative weight passes the rank.
        found = f"array_position(transform(__m.cum, __c -> {rank} < __c), true)"
        position = (
            f"named_struct('pos', IF({found} = 0, size(__a) - 1, {found} - 1), "
            f"'t', IF({found} = 0, __m.total, __m.cum[{found} - 1] - __a[{found} - 1].w))"
        )
    else:
        # From the last centroid back, the first whose weight from the count leaves the rank.
        before = "(size(__a) - __m.total + __m.cum[{0}] - __a[{0}].w)"
        found = f"filter(sequence(0, size(__a) - 1), __k -> {rank} >= {before.format('__k')})"
        last = f"element_at({found}, -1)"
        position = (
            f"named_struct('pos', IF(size({found}) = 0, 0, {last}), "
            f"'t', IF(size({found}) = 0, size(__a) - __m.total, {before.format(last)}))"
        )
    # The centroid's mean, moved by how far into it the rank falls times the spacing of its
    # neighbours, kept between them.
    value = (
        "CASE WHEN size(__a) = 1 THEN __a[0].x "
        "WHEN __p.pos = 0 THEN least(greatest(__a[0].x + (({r} - __p.t) / __a[0].w - 0.5) "
        "* (__a[1].x - __a[0].x), __a[0].x), __a[1].x) "
        "WHEN __p.pos = size(__a) - 1 THEN least(greatest(__a[__p.pos].x + (({r} - __p.t) "
        "/ __a[__p.pos].w - 0.5) * (__a[__p.pos].x - __a[__p.pos - 1].x), "
        "__a[__p.pos - 1].x), __a[__p.pos].x) "
        "ELSE least(greatest(__a[__p.pos].x + (({r} - __p.t) / __a[__p.pos].w - 0.5) "
        "* (__a[__p.pos + 1].x - __a[__p.pos - 1].x) / 2, __a[__p.pos - 1].x), "
        "__a[__p.pos + 1].x) END"
    ).replace("{r}", rank)
    located = f"element_at(transform(array({position}), __p -> {value}), 1)"
    if weighted:
        # Cumulative weights: quadratic in the group's size, as Spark has no running sum.
        statistics = (
            "named_struct('cum', transform(__a, (__e, __i) -> aggregate(slice(__a, 1, __i + 1), "
            "CAST(0 AS DOUBLE), (__s, __f) -> __s + __f.w)), "
            "'total', aggregate(__a, CAST(0 AS DOUBLE), (__s, __f) -> __s + __f.w))"
        )
        located = f"element_at(transform(array({statistics}), __m -> {located}), 1)"
    template = (
        f"IF(size({{0}}) = 0, NULL, element_at(transform(array({{0}}), __a -> {located}), 1))"
    )
    return spark(template, sorted_pairs)


def _percentile_literal(call: Call, index: int) -> float:
    text = call.literal(index, "percentile")
    try:
        percentile = float(text)
    except ValueError as err:
        raise call.fail(f"the percentile must be a number, not {text}", call.args[index]) from err
    if not 0 <= percentile <= 1:
        raise call.fail(
            f"Percentile value must be between 0.0 and 1.0 inclusive, {text} is invalid",
            call.args[index],
        )
    return percentile


def _approx_percentile(call: Call, value: exp.Expr, weight: exp.Expr | None, q: float) -> exp.Expr:
    pair = spark(
        "named_struct('x', CAST({0} AS DOUBLE), 'w', CAST({1} AS DOUBLE))",
        value,
        weight if weight is not None else exp.Literal.number(1),
    )
    condition = "{0} IS NOT NULL" if weight is None else "{0} IS NOT NULL AND {1} IS NOT NULL"
    keep = spark(condition, value, weight if weight is not None else exp.null())
    collected = spark("array_sort(collect_list(IF({0}, {1}, NULL)))", keep, pair)
    return _in_input_type(call, _percentile_of(collected, q, weighted=weight is not None))


def _approx_percentile_cont(call: Call) -> exp.Expr:
    call.arity(2, 3)  # the third argument (centroids) does not change an exact digest
    return _approx_percentile(call, call.arg(0), None, _percentile_literal(call, 1))


def _approx_percentile_cont_with_weight(call: Call) -> exp.Expr:
    call.arity(3)
    return _approx_percentile(call, call.arg(0), call.arg(1), _percentile_literal(call, 2))


def _approx_median(call: Call) -> exp.Expr:
    call.arity(1)
    return _approx_percentile(call, call.arg(0), None, 0.5)


REWRITES: dict[str, Rewrite] = {
    "median": _median,
    "approx_distinct": _approx_distinct,
    "approx_median": _approx_median,
    "approx_percentile_cont": _approx_percentile_cont,
    "approx_percentile_cont_with_weight": _approx_percentile_cont_with_weight,
    "mean": as_node(exp.Avg, "this"),
    "var": as_node(exp.Variance, "this"),
    "var_sample": as_node(exp.Variance, "this"),
    "var_population": as_node(exp.VariancePop, "this"),
    "covar": as_node(exp.CovarSamp, "this", "expression"),
}
