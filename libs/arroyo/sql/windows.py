"""Arroyo's window functions in GROUP BY: ``tumble``, ``hop``, ``session``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from arroyo.sql.time import spark_duration

WINDOW_FUNCTIONS = ("tumble", "hop", "session")


@dataclass(frozen=True, slots=True)
class WindowSpec:
    kind: Literal["tumble", "hop", "session"]
    width_us: int
    slide_us: int

    def describe(self) -> str:
        if self.kind == "hop":
            return f"hop(slide {self.slide_us} us, width {self.width_us} us)"
        return f"{self.kind}({self.width_us} us)"

    def spark_call(self, event_time: exp.Expression) -> exp.Expression:
        width = exp.Literal.string(spark_duration(self.width_us))
        if self.kind == "session":
            return exp.Anonymous(this="session_window", expressions=[event_time, width])
        args: list[exp.Expression] = [event_time, width]
        if self.kind == "hop":
            args.append(exp.Literal.string(spark_duration(self.slide_us)))
        return exp.Anonymous(this="window", expressions=args)


def window_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in WINDOW_FUNCTIONS:
        return str(node.this).lower()
    return None
