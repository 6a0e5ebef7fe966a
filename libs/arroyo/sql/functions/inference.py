"""The types Arroyo (DataFusion) gives expressions, as far as the functions need them.

Some of Arroyo's functions answer in the type of their argument (``median`` of a BIGINT is a
BIGINT, ``7 / 2`` is 3), where Spark's answer is always a DOUBLE; some depend on an array's
depth (``array_ndims``, ``flatten``). The planner hands over the columns of the query's
relations; literals, casts, arithmetic and the calls rewritten here (which note their type) do
the rest. Where a type cannot be known, ``of`` answers None and the rewrite keeps Spark's
behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import ParseError

T = exp.DataType.Type

INTEGERS = frozenset({T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.UTINYINT, T.USMALLINT, T.UINT})
FLOATS = frozenset({T.FLOAT, T.DOUBLE})
STRINGS = frozenset({T.TEXT, T.VARCHAR, T.CHAR, T.NVARCHAR, T.NCHAR})


def is_integer(data_type: exp.DataType | None) -> bool:
    """BIGINT and narrower integers, and Arroyo's ``BIGINT UNSIGNED`` (Spark's DECIMAL(20,0))."""
    if data_type is None:
        return False
    if data_type.this == T.DECIMAL:
        params = [p.name for p in data_type.expressions]
        return len(params) == 2 and params[1] == "0"
    return data_type.this in INTEGERS


def is_float(data_type: exp.DataType | None) -> bool:
    return data_type is not None and data_type.this in FLOATS


def array_depth(data_type: exp.DataType | None) -> int | None:
    """How many arrays are nested in ``data_type`` (0 for a scalar), None when unknown."""
    if data_type is None:
        return None
    depth = 0
    while data_type.this == T.ARRAY:
        depth += 1
        data_type = data_type.expressions[0]
    return depth


def element_type(data_type: exp.DataType | None) -> exp.DataType | None:
    if data_type is None or data_type.this != T.ARRAY:
        return None
    inner = data_type.expressions[0]
    return inner if isinstance(inner, exp.DataType) else None


def parse_spark_type(text: str) -> exp.DataType | None:
    try:
        return exp.DataType.build(text, dialect="spark")
    except (ParseError, ValueError):
        return None


def _build(kind: str) -> exp.DataType:
    return exp.DataType.build(kind, dialect="spark")


class Types:
    """Types of expressions under one SELECT: ``columns`` maps each relation's alias to its
    columns and their Spark types."""

    META = "arroyo_type"

    def __init__(self, columns: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._by_relation: dict[str, dict[str, str]] = {}
        self._unqualified: dict[str, str | None] = {}
        for alias, fields in (columns or {}).items():
            lowered = {name.lower(): kind for name, kind in fields.items()}
            self._by_relation[alias.lower()] = lowered
            for name, kind in lowered.items():
                # A name in two relations is ambiguous unqualified.
                self._unqualified[name] = None if name in self._unqualified else kind

    def of(self, node: exp.Expr) -> exp.DataType | None:
        noted = node.meta.get(self.META) if node.meta else None
        if isinstance(noted, exp.DataType):
            return noted
        if isinstance(node, exp.Paren | exp.Neg | exp.Alias):
            return self.of(node.this)
        if isinstance(node, exp.Cast):  # TryCast too
            to = node.args.get("to")
            return to if isinstance(to, exp.DataType) else None
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _build("string")
            text = str(node.this)
            return _build("double" if any(c in text for c in ".eE") else "bigint")
        if isinstance(node, exp.Boolean):
            return _build("boolean")
        if isinstance(node, exp.Column):
            return self._column(node)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.Div):
            left, right = self.of(node.this), self.of(node.expression)
            if is_integer(left) and is_integer(right):
                return _build("bigint")
            if is_float(left) or is_float(right):
                return _build("double")
            return None
        if isinstance(node, exp.IntDiv | exp.Count | exp.ArraySize):
            return _build("bigint")
        if isinstance(node, exp.Sum):
            return _build("bigint") if is_integer(self.of(node.this)) else None
        if isinstance(node, exp.Min | exp.Max | exp.Coalesce):
            return self.of(node.this)
        if isinstance(node, exp.Array):
            items = node.expressions
            inner = self.of(items[0]) if items else None
            return exp.DataType(this=T.ARRAY, expressions=[inner], nested=True) if inner else None
        if isinstance(node, exp.Avg | exp.Stddev | exp.Variance | exp.VariancePop):
            return _build("double")
        return None

    def _column(self, column: exp.Column) -> exp.DataType | None:
        name = column.name.lower()
        table = column.table.lower()
        if table:
            relation = self._by_relation.get(table)
            kind = relation.get(name) if relation else None
        else:
            kind = self._unqualified.get(name)
        return parse_spark_type(kind) if kind else None
