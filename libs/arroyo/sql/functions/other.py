"""Arrow's types (``arrow_cast``, ``arrow_typeof``) and Arroyo's own scalars (``row_time``,
``wallclock``, the deprecated ``metadata``)."""

from __future__ import annotations

import re

from sqlglot import exp

from arroyo.sql.functions.core import Call, Rewrite, spark, template, typed

_ARROW_TO_SPARK = {
    "Boolean": "BOOLEAN", "Int8": "TINYINT", "Int16": "SMALLINT", "Int32": "INT",
    "Int64": "BIGINT", "UInt8": "SMALLINT", "UInt16": "INT", "UInt32": "BIGINT",
    "UInt64": "DECIMAL(20,0)", "Float16": "FLOAT", "Float32": "FLOAT", "Float64": "DOUBLE",
    "Utf8": "STRING", "LargeUtf8": "STRING", "Utf8View": "STRING", "Binary": "BINARY",
    "LargeBinary": "BINARY", "BinaryView": "BINARY", "Date32": "DATE", "Date64": "DATE",
}  # fmt: skip
# Timestamps are microseconds in Spark: a coarser unit truncates.
_TIMESTAMP_TRUNCATION = {"Second": "SECOND", "Millisecond": "MILLISECOND"}


def _spark_type(call: Call, arrow: str) -> tuple[str, str | None]:
    """Spark's type for an Arrow type name, and the unit a timestamp is truncated to."""
    text = arrow.strip()
    dictionary = re.fullmatch(r"Dictionary\(\s*\w+\s*,\s*(.+)\)", text)
    if dictionary:
        return _spark_type(call, dictionary.group(1))
    if text in _ARROW_TO_SPARK:
        return _ARROW_TO_SPARK[text], None
    decimal = re.fullmatch(r"Decimal(?:128|256)\(\s*(\d+)\s*,\s*(-?\d+)\s*\)", text)
    if decimal:
        return f"DECIMAL({decimal.group(1)},{decimal.group(2)})", None
    timestamp = re.fullmatch(r"Timestamp\(\s*(\w+)\s*,\s*(.+)\)", text)
    if timestamp:
        return "TIMESTAMP", _TIMESTAMP_TRUNCATION.get(timestamp.group(1))
    raise call.fail(
        f"the Arrow type '{arrow}' has no Spark equivalent here; cast to a SQL type instead "
        "(CAST(x AS BIGINT), CAST(x AS TEXT)...)",
        call.args[1],
    )


def _arrow_cast(call: Call) -> exp.Expr:
    call.arity(2)
    spark_type, truncation = _spark_type(call, call.literal(1, "type"))
    cast = exp.cast(call.arg(0), exp.DataType.build(spark_type, dialect="spark"))
    if truncation:
        return typed(spark("date_trunc({0}, {1})", truncation, cast), "timestamp")
    return typed(cast, spark_type)


def arrow_name(data_type: exp.DataType) -> str:
    """The name Arrow (and ``arrow_typeof``) gives the type Arroyo holds for ``data_type``."""
    t = exp.DataType.Type
    kind = data_type.this
    if kind == t.ARRAY:
        inner = data_type.expressions[0]
        return f"List({arrow_name(inner) if isinstance(inner, exp.DataType) else '?'})"
    if kind == t.STRUCT:
        fields = []
        for field in data_type.expressions:
            inner = field.args.get("kind")
            name = arrow_name(inner) if isinstance(inner, exp.DataType) else "?"
            fields.append(f"{field.name}: {name}")
        return f"Struct({', '.join(fields)})"
    if kind == t.DECIMAL:
        params = [p.name for p in data_type.expressions] or ["38", "10"]
        if params == ["20", "0"]:
            return "UInt64"
        return f"Decimal128({', '.join(params)})"
    names = {
        t.BOOLEAN: "Boolean", t.TINYINT: "Int8", t.SMALLINT: "Int16", t.INT: "Int32",
        t.BIGINT: "Int64", t.FLOAT: "Float32", t.DOUBLE: "Float64", t.TEXT: "Utf8",
        t.VARCHAR: "Utf8", t.CHAR: "Utf8", t.BINARY: "Binary", t.VARBINARY: "Binary",
        t.DATE: "Date32", t.TIMESTAMP: "Timestamp(Nanosecond, None)",
        t.TIMESTAMPTZ: "Timestamp(Nanosecond, None)",
        t.TIMESTAMPNTZ: "Timestamp(Nanosecond, None)", t.NULL: "Null",
    }  # fmt: skip
    return names.get(kind, data_type.sql(dialect="spark"))


_RUNTIME_NAMES = (
    "CASE typeof({0}) WHEN 'boolean' THEN 'Boolean' WHEN 'tinyint' THEN 'Int8' "
    "WHEN 'smallint' THEN 'Int16' WHEN 'int' THEN 'Int32' WHEN 'bigint' THEN 'Int64' "
    "WHEN 'float' THEN 'Float32' WHEN 'double' THEN 'Float64' WHEN 'string' THEN 'Utf8' "
    "WHEN 'binary' THEN 'Binary' WHEN 'date' THEN 'Date32' "
    "WHEN 'timestamp' THEN 'Timestamp(Nanosecond, None)' WHEN 'void' THEN 'Null' "
    "WHEN 'decimal(20,0)' THEN 'UInt64' ELSE typeof({0}) END"
)


def _arrow_typeof(call: Call) -> exp.Expr:
    """The Arrow type's name, from the type Arroyo gives the expression where it is known
    (an integer literal is an Int64), else from Spark's type of it."""
    call.arity(1)
    kind = call.type_of(0)
    if kind is not None:
        return typed(exp.Literal.string(arrow_name(kind)), "string")
    return typed(spark(_RUNTIME_NAMES, call.arg(0)), "string")


def _row_time(call: Call) -> exp.Expr:
    call.arity(0)
    return typed(call.context.event_time(), "timestamp")


# The time each row is processed (Spark's ``current_timestamp()`` is one per batch).
_wallclock = template(
    "CAST(reflect('java.time.Instant', 'now') AS TIMESTAMP)", "timestamp", arity=0
)


def _metadata(call: Call) -> exp.Expr:
    raise call.fail(
        "the metadata() column form is deprecated and not supported; declare the column "
        "with METADATA FROM, e.g. `offset BIGINT METADATA FROM 'offset_id'`"
    )


REWRITES: dict[str, Rewrite] = {
    "arrow_cast": _arrow_cast,
    "arrow_typeof": _arrow_typeof,
    "row_time": _row_time,
    "wallclock": _wallclock,
    "metadata": _metadata,
}
