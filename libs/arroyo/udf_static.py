"""Reading a UDF file's functions and types without running it.

The api, the compiler and the controller never execute a user's UDF code: the compiler reads the
file's syntax tree, and the code runs only where Spark calls it, in Spark's Python workers (see
``arroyo.udfs``). What the tree gives:

- the top-level ``def`` and ``async def`` decorated with ``arroyo_udf``'s ``udf`` or ``udaf``,
  however imported (``from arroyo_udf import udf as u``, ``import arroyo_udf``), and the
  decorator's ``concurrency`` and ``timeout``, which must be literal numbers;
- each argument's and the result's type, from annotations written with the names the file
  imports (``int``, ``str | None``, ``Optional[str]``, ``list[float]``, ``datetime``,
  ``dt.datetime``, and the same inside quotes).

What it cannot give, and where it shows instead: an error raised while the file's module runs
(an import of a missing package, a NameError), a function decorated by a name bound at run time,
and an annotation through an alias (``Num = int``). The first fails the job at its first batch,
naming the UDF and the error; the other two are diagnostics here, asking for the plain form.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

BUILTINS = {"int", "float", "str", "bool", "bytes", "list", "None"}
_SCALARS = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "STRING",
    "bool": "BOOLEAN",
    "bytes": "BINARY",
    "datetime.datetime": "TIMESTAMP",
}
_OPTIONAL = {"typing.Optional"}
_UNION = {"typing.Union"}
_LIST = {"list", "typing.List"}
_DECORATORS = {"arroyo_udf.udf": "udf", "arroyo_udf.udaf": "udaf"}


class UdfTypeError(ValueError):
    pass


@dataclass(frozen=True)
class UdfType:
    spark: str
    nullable: bool


@dataclass(frozen=True)
class FoundUdf:
    """A decorated function as the file writes it."""

    name: str
    kind: str  # udf | async | udaf
    args: list[UdfType]
    returns: UdfType
    concurrency: int
    timeout: float
    line: int  # its first decorator's


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


def read(text: str, where: str) -> tuple[list[FoundUdf], list[Problem]]:
    """The UDFs of one module's text, and the problems of those that are not well formed.
    Raises ``SyntaxError`` when the text is not Python."""
    tree = ast.parse(text, where)
    names = _imports(tree)
    found: dict[str, FoundUdf] = {}
    problems: list[Problem] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            kind = _decorator_kind(decorator, names)
            if kind is None:
                continue
            line = min(d.lineno for d in node.decorator_list)
            try:
                found[node.name] = _udf(node, decorator, kind, names, line)
            except UdfTypeError as err:
                problems.append(Problem(line, f"UDF '{node.name}': {err}"))
            break
    if not found and not problems and tree.body:
        # Code, but no UDF: a file of helpers alone has no use, and a typo in a decorator's
        # name would otherwise pass unseen.
        problems.append(
            Problem(
                tree.body[0].lineno,
                "defines no UDF: decorate a function with @udf or @udaf "
                "(from arroyo_udf import udf, udaf)",
            )
        )
    return list(found.values()), problems


def _imports(tree: ast.Module) -> dict[str, str]:
    """Each name the module's top level binds by import, to what it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _qualified(node: ast.expr, names: dict[str, str]) -> str | None:
    """``a.b.c`` as the name it stands for, through the module's imports."""
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        return node.id if node.id in BUILTINS else None
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, names)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _decorator_kind(node: ast.expr, names: dict[str, str]) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    return _DECORATORS.get(_qualified(target, names) or "")


def _udf(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    decorator: ast.expr,
    kind: str,
    names: dict[str, str],
    line: int,
) -> FoundUdf:
    options = {"concurrency": 16.0, "timeout": 30.0}
    if isinstance(decorator, ast.Call):
        if decorator.args:
            raise UdfTypeError("the decorator takes keyword arguments only")
        for keyword in decorator.keywords:
            if keyword.arg not in options:
                raise UdfTypeError(f"unknown decorator argument '{keyword.arg}'")
            value = keyword.value
            if not isinstance(value, ast.Constant) or not isinstance(value.value, int | float):
                raise UdfTypeError(f"'{keyword.arg}' must be a literal number")
            options[keyword.arg] = float(value.value)
    spec = node.args
    if spec.vararg or spec.kwarg or spec.kwonlyargs:
        raise UdfTypeError("only plain positional arguments")
    args: list[UdfType] = []
    for arg in [*spec.posonlyargs, *spec.args]:
        if arg.annotation is None:
            raise UdfTypeError(f"argument '{arg.arg}' has no type annotation")
        args.append(annotation_type(arg.annotation, names))
    if node.returns is None:
        raise UdfTypeError("no return type annotation")
    returns = annotation_type(node.returns, names)
    if isinstance(node, ast.AsyncFunctionDef):
        kind = "async"
    if kind == "udaf":
        if not args:
            raise UdfTypeError("an aggregate UDF takes at least one list argument")
        for i, arg_type in enumerate(args):
            if not arg_type.spark.startswith("ARRAY<"):
                raise UdfTypeError(f"aggregate UDF argument {i + 1} must be a list[...]")
    return FoundUdf(
        node.name,
        kind,
        args,
        returns,
        int(options["concurrency"]),
        options["timeout"],
        line,
    )


def annotation_type(node: ast.expr, names: dict[str, str]) -> UdfType:
    """The Spark type of an annotation (``int | None``, ``list[str]``...), as written."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            parsed = ast.parse(node.value, mode="eval").body
        except SyntaxError as err:
            raise UdfTypeError(f"annotation {node.value!r} is not an expression") from err
        return annotation_type(parsed, names)
    members = _union_members(node, names)
    if members is not None:
        present = [m for m in members if not _is_none(m)]
        if len(present) != 1 or len(present) == len(members):
            raise UdfTypeError(f"unsupported union {ast.unparse(node)}")
        inner = annotation_type(present[0], names)
        return UdfType(inner.spark, True)
    if isinstance(node, ast.Subscript) and _qualified(node.value, names) in _LIST:
        return UdfType(f"ARRAY<{annotation_type(node.slice, names).spark}>", False)
    if _qualified(node, names) in _LIST:
        raise UdfTypeError("list needs an item type, e.g. list[int]")
    spark = _SCALARS.get(_qualified(node, names) or "")
    if spark is None:
        raise UdfTypeError(
            f"unsupported type {ast.unparse(node)} (use int, float, str, bool, bytes, datetime, "
            "X | None, list[X], written as such: an alias is not followed)"
        )
    return UdfType(spark, False)


def _union_members(node: ast.expr, names: dict[str, str]) -> list[ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = _union_members(node.left, names) or [node.left]
        right = _union_members(node.right, names) or [node.right]
        return [*left, *right]
    if isinstance(node, ast.Subscript):
        outer = _qualified(node.value, names)
        if outer in _OPTIONAL:
            return [node.slice, ast.Constant(None)]
        if outer in _UNION:
            inner = node.slice
            return list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
    return None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
