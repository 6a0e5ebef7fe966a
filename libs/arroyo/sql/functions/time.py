"""Times and dates as DataFusion computes them.

``date_part``/``extract`` answer integers (the second without its fraction, the millisecond
within the minute), ``dow`` counts from Sunday = 0 and ``epoch`` is seconds with a fraction;
``date_bin`` bins from an origin; ``to_char`` and the ``to_timestamp`` family take chrono
formats (``%Y-%m-%d``), translated here to Spark's patterns; numbers given to the
``to_timestamp_*`` functions count that function's unit. Spark's timestamps are microseconds:
nanoseconds are truncated.
"""

from __future__ import annotations

import re

from sqlglot import exp

from arroyo.sql.functions.core import (
    Call,
    Context,
    FunctionError,
    Rewrite,
    func,
    spark,
    template,
    typed,
)
from arroyo.sql.functions.inference import is_integer
from arroyo.sql.time import DurationError, parse_duration_us

# -- date_part and extract ------------------------------------------------------------------

_PARTS = {
    "year": "year({0})",
    "quarter": "quarter({0})",
    "month": "month({0})",
    "week": "weekofyear({0})",
    "day": "dayofmonth({0})",
    "hour": "hour({0})",
    "minute": "minute({0})",
    "second": "second({0})",
    "millisecond": "CAST(floor(date_part('SECOND', {0}) * 1000) AS INT)",
    "microsecond": "CAST(date_part('SECOND', {0}) * 1000000 AS INT)",
    "dow": "dayofweek({0}) - 1",
    "doy": "dayofyear({0})",
    "epoch": "CAST(unix_micros(CAST({0} AS TIMESTAMP)) AS DOUBLE) / 1000000",
}
_SYNONYMS = {
    "years": "year", "y": "year", "yr": "year", "yrs": "year", "qtr": "quarter",
    "months": "month", "mon": "month", "mons": "month", "weeks": "week", "w": "week",
    "days": "day", "d": "day", "hours": "hour", "h": "hour", "hr": "hour", "hrs": "hour",
    "minutes": "minute", "m": "minute", "min": "minute", "mins": "minute",
    "seconds": "second", "s": "second", "sec": "second", "secs": "second",
    "milliseconds": "millisecond", "ms": "millisecond", "msec": "millisecond",
    "msecs": "millisecond", "microseconds": "microsecond", "us": "microsecond",
    "usec": "microsecond", "usecs": "microsecond", "dayofweek": "dow", "dayofyear": "doy",
}  # fmt: skip


def _date_part(part: str, value: exp.Expr, node: exp.Expr) -> exp.Expr:
    name = part.strip().strip("'\"").lower()
    name = _SYNONYMS.get(name, name)
    if name in ("nanosecond", "nanoseconds", "ns"):
        raise FunctionError(
            "date_part(): DataFusion does not extract nanoseconds (Spark's timestamps hold "
            "microseconds); use date_part('microsecond', ...)",
            node,
        )
    template = _PARTS.get(name)
    if template is None:
        raise FunctionError(f"date_part(): unknown date part '{name}'", node)
    return typed(spark(template, value), "double" if name == "epoch" else "int")


def extract(node: exp.Expr, _context: Context) -> exp.Expr:
    """``extract(dow FROM ts)``, as ``date_part('dow', ts)``."""
    assert isinstance(node, exp.Extract)
    return _date_part(node.this.name, node.expression.copy(), node)


def _date_part_call(call: Call) -> exp.Expr:
    call.arity(2)
    return _date_part(call.literal(0, "date part"), call.arg(1), call.node)


def _date_trunc(call: Call) -> exp.Expr:
    call.arity(2)
    return typed(func("date_trunc", call.arg(0), call.arg(1)), "timestamp")


# -- date_bin --------------------------------------------------------------------------------

_MONTHS = re.compile(r"\s*(\d+)\s*(years?|mons?|months?|centur(?:y|ies))\s*", re.IGNORECASE)


def _stride(call: Call) -> tuple[int, int]:
    """The bin width as (months, microseconds); one of them is 0."""
    node = call.args[0]
    if isinstance(node, exp.Interval):
        text = f"{node.this.name if node.this else ''} {node.unit.name if node.unit else ''}"
    elif isinstance(node, exp.Literal) and node.is_string:
        text = str(node.this)
    else:
        raise call.fail("the bin width must be an interval literal", node)
    months = _MONTHS.fullmatch(text)
    if months:
        unit = months.group(2).lower()
        factor = 12 if unit.startswith("year") else 1200 if unit.startswith("centur") else 1
        return int(months.group(1)) * factor, 0
    try:
        micros = parse_duration_us(text)
    except DurationError as err:
        raise call.fail(f"cannot read the bin width '{text.strip()}': {err}", node) from err
    if micros <= 0:
        raise call.fail("the bin width must be positive", node)
    return 0, micros


def _date_bin(call: Call) -> exp.Expr:
    """The start of the bin holding the timestamp, bins laid from ``origin`` (the epoch)."""
    call.arity(2, 3)
    months, micros = _stride(call)
    value = spark("CAST({0} AS TIMESTAMP)", call.arg(1))
    origin = (
        spark("CAST({0} AS TIMESTAMP)", call.arg(2))
        if len(call.args) == 3
        else spark("TIMESTAMP '1970-01-01 00:00:00'")
    )
    if micros:
        return typed(
            spark(
                "timestamp_micros(unix_micros({1}) + (unix_micros({0}) - unix_micros({1})) "
                "- pmod(unix_micros({0}) - unix_micros({1}), {2}))",
                value,
                origin,
                micros,
            ),
            "timestamp",
        )
    months_between = spark("(year({0}) - year({1})) * 12 + month({0}) - month({1})", value, origin)
    start = spark("{0} - pmod({0}, {1})", months_between, months)
    binned = spark("{0} + make_ym_interval(0, {1})", origin, start)
    return typed(
        spark(
            "IF({0} > {1}, {2} + make_ym_interval(0, {3} - {4}), {0})",
            binned,
            value,
            origin,
            start,
            months,
        ),
        "timestamp",
    )


# -- chrono formats ----------------------------------------------------------------------------

_CHRONO = {
    "Y": "yyyy", "y": "yy", "m": "MM", "b": "MMM", "h": "MMM", "B": "MMMM", "d": "dd",
    "e": "d", "H": "HH", "I": "hh", "M": "mm", "S": "ss", "j": "DDD", "a": "EEE",
    "A": "EEEE", "p": "a", "P": "a", "z": "xx", ":z": "xxx", "Z": "zzz", "f": "SSSSSSSSS",
    ".f": "[.SSSSSSSSS]", ".3f": ".SSS", ".6f": ".SSSSSS", ".9f": ".SSSSSSSSS", "3f": "SSS",
    "6f": "SSSSSS", "9f": "SSSSSSSSS", "T": "HH:mm:ss", "R": "HH:mm", "D": "MM/dd/yy",
    "F": "yyyy-MM-dd", "+": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS]xxx",
    "c": "EEE MMM d HH:mm:ss yyyy", "v": "d-MMM-yyyy", "r": "hh:mm:ss a", "x": "MM/dd/yy",
    "X": "HH:mm:ss", "u": "e", "w": "e",
}  # fmt: skip
_SPECIFIER = re.compile(r"%([-_0]?)(:z|\.\d?f|\d?f|.)")


class WeekdayError(FunctionError):
    """A format that names weekdays: Spark formats them but cannot read them."""


def java_format(call: Call, index: int, parsing: bool = False) -> str:
    """The chrono (strftime) format of argument ``index`` as a Spark datetime pattern (for
    reading text when ``parsing``)."""
    chrono = call.literal(index, "format")
    if "%" not in chrono:
        # Chrono would only echo such a format: it can only mean Spark's own pattern
        # ('yyyy-MM-dd'), which queries written for Spark use.
        return chrono
    out: list[str] = []
    literal = ""
    pos = 0
    while pos < len(chrono):
        match = _SPECIFIER.match(chrono, pos)
        if match is None:
            literal += chrono[pos]
            pos += 1
            continue
        spec = match.group(2)
        if spec in ("%", "n", "t"):
            literal += {"%": "%", "n": "\n", "t": "\t"}[spec]
        elif spec in _CHRONO:
            if literal:
                out.append(_quoted(literal))
                literal = ""
            pattern = _CHRONO[spec]
            if parsing and "E" in pattern:
                raise WeekdayError(
                    f"Spark cannot read weekday names (%{spec}) in the format '{chrono}'",
                    call.args[index],
                )
            if match.group(1) == "-" and pattern in ("dd", "MM", "HH", "hh", "mm", "ss"):
                pattern = pattern[0]
            out.append(pattern)
        else:
            raise call.fail(
                f"the format specifier %{spec} has no Spark equivalent", call.args[index]
            )
        pos = match.end()
    if literal:
        out.append(_quoted(literal))
    return "".join(out)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _to_char(call: Call) -> exp.Expr:
    call.arity(2)
    return typed(spark("date_format({0}, {1})", call.arg(0), java_format(call, 1)), "string")


# -- to_timestamp and friends ------------------------------------------------------------------

_UNITS = {"seconds": 1_000_000, "millis": 1_000, "micros": 1, "nanos": 0}
_TRUNCATE = {"seconds": "SECOND", "millis": "MILLISECOND"}


def _parsed(call: Call) -> exp.Expr:
    """The first argument as a timestamp: a number of seconds, or text read as RFC 3339 or
    with each chrono format in turn (NULL when none reads it)."""
    if len(call.args) == 1:
        # Spark's to_timestamp reads numbers as seconds (a CAST would not, under ANSI rules).
        return func("to_timestamp", call.arg(0))
    # Formats naming weekdays (%a, %A, %c) are left out when others remain (Spark reads no
    # weekday names), as if they had not matched.
    attempts: list[exp.Expr] = []
    skipped: WeekdayError | None = None
    for i in range(1, len(call.args)):
        try:
            pattern = java_format(call, i, parsing=True)
        except WeekdayError as err:
            skipped = err
            continue
        attempts.append(func("try_to_timestamp", call.arg(0), exp.Literal.string(pattern)))
    if not attempts:
        assert skipped is not None
        raise skipped
    return exp.Coalesce(this=attempts[0], expressions=attempts[1:])


def _to_timestamp_in(unit: str) -> Rewrite:
    def rewrite(call: Call) -> exp.Expr:
        if not call.args:
            raise call.fail("takes a value and optional formats")
        if len(call.args) == 1 and is_integer(call.type_of(0)) and unit != "seconds":
            if unit == "nanos":
                return typed(
                    spark(
                        "timestamp_micros({0} DIV 1000 - IF({0} % 1000 < 0, 1, 0))",
                        call.arg(0),
                    ),
                    "timestamp",
                )
            return typed(spark(f"timestamp_{unit}({{0}})", call.arg(0)), "timestamp")
        parsed = _parsed(call)
        if unit in _TRUNCATE:
            parsed = func("date_trunc", exp.Literal.string(_TRUNCATE[unit]), parsed)
        return typed(parsed, "timestamp")

    return rewrite


def _to_timestamp(call: Call) -> exp.Expr:
    """Numbers are seconds (with a fraction); text is RFC 3339 or read with chrono formats."""
    if not call.args:
        raise call.fail("takes a value and optional formats")
    return typed(_parsed(call), "timestamp")


def _from_unixtime(call: Call) -> exp.Expr:
    """Seconds since the epoch, as a timestamp (Spark's ``from_unixtime`` answers text)."""
    if len(call.args) == 2:
        raise call.fail(
            "a time zone is not supported: timestamps are UTC; use from_unixtime(seconds)",
            call.args[1],
        )
    call.arity(1)
    return typed(spark("timestamp_seconds({0})", call.arg(0)), "timestamp")


def _to_date(call: Call) -> exp.Expr:
    """Text as a date (with chrono formats), or a number of days since the epoch."""
    if not call.args:
        raise call.fail("takes a value and optional formats")
    if len(call.args) == 1 and is_integer(call.type_of(0)):
        return typed(spark("date_add(DATE '1970-01-01', {0})", call.arg(0)), "date")
    if len(call.args) == 1:
        return typed(spark("to_date({0})", call.arg(0)), "date")
    return typed(spark("CAST({0} AS DATE)", _parsed(call)), "date")


def _to_unixtime(call: Call) -> exp.Expr:
    if not call.args:
        raise call.fail("takes a value and optional formats")
    return typed(spark("unix_seconds({0})", _parsed(call)), "bigint")


# The time of day, as text (Arroyo's TIME travels as its text form here).
_current_time = template("date_format(current_timestamp(), 'HH:mm:ss.SSSSSS')", "string", arity=0)


REWRITES: dict[str, Rewrite] = {
    "date_part": _date_part_call,
    "datepart": _date_part_call,
    "datetrunc": _date_trunc,
    "date_bin": _date_bin,
    "to_char": _to_char,
    "date_format": _to_char,
    "to_timestamp": _to_timestamp,
    "to_timestamp_seconds": _to_timestamp_in("seconds"),
    "to_timestamp_millis": _to_timestamp_in("millis"),
    "to_timestamp_micros": _to_timestamp_in("micros"),
    "to_timestamp_nanos": _to_timestamp_in("nanos"),
    "from_unixtime": _from_unixtime,
    "to_date": _to_date,
    "to_unixtime": _to_unixtime,
    "current_time": _current_time,
}
