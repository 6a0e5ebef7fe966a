"""Arrays and structs as DataFusion handles them: 1-based indexes that answer NULL out of range
(Spark's ANSI mode fails), ``array_remove``/``array_replace`` of the first match only,
``array_distinct`` sorted, NULL elements kept, ``list_*`` aliases, and the functions Spark lacks,
written with its higher-order functions. ``struct(a, b)`` names its fields ``c0``, ``c1``.
"""

from __future__ import annotations

from sqlglot import exp

from arroyo.sql.functions.core import (
    Call,
    Context,
    Rewrite,
    func,
    integer_literal,
    renamed,
    spark,
    string_literal,
    template,
    typed,
)
from arroyo.sql.functions.inference import array_depth

_EMPTY = "slice({0}, 1, 0)"  # an empty array of {0}'s type


def element(array: exp.Expr, index: exp.Expr) -> exp.Expr:
    """The element at a 1-based index (from the end when negative); NULL out of range or at 0."""
    return spark("IF({1} = 0, NULL, try_element_at({0}, {1}))", array, index)


def subscript(node: exp.Expr, context: Context) -> exp.Expr | None:
    """``arr[i]``: 1-based, NULL out of range (sqlglot has already moved a literal index to
    Spark's 0-based one)."""
    assert isinstance(node, exp.Bracket)
    if len(node.expressions) != 1 or node.args.get("safe"):
        return None
    index = node.expressions[0]
    kind = context.types.of(node.this)
    if string_literal(index) is not None or (kind is not None and array_depth(kind) == 0):
        return None  # a map's key or a struct's field
    literal = integer_literal(index)
    original = exp.Literal.number(literal + 1) if literal is not None else index.copy()
    if literal is not None and literal + 1 < 0:
        original = exp.Neg(this=exp.Literal.number(-(literal + 1)))
    return element(node.this.copy(), original)


def struct(node: exp.Expr, _context: Context) -> exp.Expr:
    """``struct(a, b AS x)`` has the fields ``c0`` and ``x`` (Spark would name them after the
    columns, ``a``)."""
    assert isinstance(node, exp.Struct)
    parts: list[exp.Expr] = []
    for i, item in enumerate(node.expressions):
        if isinstance(item, exp.PropertyEQ | exp.Alias):
            name = item.this.name if isinstance(item, exp.PropertyEQ) else item.alias
            value = item.expression if isinstance(item, exp.PropertyEQ) else item.this
        else:
            name, value = f"c{i}", item
        parts.extend([exp.Literal.string(name), value.copy()])
    return func("named_struct", *parts)


def _depth(call: Call, index: int = 0) -> int | None:
    return array_depth(call.type_of(index))


def _known_depth(call: Call) -> int:
    depth = _depth(call)
    if depth is None:
        raise call.fail(
            "the array's type is not known here (read it from a column, a cast or make_array)"
        )
    return depth


def _array_element(call: Call) -> exp.Expr:
    call.arity(2)
    return element(call.arg(0), call.arg(1))


def _append(call: Call) -> exp.Expr:
    call.arity(2)
    return exp.ArrayAppend(this=call.arg(0), expression=call.arg(1))


def _prepend(call: Call) -> exp.Expr:
    call.arity(2)
    return exp.ArrayPrepend(this=call.arg(1), expression=call.arg(0))


def _concat(call: Call) -> exp.Expr:
    """NULL arrays are left out (NULL when every one is NULL)."""
    if not call.args:
        raise call.fail("takes one or more arrays")
    if len(call.args) == 1:
        return call.arg(0)
    all_null = " AND ".join(f"{{{i}}} IS NULL" for i in range(len(call.args)))
    parts = ", ".join(f"coalesce({{{i}}}, array())" for i in range(len(call.args)))
    return spark(f"IF({all_null}, NULL, concat({parts}))", *[a.copy() for a in call.args])


# False when absent, even beside NULL elements (Spark's array_contains answers NULL).
_has = template(
    "IF({1} IS NULL, NULL, exists({0}, __x -> coalesce(__x = {1}, false)))", "boolean", arity=2
)


_has_all = template("forall({1}, __y -> exists({0}, __x -> __x <=> __y))", "boolean", arity=2)


_has_any = template("exists({1}, __y -> exists({0}, __x -> __x <=> __y))", "boolean", arity=2)


def _dims_of(array: exp.Expr, depth: int) -> exp.Expr:
    """Each dimension's size, read along the first elements (as DataFusion does)."""
    sizes = []
    level = array
    for _ in range(max(depth, 1)):
        sizes.append(spark("size({0})", level))
        level = spark("try_element_at({0}, 1)", level)
    listed = exp.Array(expressions=sizes)
    return spark("IF({0} IS NULL, NULL, filter({1}, __d -> __d IS NOT NULL))", array, listed)


def _dims(call: Call) -> exp.Expr:
    call.arity(1)
    return typed(_dims_of(call.arg(0), _known_depth(call)), "array<bigint>")


def _ndims(call: Call) -> exp.Expr:
    call.arity(1)
    return typed(spark("IF({0} IS NULL, NULL, {1})", call.arg(0), _known_depth(call)), "bigint")


def _cardinality(call: Call) -> exp.Expr:
    """The product of the dimensions (all elements of a regular array)."""
    call.arity(1)
    depth = _depth(call) or 1
    if depth == 1:
        return typed(spark("size({0})", call.arg(0)), "bigint")
    return typed(
        spark(
            "aggregate({0}, CAST(1 AS BIGINT), (__n, __d) -> __n * __d)",
            _dims_of(call.arg(0), depth),
        ),
        "bigint",
    )


def _distinct(call: Call) -> exp.Expr:
    """Distinct elements, sorted (NULL first), as DataFusion answers them."""
    call.arity(1)
    return spark("sort_array(array_distinct({0}), true)", call.arg(0))


def _fill(call: Call) -> exp.Expr:
    """Deprecated ``array_fill(value, [dims])``: nested ``array_repeat``s."""
    call.arity(2)
    dims = call.args[1]
    if not isinstance(dims, exp.Array):
        raise call.fail("the dimensions must be an array literal; use array_repeat", dims)
    filled = call.arg(0)
    for size in reversed(dims.expressions):
        filled = func("array_repeat", filled, size.copy())
    return filled


def _flatten_once(array: exp.Expr) -> exp.Expr:
    # DataFusion leaves NULL inner arrays out; Spark's flatten would answer NULL.
    return spark("flatten(transform({0}, __f -> coalesce(__f, array())))", array)


def _flatten(call: Call) -> exp.Expr:
    """One level of nesting removed; a flat array is left as it is."""
    call.arity(1)
    if _depth(call) == 1:
        return call.arg(0)
    return _flatten_once(call.arg(0))


def _to_string(call: Call) -> exp.Expr:
    """Elements (of nested arrays too) as text between delimiters; NULLs left out unless
    ``null_string`` is given."""
    call.arity(2, 3)
    flat = call.arg(0)
    for _ in range((_depth(call) or 1) - 1):
        flat = _flatten_once(flat)
    texts = spark("transform({0}, __x -> CAST(__x AS STRING))", flat)
    return typed(func("array_join", texts, *[a.copy() for a in call.args[1:]]), "string")


def _length(call: Call) -> exp.Expr:
    call.arity(1, 2)
    dimension = call.integer(1, "dimension") if len(call.args) == 2 else 1
    if dimension < 1:
        return typed(spark("CAST(NULL AS BIGINT)"), "bigint")
    level = call.arg(0)
    for _ in range(dimension - 1):
        level = spark("try_element_at({0}, 1)", level)
    return typed(spark("size({0})", level), "bigint")


def _pop_front(call: Call) -> exp.Expr:
    call.arity(1)
    return spark("slice({0}, 2, greatest(size({0}) - 1, 0))", call.arg(0))


def _pop_back(call: Call) -> exp.Expr:
    call.arity(1)
    return spark("slice({0}, 1, greatest(size({0}) - 1, 0))", call.arg(0))


def _position(call: Call) -> exp.Expr:
    """The first 1-based position of the element (from ``start``), NULL when absent."""
    call.arity(2, 3)
    if len(call.args) == 2:
        return typed(
            spark("nullif(array_position({0}, {1}), 0)", call.arg(0), call.arg(1)), "bigint"
        )
    return typed(
        spark(
            "IF(size({0}) < {2}, NULL, try_element_at(filter(sequence(greatest({2}, 1), "
            "size({0})), __i -> try_element_at({0}, __i) <=> {1}), 1))",
            call.arg(0),
            call.arg(1),
            call.arg(2),
        ),
        "bigint",
    )


_positions = template(
    "IF({0} IS NULL, NULL, filter(sequence(1, greatest(size({0}), 1)), "
    "__i -> __i <= size({0}) AND try_element_at({0}, __i) <=> {1}))",
    "array<bigint>",
    arity=2,
)


_SEEN = "size(filter(slice({0}, 1, __i + 1), __y -> __y <=> {1}))"


def _remove_first(limit: int | None) -> Rewrite:
    """The first ``limit`` occurrences left out (as many as the third argument for None)."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(2 if limit is not None else 3)
        count = call.arg(2) if limit is None else exp.Literal.number(limit)
        return spark(
            f"filter({{0}}, (__x, __i) -> NOT (__x <=> {{1}} AND {_SEEN} <= {{2}}))",
            call.arg(0),
            call.arg(1),
            count,
        )

    return rewrite


def _remove_all(call: Call) -> exp.Expr:
    call.arity(2)
    return spark("filter({0}, __x -> NOT (__x <=> {1}))", call.arg(0), call.arg(1))


def _replace(limit: int | None, all_of_them: bool = False) -> Rewrite:
    """The first ``limit`` occurrences replaced (as many as the fourth argument for None), or
    all of them."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(4 if limit is None and not all_of_them else 3)
        if all_of_them:
            return spark(
                "transform({0}, __x -> IF(__x <=> {1}, {2}, __x))",
                call.arg(0),
                call.arg(1),
                call.arg(2),
            )
        count = call.arg(3) if limit is None else exp.Literal.number(limit)
        return spark(
            f"transform({{0}}, (__x, __i) -> IF(__x <=> {{1}} AND {_SEEN} <= {{3}}, {{2}}, __x))",
            call.arg(0),
            call.arg(1),
            call.arg(2),
            count,
        )

    return rewrite


def _resize(call: Call) -> exp.Expr:
    call.arity(2, 3)
    fill = call.arg(2) if len(call.args) == 3 else exp.null()
    return spark(
        "IF({1} <= size({0}), slice({0}, 1, greatest({1}, 0)), "
        "concat({0}, array_repeat({2}, {1} - size({0}))))",
        call.arg(0),
        call.arg(1),
        fill,
    )


def _slice(call: Call) -> exp.Expr:
    """1-based, both ends included, negative indexes from the end, optional stride (DuckDB's
    rules, as DataFusion follows them)."""
    call.arity(3, 4)
    stride = call.arg(3) if len(call.args) == 4 else exp.Literal.number(1)
    first = spark(
        "CASE WHEN {1} < 0 THEN IF({1} < -size({0}), 0, {1} + size({0})) "
        "ELSE greatest({1} - 1, 0) END",
        call.arg(0),
        call.arg(1),
    )
    last = spark(
        "CASE WHEN {1} < 0 THEN {1} + size({0}) ELSE least({1} - 1, size({0}) - 1) END",
        call.arg(0),
        call.arg(2),
    )
    return spark(
        "CASE WHEN {0} IS NULL OR {1} IS NULL OR {2} IS NULL OR {3} IS NULL THEN NULL "
        f"WHEN size({{0}}) = 0 OR {{1}} >= size({{0}}) OR {{2}} < 0 "
        "OR ({1} < {2} AND {3} < 0) OR ({1} > {2} AND {3} > 0) "
        f"THEN {_EMPTY} "
        "ELSE transform(sequence({1}, {2}, {3}), __i -> element_at({0}, __i + 1)) END",
        call.arg(0),
        first,
        last,
        stride,
    )


def _sort(call: Call) -> exp.Expr:
    """Ascending unless 'DESC'; NULLs first unless 'NULLS LAST'."""
    call.arity(1, 3)
    descending = len(call.args) > 1 and call.literal(1, "order").strip().upper() == "DESC"
    nulls_first = len(call.args) < 3 or call.literal(2, "nulls order").strip().upper() != (
        "NULLS LAST"
    )
    array = call.arg(0)
    if descending != nulls_first:  # ASC NULLS FIRST or DESC NULLS LAST
        return spark("sort_array({0}, {1})", array, not descending)
    if not descending:
        return spark("array_sort({0})", array)
    return spark(
        "array_sort({0}, (__l, __r) -> CASE WHEN __l IS NULL AND __r IS NULL THEN 0 "
        "WHEN __l IS NULL THEN -1 WHEN __r IS NULL THEN 1 WHEN __l < __r THEN 1 "
        "WHEN __l > __r THEN -1 ELSE 0 END)",
        array,
    )


_empty = template("size({0}) = 0", "boolean", arity=1)


def _series(inclusive: bool) -> Rewrite:
    """``generate_series`` (stop included) and ``range`` (stop left out)."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(1, 3)
        args = [a.copy() for a in call.args]
        if len(args) == 1:
            args.insert(0, exp.Literal.number(0))
        if len(args) == 2:
            args.append(exp.Literal.number(1))
        start, stop, step = args
        series = spark("sequence({0}, {1}, {2})", start, stop, step)
        if not inclusive:
            series = spark("filter({0}, __s -> __s <> {1})", series, stop)
        if isinstance(step, exp.Interval):
            empty = spark("{0} = {1}", start, stop) if not inclusive else None
        else:
            wrong_way = "({2} > 0 AND {0} > {1}) OR ({2} < 0 AND {0} < {1})"
            empty = spark(
                wrong_way if inclusive else wrong_way + " OR {0} = {1}", start, stop, step
            )
        if empty is None:
            return series
        return spark("IF({0}, slice(array({1}), 1, 0), {2})", empty, start, series)

    return rewrite


def _java_literal(text: str) -> str:
    return "".join(c if c.isalnum() else "\\" + c for c in text)


def _string_to_array(call: Call) -> exp.Expr:
    """Split on a literal delimiter (each character when it is NULL, nothing when it is
    empty); pieces equal to ``null_string`` become NULL."""
    call.arity(2, 3)
    text, delimiter = call.arg(0), call.args[1]
    if isinstance(delimiter, exp.Null):
        pieces = spark("split({0}, '')", text)
    elif string_literal(delimiter) == "":
        pieces = spark("array({0})", text)
    elif string_literal(delimiter) is not None:
        pattern = _java_literal(string_literal(delimiter) or "")
        pieces = spark("split({0}, {1}, -1)", text, pattern)
    else:
        pieces = spark("split({0}, concat('\\\\Q', {1}, '\\\\E'), -1)", text, delimiter.copy())
    if len(call.args) == 3:
        pieces = spark("transform({0}, __p -> nullif(__p, {1}))", pieces, call.arg(2))
    return typed(spark("IF({0} = '', slice(array(''), 1, 0), {1})", text, pieces), "array<string>")


def _trim(call: Call) -> exp.Expr:
    call.arity(2)
    return spark("slice({0}, 1, greatest(size({0}) - {1}, 0))", call.arg(0), call.arg(1))


def _make_array(call: Call) -> exp.Expr:
    return exp.Array(expressions=[a.copy() for a in call.args])


def _with_aliases(names: str, rewrite: Rewrite) -> dict[str, Rewrite]:
    return dict.fromkeys(names.split(), rewrite)


REWRITES: dict[str, Rewrite] = {
    **_with_aliases("array_element array_extract list_element list_extract", _array_element),
    **_with_aliases("array_push_back list_append list_push_back", _append),
    **_with_aliases("array_push_front list_prepend list_push_front", _prepend),
    **_with_aliases("array_concat array_cat list_cat list_concat", _concat),
    **_with_aliases("array_has array_contains list_has", _has),
    **_with_aliases("array_has_all list_has_all", _has_all),
    **_with_aliases("array_has_any list_has_any", _has_any),
    **_with_aliases("array_dims list_dims", _dims),
    **_with_aliases("array_ndims list_ndims", _ndims),
    **_with_aliases("array_distinct list_distinct", _distinct),
    "list_intersect": renamed("array_intersect"),
    "list_union": renamed("array_union"),
    "list_except": renamed("array_except"),
    **_with_aliases("array_to_string array_join list_join list_to_string", _to_string),
    **_with_aliases("array_length list_length", _length),
    **_with_aliases("array_pop_front list_pop_front", _pop_front),
    **_with_aliases("array_pop_back list_pop_back", _pop_back),
    **_with_aliases("array_position array_indexof list_position list_indexof", _position),
    **_with_aliases("array_positions list_positions", _positions),
    "list_repeat": renamed("array_repeat"),
    **_with_aliases("array_remove list_remove", _remove_first(1)),
    **_with_aliases("array_remove_n list_remove_n", _remove_first(None)),
    **_with_aliases("array_remove_all list_remove_all", _remove_all),
    **_with_aliases("array_replace list_replace", _replace(1)),
    **_with_aliases("array_replace_n list_replace_n", _replace(None)),
    **_with_aliases("array_replace_all list_replace_all", _replace(None, all_of_them=True)),
    **_with_aliases("array_resize list_resize", _resize),
    **_with_aliases("array_reverse list_reverse", renamed("reverse")),
    **_with_aliases("array_slice list_slice", _slice),
    **_with_aliases("array_sort list_sort", _sort),
    **_with_aliases("empty array_empty list_empty", _empty),
    "array_fill": _fill,
    "flatten": _flatten,
    "cardinality": _cardinality,
    "generate_series": _series(inclusive=True),
    "range": _series(inclusive=False),
    **_with_aliases("make_array make_list", _make_array),
    **_with_aliases("string_to_array string_to_list", _string_to_array),
    "trim_array": _trim,
}
