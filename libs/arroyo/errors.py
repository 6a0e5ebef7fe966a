"""The one root error of the project.

Every failure travels as data: a stable ``code`` that tests and clients match on, a ``domain``
saying whose fault it is (the user's query or data, our own code, or an external system), and a
``retryable`` hint the controller uses to decide between restarting a job and failing it.
Each package defines its own subclasses; raise them ``from`` the underlying error.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorDomain(enum.StrEnum):
    USER = "user"
    INTERNAL = "internal"
    EXTERNAL = "external"


class ArroyoError(Exception):
    """Root of every error Arroyo raises on purpose."""

    code: str = "internal"
    domain: ErrorDomain = ErrorDomain.INTERNAL
    retryable: bool = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


@dataclass(frozen=True, slots=True)
class Span:
    """A place in the user's SQL: 1-based line and column of the first character."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found while planning, pointing at where it is."""

    code: str
    message: str
    span: Span | None = None

    def render(self, source_name: str = "query") -> str:
        where = f"{source_name}:{self.span}" if self.span else source_name
        return f"error[{self.code}] {where}: {self.message}"


class PlanningError(ArroyoError):
    """The query cannot be planned; carries one or more diagnostics."""

    domain = ErrorDomain.USER

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics), code=diagnostics[0].code)


class BadDataError(ArroyoError):
    """A record could not be decoded and the table asked for ``bad_data = 'fail'``."""

    code = "bad_data"
    domain = ErrorDomain.USER


class JobFailedError(ArroyoError):
    """A running pipeline stopped with an error."""

    code = "job_failed"
    domain = ErrorDomain.USER
