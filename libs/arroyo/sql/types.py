"""Arroyo column types and their Spark counterparts."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError

T = exp.DataType.Type  # an enum, used as values only

# Unsigned integers widen to the next signed type Spark has; u64 needs DECIMAL(20, 0).
_SCALARS: dict[object, str] = {
    T.BOOLEAN: "BOOLEAN",
    T.TINYINT: "TINYINT",
    T.SMALLINT: "SMALLINT",
    T.INT: "INT",
    T.BIGINT: "BIGINT",
    T.UTINYINT: "SMALLINT",
    T.USMALLINT: "INT",
    T.UINT: "BIGINT",
    T.UBIGINT: "DECIMAL(20,0)",
    T.FLOAT: "FLOAT",
    T.DOUBLE: "DOUBLE",
    T.TEXT: "STRING",
    T.VARCHAR: "STRING",
    T.CHAR: "STRING",
    T.NVARCHAR: "STRING",
    T.NCHAR: "STRING",
    T.TIMESTAMP: "TIMESTAMP",
    T.TIMESTAMPTZ: "TIMESTAMP",
    T.TIMESTAMPNTZ: "TIMESTAMP",
    T.DATETIME: "TIMESTAMP",
    T.DATE: "DATE",
    # Spark has a TIME type only behind a flag; Arroyo's TIME travels as its text form.
    T.TIME: "STRING",
    T.VARBINARY: "BINARY",
    T.BINARY: "BINARY",
    T.BLOB: "BINARY",
    # JSON values are kept as their text, as Arroyo's JSON type is.
    T.JSON: "STRING",
    T.JSONB: "STRING",
}


class UnsupportedTypeError(ValueError):
    pass


def parse_type(text: str) -> exp.DataType:
    """Parse an Arroyo type, spelt as in Postgres (``TEXT[]``, ``BIGINT UNSIGNED``)."""
    cleaned = " ".join(text.split())
    if cleaned.upper() == "STRING":
        cleaned = "TEXT"
    try:
        return exp.DataType.build(cleaned, dialect="postgres")
    except (ParseError, ValueError) as err:
        raise UnsupportedTypeError(f"unknown type '{text.strip()}'") from err


def spark_type(data_type: exp.DataType) -> str:
    """The Spark DDL spelling of an Arroyo type."""
    kind = data_type.this
    if kind == T.ARRAY:
        return f"ARRAY<{spark_type(data_type.expressions[0])}>"
    if kind == T.STRUCT:
        fields = []
        for field in data_type.expressions:
            name = field.name
            inner = field.args.get("kind") if isinstance(field, exp.ColumnDef) else field
            if not isinstance(inner, exp.DataType):
                raise UnsupportedTypeError(f"struct field '{name}' has no type")
            fields.append(f"`{name}`: {spark_type(inner)}")
        return f"STRUCT<{', '.join(fields)}>"
    if kind == T.DECIMAL:
        params = [p.name for p in data_type.expressions]
        if not params:
            return "DECIMAL(38,10)"
        return f"DECIMAL({','.join(params)})"
    if kind in _SCALARS:
        return _SCALARS[kind]
    raise UnsupportedTypeError(f"unsupported type '{data_type.sql('postgres')}'")
