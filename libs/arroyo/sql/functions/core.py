"""What every family of functions shares: the error, a call as the rewrites see it, and the
building of Spark expressions from templates."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from arroyo.sql.functions.inference import Types

# Set on the root of every rewritten expression: a second translation leaves it alone.
TRANSLATED = "arroyo_translated"


class FunctionError(ValueError):
    """A function call that cannot be mapped; ``node`` is the call, for the diagnostic's span."""

    def __init__(self, message: str, node: exp.Expr) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True, slots=True)
class Context:
    """What a rewrite may ask of the query around the call."""

    event_time: Callable[[], exp.Expr]
    types: Types


@dataclass(frozen=True, slots=True)
class Call:
    """A function call in Arroyo's terms: its name (lower case, as Arroyo spells it), its
    arguments (already translated) and the node it was read from (for diagnostics)."""

    name: str
    args: list[exp.Expr]
    node: exp.Expr
    context: Context

    def fail(self, message: str, node: exp.Expr | None = None) -> FunctionError:
        return FunctionError(f"{self.name}(): {message}", node or self.node)

    def arity(self, low: int, high: int | None = None) -> None:
        """Refuse a call with fewer than ``low`` or more than ``high`` arguments."""
        high = low if high is None else high
        if not low <= len(self.args) <= high:
            wanted = str(low) if low == high else f"{low} to {high}"
            raise self.fail(f"takes {wanted} arguments, not {len(self.args)}")

    def arg(self, index: int) -> exp.Expr:
        return self.args[index].copy()

    def literal(self, index: int, what: str) -> str:
        """The text of a literal string (or number) argument; refused when not a literal."""
        node = self.args[index]
        text = literal_text(node)
        if text is None:
            raise self.fail(f"the {what} must be a literal, not {node.sql('postgres')}", node)
        return text

    def integer(self, index: int, what: str) -> int:
        text = self.literal(index, what)
        if not re.fullmatch(r"-?\d+", text):
            raise self.fail(f"the {what} must be an integer, not {text}", self.args[index])
        return int(text)

    def type_of(self, index: int) -> exp.DataType | None:
        return self.context.types.of(self.args[index])


Rewrite = Callable[[Call], exp.Expr]


def integer_literal(node: exp.Expr) -> int | None:
    """The value of an integer literal (or its negation), else None."""
    if isinstance(node, exp.Neg):
        inner = integer_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Paren):
        return integer_literal(node.this)
    if isinstance(node, exp.Literal) and not node.is_string and re.fullmatch(r"\d+", node.this):
        return int(node.this)
    return None


def literal_text(node: exp.Expr) -> str | None:
    """The text of a literal, looking through parentheses, a minus sign and the cast to DOUBLE
    that a decimal literal gets (``maths.float_literal``)."""
    while isinstance(node, exp.Paren | exp.Cast):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = literal_text(node.this)
        return None if inner is None else f"-{inner}"
    return str(node.this) if isinstance(node, exp.Literal) else None


def string_literal(node: exp.Expr) -> str | None:
    return str(node.this) if isinstance(node, exp.Literal) and node.is_string else None


def spark(template: str, *args: exp.Expr | str | int | float) -> exp.Expr:
    """A Spark expression from ``template``, its ``{0}``, ``{1}``... replaced by the arguments:
    expressions as they are (not re-read, so that sqlglot cannot respell them), Python strings
    as string literals, numbers as numbers."""
    rendered: list[str] = []
    nodes: dict[str, exp.Expr] = {}
    for i, value in enumerate(args):
        if isinstance(value, exp.Expr):
            name = f"__arroyo_arg{i}"
            nodes[name] = value
            rendered.append(name)
        else:
            rendered.append(_render(value))
    tree = sqlglot.parse_one(template.format(*rendered), read="spark")
    for column in list(tree.find_all(exp.Column)):
        node = nodes.get(column.name) if not column.table else None
        if node is None:
            continue
        replacement = node.copy()
        if not isinstance(replacement, _ATOMIC):
            replacement = exp.Paren(this=replacement)
        if column is tree:
            return replacement
        column.replace(replacement)
    return tree


# Expressions that need no parentheses wherever a template puts them.
_ATOMIC = (exp.Column, exp.Literal, exp.Func, exp.Paren, exp.Bracket, exp.Null, exp.Boolean)


def _render(value: str | int | float) -> str:
    if isinstance(value, str):
        return exp.Literal.string(value).sql(dialect="spark")
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def func(name: str, *args: exp.Expr) -> exp.Expr:
    """A call of a Spark function by name."""
    return exp.Anonymous(this=name, expressions=list(args))


def typed(node: exp.Expr, arroyo_type: str) -> exp.Expr:
    """Note the type Arroyo gives ``node`` (for rewrites of the calls around it)."""
    node.meta[Types.META] = exp.DataType.build(arroyo_type, dialect="spark")
    return node


def renamed(spark_name: str) -> Rewrite:
    """The same function under Spark's name."""

    def rewrite(call: Call) -> exp.Expr:
        return func(spark_name, *[a.copy() for a in call.args])

    return rewrite


def template(sql: str, arroyo_type: str, *, arity: int) -> Rewrite:
    """A call of exactly ``arity`` arguments as the Spark expression ``sql`` (see ``spark``:
    ``{0}``... are the arguments), of Arroyo's type ``arroyo_type``."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(arity)
        return typed(spark(sql, *[call.arg(i) for i in range(arity)]), arroyo_type)

    return rewrite


def as_node(node_type: type[exp.Func], *keys: str) -> Rewrite:
    """The same function as a sqlglot node (so that an aggregate stays an aggregate for the
    planner), its arguments in ``keys`` order."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(1, len(keys))
        return node_type(**{k: a.copy() for k, a in zip(keys, call.args, strict=False)})

    return rewrite


def merge(*tables: Mapping[str, Rewrite]) -> dict[str, Rewrite]:
    merged: dict[str, Rewrite] = {}
    for table in tables:
        overlap = merged.keys() & table.keys()
        if overlap:
            raise ValueError(f"functions defined twice: {sorted(overlap)}")
        merged.update(table)
    return merged
