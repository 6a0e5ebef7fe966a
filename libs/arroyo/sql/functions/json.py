"""JSON: datafusion-functions-json (``json_get*``, ``->``, ``->>``, ``?``) and Arroyo's JSONPath
functions (``extract_json``, ``extract_json_string``, ``get_first_json_object``).

JSON values are JSON text (STRING) in Spark, as in Arroyo. Each call parses its text into a
VARIANT (``try_parse_json``: invalid JSON gives NULL, as in Arroyo) and reads the path's value
and its JSON type there, so that a typed getter answers NULL for a value of another type rather
than failing a cast (Spark runs with ANSI casts).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from arroyo.sql.functions.core import (
    Call,
    Context,
    FunctionError,
    Rewrite,
    func,
    literal_text,
    spark,
    typed,
)

_INTEGER = re.compile(r"-?\d+")


def _key_path(call: Call, keys: list[exp.Expr]) -> str:
    """The VARIANT path of datafusion-functions-json's keys: strings are object keys, integers
    array indexes (from 0)."""
    path = "$"
    for key in keys:
        if isinstance(key, exp.Literal) and key.is_string:
            name = str(key.this)
            if "'" not in name:
                path += f"['{name}']"
            elif '"' not in name:
                path += f'["{name}"]'
            else:
                raise call.fail("a key holding both ' and \" is not supported", key)
        elif _INTEGER.fullmatch(literal_text(key) or ""):
            index = int(literal_text(key) or "")
            if index < 0:
                return ""  # no element: datafusion-functions-json finds nothing either
            path += f"[{index}]"
        else:
            raise call.fail(
                f"takes literal keys (strings or integers), not {key.sql('postgres')}", key
            )
    return path


def _value(call: Call) -> exp.Expr:
    """The VARIANT at the call's path (NULL when the text is not JSON or the path is missing;
    a VARIANT null where the value is JSON null)."""
    if not call.args:
        raise call.fail("takes a JSON value and keys")
    parsed = func("try_parse_json", call.arg(0))
    path = _key_path(call, call.args[1:])
    if path == "$":
        return parsed
    if not path:
        return spark("CAST(NULL AS VARIANT)")
    return func("variant_get", parsed, exp.Literal.string(path))


def _text(call: Call) -> exp.Expr:
    """The value's JSON text: an object or array as written (compact, keys in their order),
    a string with its quotes; NULL when missing."""
    value = _value(call)
    path = _key_path(call, call.args[1:]) or "$"
    return spark(
        "CASE WHEN startswith(schema_of_variant({0}), 'OBJECT') "
        "OR startswith(schema_of_variant({0}), 'ARRAY') THEN get_json_object({1}, {2}) "
        "ELSE to_json({0}) END",
        value,
        call.arg(0),
        path,
    )


def _json_get(call: Call) -> exp.Expr:
    """The value as JSON text, as Arroyo writes a ``json_get`` union to a sink: strings keep
    their quotes, and a missing value is the text ``null`` (not SQL NULL)."""
    return typed(spark("coalesce({0}, 'null')", _text(call)), "string")


def _json_get_json(call: Call) -> exp.Expr:
    return typed(_text(call), "string")


def _json_as_text(call: Call) -> exp.Expr:
    """Strings unquoted, other values as JSON text, JSON null and missing values NULL."""
    return typed(
        spark(
            "CASE schema_of_variant({0}) WHEN 'STRING' THEN variant_get({0}, '$', 'string') "
            "WHEN 'VOID' THEN NULL ELSE {1} END",
            _value(call),
            _text(call),
        ),
        "string",
    )


def _getter(condition: str, spark_type: str) -> Rewrite:
    def rewrite(call: Call) -> exp.Expr:
        value = _value(call)
        kind = func("schema_of_variant", value.copy())
        return typed(
            spark(
                f"CASE WHEN {condition} THEN variant_get({{1}}, '$', '{spark_type}') END",
                kind,
                value,
            ),
            spark_type,
        )

    return rewrite


def _json_length(call: Call) -> exp.Expr:
    """Elements of an array or keys of an object; NULL for any other value."""
    return typed(
        spark(
            "CASE WHEN startswith(schema_of_variant({0}), 'ARRAY') "
            "THEN array_size(variant_get({0}, '$', 'array<variant>')) "
            "WHEN startswith(schema_of_variant({0}), 'OBJECT') "
            "THEN size(variant_get({0}, '$', 'map<string, variant>')) END",
            _value(call),
        ),
        "bigint",
    )


def _json_contains(call: Call) -> exp.Expr:
    """Whether the path exists, even holding JSON null; false for NULL or invalid JSON."""
    call.arity(1, 1 + len(call.args))
    return typed(spark("{0} IS NOT NULL", _value(call)), "boolean")


def _json_object_keys(call: Call) -> exp.Expr:
    """An object's keys in the order of its text; NULL for any other value."""
    value = _value(call)
    path = _key_path(call, call.args[1:])
    text = (
        call.arg(0)
        if path == "$"
        else func("get_json_object", call.arg(0), exp.Literal.string(path))
    )
    return typed(
        spark(
            "CASE WHEN startswith(schema_of_variant({0}), 'OBJECT') THEN json_object_keys({1}) END",
            value,
            text,
        ),
        "array<string>",
    )


# -- Arroyo's JSONPath functions ------------------------------------------------------------

_SEGMENT = re.compile(
    r"""\.(?P<name>[A-Za-z_][\w$-]*)"""  # .name
    r"""|\.\*|\[\*\]"""  # .* [*]
    r"""|\[\s*(?P<index>-?\d+)\s*\]"""  # [0] [-1]
    r"""|\[\s*'(?P<single>(?:[^'\\]|\\.)*)'\s*\]"""  # ['key']
    r"""|\[\s*"(?P<double>(?:[^"\\]|\\.)*)"\s*\]"""  # ["key"]
)


def _segments(call: Call) -> list[str | int | None]:
    """The JSONPath of a call as keys (str), indexes (int) and wildcards (None); paths with
    recursive descent, filters, slices or unions are refused."""
    path = call.literal(1, "JSONPath").strip()
    if not path.startswith("$"):
        raise call.fail(f"invalid JSONPath '{path}': it must start with $", call.args[1])
    segments: list[str | int | None] = []
    pos = 1
    while pos < len(path):
        if path.startswith("..", pos) or path.startswith("[?", pos) or ":" in path[pos:]:
            raise call.fail(
                f"the JSONPath '{path}' uses recursive descent, a filter or a slice, which Spark "
                "cannot evaluate here; use keys, indexes and [*] (e.g. '$.a[*].b'), or json_get",
                call.args[1],
            )
        match = _SEGMENT.match(path, pos)
        if match is None:
            raise call.fail(f"invalid JSONPath '{path}' at '{path[pos:]}'", call.args[1])
        if match.group("name") is not None:
            segments.append(match.group("name"))
        elif match.group("index") is not None:
            segments.append(int(match.group("index")))
        elif match.group("single") is not None:
            segments.append(re.sub(r"\\(.)", r"\1", match.group("single")))
        elif match.group("double") is not None:
            segments.append(re.sub(r"\\(.)", r"\1", match.group("double")))
        else:
            segments.append(None)
        pos = match.end()
    return segments


def _step(items: exp.Expr, segment: str | int | None) -> exp.Expr:
    """The matches one segment further, from an array of VARIANT matches."""
    if segment is None:
        return spark(
            "flatten(transform({0}, __v -> coalesce("
            "try_variant_get(__v, '$', 'array<variant>'), "
            "map_values(try_variant_get(__v, '$', 'map<string, variant>')), array())))",
            items,
        )
    if isinstance(segment, int) and segment < 0:
        picked = spark("try_element_at(try_variant_get(__v, '$', 'array<variant>'), {0})", segment)
    else:
        if isinstance(segment, int):
            path = f"$[{segment}]"
        elif '"' not in segment:
            path = f'$["{segment}"]'
        else:
            path = f"$['{segment}']"
        picked = spark("variant_get(__v, {0})", path)
    return spark("filter(transform({0}, __v -> {1}), __v -> __v IS NOT NULL)", items, picked)


def _matches(call: Call) -> exp.Expr:
    """Every match of the call's JSONPath, as an array of VARIANTs (NULL for invalid JSON)."""
    call.arity(2)
    items = spark("array(try_parse_json({0}))", call.arg(0))
    for segment in _segments(call):
        items = _step(items, segment)
    return spark("IF(try_parse_json({0}) IS NULL, NULL, {1})", call.arg(0), items)


def _extract_json(call: Call) -> exp.Expr:
    """Every match, each as JSON text (strings keep their quotes); NULL for invalid JSON."""
    return typed(spark("transform({0}, __v -> to_json(__v))", _matches(call)), "array<string>")


def _extract_json_string(call: Call) -> exp.Expr:
    """The first match when it is a string, unquoted; else NULL."""
    first = spark("try_element_at({0}, 1)", _matches(call))
    return typed(
        spark(
            "CASE WHEN schema_of_variant({0}) = 'STRING' THEN variant_get({0}, '$', 'string') END",
            first,
        ),
        "string",
    )


def _get_first_json_object(call: Call) -> exp.Expr:
    """The first match as JSON text; NULL when nothing matches."""
    return typed(spark("to_json(try_element_at({0}, 1))", _matches(call)), "string")


REWRITES: dict[str, Rewrite] = {
    "json_get": _json_get,
    "json_get_json": _json_get_json,
    "json_as_text": _json_as_text,
    "json_get_str": _getter("{0} = 'STRING'", "string"),
    "json_get_int": _getter("{0} = 'BIGINT'", "bigint"),
    "json_get_float": _getter(
        "({0} IN ('BIGINT', 'DOUBLE') OR startswith({0}, 'DECIMAL'))", "double"
    ),
    "json_get_bool": _getter("{0} = 'BOOLEAN'", "boolean"),
    "json_length": _json_length,
    "json_len": _json_length,
    "json_contains": _json_contains,
    "json_object_keys": _json_object_keys,
    "extract_json": _extract_json,
    "extract_json_string": _extract_json_string,
    "get_first_json_object": _get_first_json_object,
}


# -- the operators ---------------------------------------------------------------------------


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """``j -> 'a'`` (and ``->>``, ``?``) as the arguments of the function it stands for."""
    path = node.expression
    if not isinstance(path, exp.JSONPath):
        return [node.this, path]
    keys: list[exp.Expr] = []
    for part in path.expressions:
        if isinstance(part, exp.JSONPathRoot):
            continue
        if isinstance(part, exp.JSONPathKey):
            keys.append(exp.Literal.string(str(part.this)))
        elif isinstance(part, exp.JSONPathSubscript):
            keys.append(exp.Literal.number(int(part.this)))
        else:
            raise FunctionError(f"unsupported JSON path in {node.sql('postgres')}", node)
    return [node.this, *keys]


def _operator(name: str) -> Callable[[exp.Expr, Context], exp.Expr]:
    def rewrite(node: exp.Expr, context: Context) -> exp.Expr:
        return REWRITES[name](Call(name, _operands(node), node, context))

    return rewrite


arrow = _operator("json_get")
long_arrow = _operator("json_as_text")
question = _operator("json_contains")

_CAST_GETTERS = {
    exp.DataType.Type.BOOLEAN: "json_get_bool",
    exp.DataType.Type.DOUBLE: "json_get_float",
    exp.DataType.Type.FLOAT: "json_get_float",
    exp.DataType.Type.DECIMAL: "json_get_float",
    exp.DataType.Type.BIGINT: "json_get_int",
    exp.DataType.Type.INT: "json_get_int",
    exp.DataType.Type.TEXT: "json_get_str",
    exp.DataType.Type.VARCHAR: "json_get_str",
}


def cast_getters(root: exp.Expr) -> None:
    """``json_get(j, 'k')::INT`` (and ``(j -> 'k')::INT``) is ``json_get_int(j, 'k')``, as
    datafusion-functions-json rewrites it: a typed read, not a cast of JSON text."""
    for cast in list(root.find_all(exp.Cast)):
        if type(cast) is not exp.Cast:
            continue
        inner = cast.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        getter = _CAST_GETTERS.get(cast.to.this)
        if getter is None:
            continue
        if isinstance(inner, exp.JSONExtract):
            args = _operands(inner)
        elif isinstance(inner, exp.Anonymous) and inner.name.lower() == "json_get":
            args = list(inner.expressions)
        else:
            continue
        replacement = exp.Anonymous(this=getter, expressions=[a.copy() for a in args])
        if cast is root:
            continue
        cast.replace(replacement)
