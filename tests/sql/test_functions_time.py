"""Time and date functions on Spark, against DataFusion's answers: ``date_part`` answers
integers (``dow`` from Sunday = 0, the second without its fraction), ``epoch`` seconds with a
fraction; chrono formats; numbers in the ``to_timestamp_*`` functions' units. Spark's timestamps
hold microseconds: DataFusion's nanoseconds are truncated."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.sql.functions import FunctionError
from tests.sql.functions_support import check, create_tables, evaluate_all, translated, values

# Rows (ordered by s): ts = 2024-01-01 (a Monday) 10:15:30.123456, 10:45:00, 11:05:00.
DAY = dt.datetime(2024, 1, 1)


def at(hour: int, minute: int, second: int = 0, micros: int = 0) -> dt.datetime:
    return DAY.replace(hour=hour, minute=minute, second=second, microsecond=micros)


CASES: list[tuple[str, Any]] = [
    ("date_trunc('hour', ts)", [at(10, 0), at(10, 0), at(11, 0)]),
    ("datetrunc('minute', ts)", [at(10, 15), at(10, 45), at(11, 5)]),
    ("date_trunc('week', TIMESTAMP '2024-01-03 12:00:00')", [DAY] * 3),
    ("date_part('minute', ts)", [15, 45, 5]),
    ("datepart('year', ts)", [2024] * 3),
    ("extract(hour FROM ts)", [10, 10, 11]),
    ("date_part('second', ts)", [30, 0, 0]),
    ("date_part('millisecond', ts)", [30123, 0, 0]),
    ("date_part('microsecond', ts)", [30123456, 0, 0]),
    ("extract(dow FROM ts)", [1] * 3),
    ("extract(dow FROM DATE '2024-01-07')", [0] * 3),
    ("extract(doy FROM DATE '2024-02-01')", [32] * 3),
    ("extract(week FROM ts)", [1] * 3),
    ("extract(quarter FROM DATE '2024-05-01')", [2] * 3),
    ("extract(day FROM ts)", [1] * 3),
    ("extract(month FROM ts)", [1] * 3),
    ("extract(epoch FROM ts)", [1704104130.123456, 1704105900.0, 1704107100.0]),
    ("date_bin(interval '15 minutes', ts)", [at(10, 15), at(10, 45), at(11, 0)]),
    (
        "date_bin(interval '15 minutes', ts, TIMESTAMP '2024-01-01 00:05:00')",
        [at(10, 5), at(10, 35), at(11, 5)],
    ),
    ("date_bin('1 hour', ts)", [at(10, 0), at(10, 0), at(11, 0)]),
    (
        "date_bin(interval '1 month', TIMESTAMP '2024-03-17 10:00:00')",
        [dt.datetime(2024, 3, 1)] * 3,
    ),
    (
        "date_bin(interval '2 months', TIMESTAMP '2024-03-17 10:00:00', "
        "TIMESTAMP '2024-02-15 00:00:00')",
        [dt.datetime(2024, 2, 15)] * 3,
    ),
    ("date_bin(interval '1 year', TIMESTAMP '2024-03-17 10:00:00')", [dt.datetime(2024, 1, 1)] * 3),
    ("make_date(2023, 1, 31)", [dt.date(2023, 1, 31)] * 3),
    ("make_date('2023', '01', '31')", [dt.date(2023, 1, 31)] * 3),
    ("to_char(ts, '%Y-%m-%d %H:%M')", ["2024-01-01 10:15", "2024-01-01 10:45", "2024-01-01 11:05"]),
    ("date_format(ts, '%d/%m/%Y')", ["01/01/2024"] * 3),
    (
        "to_char(ts, '%Y-%m-%dT%H:%M:%S%.3f')",
        ["2024-01-01T10:15:30.123", "2024-01-01T10:45:00.000", "2024-01-01T11:05:00.000"],
    ),
    ("to_char(ts, '%a %b %j %%')", ["Mon Jan 001 %"] * 3),
    (
        "date_format(ts, 'yyyy-MM-dd HH:mm')",
        ["2024-01-01 10:15", "2024-01-01 10:45", "2024-01-01 11:05"],
    ),
    # to_timestamp: RFC 3339 text, seconds as numbers, chrono formats tried in turn
    (
        "to_timestamp('2023-01-31T09:26:56.123456789-05:00')",
        [dt.datetime(2023, 1, 31, 14, 26, 56, 123456)] * 3,
    ),
    ("to_timestamp('2023-07-20 05:44:00')", [dt.datetime(2023, 7, 20, 5, 44)] * 3),
    ("to_timestamp(1700000000.5)", [dt.datetime(2023, 11, 14, 22, 13, 20, 500000)] * 3),
    ("to_timestamp(1700000000)", [dt.datetime(2023, 11, 14, 22, 13, 20)] * 3),
    (
        "to_timestamp('03:59:00.123456789 05-17-2023', '%c', '%+', '%H:%M:%S%.f %m-%d-%Y')",
        [dt.datetime(2023, 5, 17, 3, 59, 0, 123456)] * 3,
    ),
    ("to_timestamp('17/05/2023', '%Y-%m-%d', '%d/%m/%Y')", [dt.datetime(2023, 5, 17)] * 3),
    (
        "to_timestamp_seconds('2023-01-31T09:26:56.123456789-05:00')",
        [dt.datetime(2023, 1, 31, 14, 26, 56)] * 3,
    ),
    (
        "to_timestamp_millis('2023-01-31T09:26:56.123456789-05:00')",
        [dt.datetime(2023, 1, 31, 14, 26, 56, 123000)] * 3,
    ),
    (
        "to_timestamp_micros('2023-01-31T09:26:56.123456789-05:00')",
        [dt.datetime(2023, 1, 31, 14, 26, 56, 123456)] * 3,
    ),
    ("to_timestamp_seconds(1700000000)", [dt.datetime(2023, 11, 14, 22, 13, 20)] * 3),
    ("to_timestamp_millis(1700000000123)", [dt.datetime(2023, 11, 14, 22, 13, 20, 123000)] * 3),
    (
        "to_timestamp_micros(1700000000123456)",
        [dt.datetime(2023, 11, 14, 22, 13, 20, 123456)] * 3,
    ),
    (
        "to_timestamp_nanos(1700000000123456789)",
        [dt.datetime(2023, 11, 14, 22, 13, 20, 123456)] * 3,
    ),
    ("from_unixtime(1700000000)", [dt.datetime(2023, 11, 14, 22, 13, 20)] * 3),
    ("to_date('2023-01-31')", [dt.date(2023, 1, 31)] * 3),
    ("to_date(19000)", [dt.date(1970, 1, 1) + dt.timedelta(days=19000)] * 3),
    ("to_date('31/01/2023', '%d/%m/%Y')", [dt.date(2023, 1, 31)] * 3),
    ("to_unixtime(ts)", [1704104130, 1704105900, 1704107100]),
    ("to_unixtime('2023-01-31T09:26:56Z')", [1675157216] * 3),
    ("now() = current_timestamp", [True] * 3),
    ("current_date IS NOT NULL", [True] * 3),
    ("length(current_time)", [15] * 3),
]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_time_function(results: dict[str, Any], expression: str, expected: Any) -> None:
    check(values(results, expression), expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("date_part('nanosecond', ts)", "does not extract nanoseconds"),
        ("date_part('century', ts)", "unknown date part 'century'"),
        ("date_bin(n, ts)", "interval literal"),
        ("to_char(ts, '%Q')", "%Q has no Spark equivalent"),
        ("to_char(ts, s)", "must be a literal"),
        ("from_unixtime(1, 'UTC')", "time zone is not supported"),
    ],
)
def test_unmappable_time_calls_are_refused(expression: str, message: str) -> None:
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t")
