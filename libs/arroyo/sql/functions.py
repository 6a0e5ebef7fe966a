"""Arroyo's function names (Postgres and DataFusion spellings) mapped onto Spark's.

sqlglot already translates most of them when it writes Spark SQL (``date_trunc``, ``extract``,
``array_agg`` -> ``collect_list``, ``string_agg`` -> ``listagg``, ``approx_distinct``, ``sha256``
-> ``sha2``, ``->``/``->>`` -> ``get_json_object``...). This module rewrites the rest: the JSON
functions and operators, ``regexp_match``, ``var``, ``make_array``, ``digest``, ``to_timestamp``
of a number, and ``row_time()``. JSON values are JSON text in Spark (``STRING``).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

Rewrite = Callable[[exp.Anonymous], exp.Expr]


class FunctionError(ValueError):
    """A function call that cannot be mapped; ``node`` is the call, for the diagnostic's span."""

    def __init__(self, message: str, node: exp.Expr) -> None:
        super().__init__(message)
        self.node = node


def _spark(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _literal_path(node: exp.Anonymous, keys: list[exp.Expr]) -> exp.Expr:
    """``json_get(j, 'a', 0, 'b')`` keys as the JSONPath ``$['a'][0]['b']``."""
    path = "$"
    for key in keys:
        if not isinstance(key, exp.Literal):
            raise FunctionError(
                f"{node.name}() takes literal keys (strings or integers), "
                f"not {key.sql('postgres')}",
                key,
            )
        if key.is_string:
            # Spark's JSONPath has no escapes inside a bracketed key.
            if "'" in key.name:
                raise FunctionError(f"{node.name}(): keys containing ' are not supported", key)
            path += f"['{key.name}']"
        else:
            path += f"[{int(key.name)}]"
    return exp.Literal.string(path)


def _json_args(node: exp.Anonymous, minimum: int = 1) -> tuple[exp.Expr, exp.Expr]:
    args = node.expressions
    if len(args) < minimum:
        raise FunctionError(f"{node.name}() takes a JSON value and keys", node)
    return args[0], _literal_path(node, args[1:])


def _json_get(node: exp.Anonymous) -> exp.Expr:
    value, path = _json_args(node)
    return _call("get_json_object", value, path)


def _json_get_as(spark_type: str) -> Rewrite:
    def rewrite(node: exp.Anonymous) -> exp.Expr:
        return exp.cast(_json_get(node), spark_type)

    return rewrite


def _json_length(node: exp.Anonymous) -> exp.Expr:
    inner = _json_get(node) if len(node.expressions) > 1 else node.expressions[0]
    return exp.Coalesce(
        this=_call("json_array_length", inner.copy()),
        expressions=[_call("size", _call("json_object_keys", inner.copy()))],
    )


def _json_contains(node: exp.Anonymous) -> exp.Expr:
    """True when the path exists (even holding JSON null), as Arroyo's json_contains."""
    value, _path = _json_args(node, minimum=2)
    *parent_keys, last = node.expressions[1:]
    parent = (
        _call("get_json_object", value.copy(), _literal_path(node, parent_keys))
        if parent_keys
        else value.copy()
    )
    if isinstance(last, exp.Literal) and last.is_string:
        keys = _call("json_object_keys", parent)
        return exp.func("coalesce", _call("array_contains", keys, last.copy()), exp.false())
    index = int(last.name)
    longer = exp.GT(this=_call("json_array_length", parent), expression=exp.Literal.number(index))
    return exp.func("coalesce", longer, exp.false())


def _extract_json(node: exp.Anonymous) -> exp.Expr:
    """``extract_json(j, '$.path')``: every match, as an array of JSON texts."""
    if len(node.expressions) != 2:
        raise FunctionError("extract_json() takes a JSON value and a JSONPath", node)
    found = _call("get_json_object", *[a.copy() for a in node.expressions]).sql("spark")
    return _spark(
        f"CASE WHEN {found} IS NULL THEN array() "
        f"WHEN startswith(ltrim({found}), '[') THEN from_json({found}, 'array<string>') "
        f"ELSE array({found}) END"
    )


def _first_json(node: exp.Anonymous) -> exp.Expr:
    if len(node.expressions) != 2:
        raise FunctionError(f"{node.name}() takes a JSON value and a JSONPath", node)
    return _call("get_json_object", *[a.copy() for a in node.expressions])


def _regexp_match(node: exp.Anonymous) -> exp.Expr:
    """The capture groups of the first match (the whole match when there are none), or NULL."""
    if len(node.expressions) != 2 or not isinstance(node.expressions[1], exp.Literal):
        raise FunctionError("regexp_match() takes a string and a literal pattern", node)
    subject, pattern = node.expressions
    text = pattern.name
    groups = sum(
        1
        for i, ch in enumerate(text)
        if ch == "(" and (i == 0 or text[i - 1] != "\\") and text[i + 1 : i + 2] != "?"
    )
    parts = [
        _call("regexp_extract", subject.copy(), pattern.copy(), exp.Literal.number(g))
        for g in (range(1, groups + 1) if groups else [0])
    ]
    return exp.If(
        this=exp.RegexpLike(this=subject.copy(), expression=pattern.copy()),
        true=_call("array", *parts),
        false=exp.null(),
    )


def _digest(node: exp.Anonymous) -> exp.Expr:
    if len(node.expressions) != 2 or not isinstance(node.expressions[1], exp.Literal):
        raise FunctionError("digest() takes a value and a literal algorithm", node)
    value, algorithm = node.expressions
    name = algorithm.name.lower()
    if name == "md5":
        return _call("md5", value.copy())
    bits = {"sha224": 224, "sha256": 256, "sha384": 384, "sha512": 512}.get(name)
    if name == "sha1":
        return _call("sha1", value.copy())
    if bits is None:
        raise FunctionError(f"digest(): unknown algorithm '{algorithm.name}'", algorithm)
    return _call("sha2", value.copy(), exp.Literal.number(bits))


_RENAMES = {"var": "var_samp", "make_array": "array"}

_REWRITES: dict[str, Rewrite] = {
    "json_get": _json_get,
    "json_get_json": _json_get,
    "json_get_str": _json_get,
    "json_as_text": _json_get,
    "json_get_int": _json_get_as("BIGINT"),
    "json_get_float": _json_get_as("DOUBLE"),
    "json_get_bool": _json_get_as("BOOLEAN"),
    "json_length": _json_length,
    "json_contains": _json_contains,
    "extract_json": _extract_json,
    "extract_json_string": _first_json,
    "get_first_json_object": _first_json,
    "regexp_match": _regexp_match,
    "digest": _digest,
}


def _float_literal(node: exp.Literal) -> exp.Expr | None:
    """``0.908`` as Arroyo reads it: a DOUBLE (DataFusion parses a number with a point or an
    exponent as Float64), where Spark would make it a DECIMAL and compute in decimals."""
    if node.is_string or not any(c in node.this for c in ".eE"):
        return None
    context = node.parent
    while isinstance(context, exp.Neg | exp.Paren):
        context = context.parent
    if isinstance(context, exp.Cast | exp.Interval):
        return None  # CAST(1.5 AS DECIMAL(4, 2)) keeps its exact digits; INTERVAL 1.5 SECOND
    return exp.cast(node.copy(), "DOUBLE")


def udf_function_name(name: str) -> str:
    """The name a Python UDF is registered under in Spark."""
    return f"__udf_{name}"


def translate(
    root: exp.Expr,
    event_time: Callable[[], exp.Expr],
    udfs: dict[str, bool] | None = None,
) -> None:
    """Rewrite, in place, every call under ``root`` that Spark spells differently.

    ``event_time`` gives the expression of the row's event time (for ``row_time()``);
    ``udfs`` maps the names of Python UDFs to whether each is an aggregate. A call ``f(x)`` becomes
    the registered ``__udf_f(x)`` (so that no Spark built-in can shadow a UDF), and an aggregate's
    ``f(x, y)`` becomes ``__udf_f(collect_list(struct(x, y)))`` (``collect_list(x)`` for one
    argument)."""
    nodes = root.find_all(
        exp.Anonymous, exp.JSONBContainsTopKey, exp.UnixToTime, exp.Count, exp.Literal
    )
    for node in list(nodes):
        replacement: exp.Expr | None = None
        if isinstance(node, exp.Literal):
            replacement = _float_literal(node)
        elif isinstance(node, exp.Count):
            distinct = node.this
            if isinstance(distinct, exp.Distinct) and node.find_ancestor(exp.Window) is None:
                # Spark runs no DISTINCT aggregate on a stream; a set of the values is one.
                values = distinct.expressions
                value = values[0].copy() if len(values) == 1 else _call("struct", *values)
                # Real sqlglot nodes (not anonymous calls), so it still counts as an aggregate.
                replacement = exp.ArraySize(this=exp.ArrayUniqueAgg(this=value))
        elif isinstance(node, exp.JSONBContainsTopKey):
            keys = _call("json_object_keys", node.this.copy())
            replacement = exp.func(
                "coalesce", _call("array_contains", keys, node.expression.copy()), exp.false()
            )
        elif isinstance(node, exp.UnixToTime):
            # to_timestamp(<seconds>): keep fractions (FROM_UNIXTIME would drop them).
            if node.args.get("scale") is None and node.args.get("format") is None:
                micros = exp.Mul(this=node.this.copy(), expression=exp.Literal.number(1_000_000))
                replacement = _call("timestamp_micros", exp.cast(micros, "BIGINT"))
        elif isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name == "row_time":
                if node.expressions:
                    raise FunctionError("row_time() takes no arguments", node)
                replacement = event_time()
            elif udfs and node.name in udfs:
                args = [a.copy() for a in node.expressions]
                if udfs[node.name]:
                    listed = args[0] if len(args) == 1 else _call("struct", *args)
                    args = [exp.ArrayAgg(this=listed)]
                replacement = _call(udf_function_name(node.name), *args)
            elif name in _REWRITES:
                replacement = _REWRITES[name](node)
            elif name in _RENAMES:
                replacement = _call(_RENAMES[name], *[a.copy() for a in node.expressions])
        if replacement is not None:
            if node is root:
                raise FunctionError("cannot rewrite the root expression in place", node)
            node.replace(replacement)
