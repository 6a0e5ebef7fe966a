"""Decorators for Arroyo Python UDFs.

    from arroyo_udf import udf, udaf

    @udf
    def double(x: int) -> int:
        return x * 2

    @udf(concurrency=8, timeout=5.0)
    async def lookup(key: str) -> str | None: ...

    @udaf
    def p90(values: list[float]) -> float: ...

Types come from the annotations: ``int`` BIGINT, ``float`` DOUBLE, ``str`` TEXT, ``bool``
BOOLEAN, ``bytes`` BYTEA, ``datetime`` TIMESTAMP, ``X | None`` nullable, ``list[X]`` arrays. A
function without ``| None`` on an argument is not called for NULL inputs: the result is NULL.

This module only marks functions; Arroyo loads the file and plans with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])

UDF_MARKER = "__arroyo_udf__"


@dataclass(frozen=True)
class UdfOptions:
    kind: Literal["udf", "udaf"]
    concurrency: int = 16
    timeout: float = 30.0


@overload
def udf(func: F) -> F: ...
@overload
def udf(*, concurrency: int = 16, timeout: float = 30.0) -> Callable[[F], F]: ...
def udf(func: Any = None, *, concurrency: int = 16, timeout: float = 30.0) -> Any:
    """A scalar UDF; on an ``async def``, an async UDF with at most ``concurrency`` calls in
    flight per task and ``timeout`` seconds per call."""

    def mark(f: F) -> F:
        setattr(f, UDF_MARKER, UdfOptions("udf", concurrency, timeout))
        return f

    return mark(func) if func is not None else mark


def udaf(func: F) -> F:
    """An aggregate UDF: each argument is the list of a group's (or window's) values."""
    setattr(func, UDF_MARKER, UdfOptions("udaf"))
    return func
