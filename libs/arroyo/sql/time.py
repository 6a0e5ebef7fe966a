"""Durations as Arroyo writes them: ``INTERVAL '1 minute'``, ``'10 seconds'``, ``'1h'``."""

from __future__ import annotations

import re

from sqlglot import exp

_UNITS_US = {
    "microsecond": 1,
    "us": 1,
    "millisecond": 1_000,
    "ms": 1_000,
    "second": 1_000_000,
    "sec": 1_000_000,
    "s": 1_000_000,
    "minute": 60_000_000,
    "min": 60_000_000,
    "m": 60_000_000,
    "hour": 3_600_000_000,
    "h": 3_600_000_000,
    "day": 86_400_000_000,
    "d": 86_400_000_000,
    "week": 7 * 86_400_000_000,
    "w": 7 * 86_400_000_000,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


class DurationError(ValueError):
    pass


def _unit_us(unit: str) -> int:
    u = unit.lower()
    if u in _UNITS_US:
        return _UNITS_US[u]
    if u.endswith("s") and u[:-1] in _UNITS_US:
        return _UNITS_US[u[:-1]]
    if u.rstrip("s") in ("month", "mon", "year", "yr", "y"):
        raise DurationError(
            f"'{unit}' has no fixed length: write the duration in days "
            f"(interval '30 days', interval '365 days')"
        )
    raise DurationError(f"unknown time unit '{unit}'")


def parse_duration_us(text: str) -> int:
    """'1 minute 30 seconds' -> microseconds."""
    total = 0.0
    pos = 0
    text = text.strip()
    if not text:
        raise DurationError("empty duration")
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m:
            raise DurationError(f"cannot read duration '{text}'")
        total += float(m.group(1)) * _unit_us(m.group(2))
        pos = m.end()
    return round(total)


_INTERVAL_OPTION = re.compile(r"^\s*interval\s+'([^']*)'\s*([a-z]*)\s*$", re.IGNORECASE)


def option_duration_us(text: str) -> int:
    """A duration option's value as the statement gives it: ``interval '10 seconds'``,
    ``INTERVAL '1' MINUTE`` or ``'10 seconds'``."""
    m = _INTERVAL_OPTION.match(text)
    return parse_duration_us(f"{m.group(1)} {m.group(2)}".strip() if m else text)


def interval_us(node: exp.Expression) -> int:
    """Microseconds of an ``INTERVAL`` literal (or a string literal duration)."""
    if isinstance(node, exp.Interval):
        value = node.this.name if node.this is not None else ""
        unit = node.unit.name if node.unit is not None else ""
        return parse_duration_us(f"{value} {unit}".strip())
    if isinstance(node, exp.Literal) and node.is_string:
        return parse_duration_us(node.name)
    raise DurationError(f"expected an interval, found '{node.sql('postgres')}'")


def spark_duration(us: int) -> str:
    """A duration string Spark's window functions accept."""
    return f"{us} microseconds"
