"""Decoding generated records with ``arroyo.formats.codec.decode``, many in one Spark job:
each record is decoded, dropped as bad data, or fails the job naming the table and a record,
consistently with the independent reading of ``tests/fuzz/records.py``.

Shared by ``tests/fuzz/test_formats.py`` (few records, for CI) and ``bench/fuzz.py`` (more)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from arroyo.program.spec import BadData, FormatSpec, TableSpec
from tests.fuzz import records as r

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class FormatCase:
    records: st.SearchStrategy[bytes]
    expect: Callable[[bytes], r.Expected]
    primary_key: tuple[str, ...] = ()


def _raw_string(record: bytes) -> r.Expected:
    try:
        return r.Expected(row={"value": record.decode("utf-8")})
    except UnicodeDecodeError:
        return r.Expected()


FORMATS: dict[str, FormatCase] = {
    "json": FormatCase(r.mutated(r.json_rows().map(r.json_bytes)), r.expect_json),
    "debezium_json": FormatCase(
        r.mutated(r.change_records().map(r.json_bytes)), r.expect_debezium, ("id",)
    ),
    "avro": FormatCase(r.mutated(r.rows.map(r.avro_bytes)), r.expect_avro),
    "raw_string": FormatCase(r.mutated(r.json_rows().map(r.json_bytes)), _raw_string),
    "raw_bytes": FormatCase(st.binary(max_size=40), lambda b: r.Expected(row={"value": b})),
}


def _table(fmt: str, bad_data: BadData, primary_key: tuple[str, ...]) -> TableSpec:
    raw = fmt in ("raw_string", "raw_bytes")
    columns = (
        [r.ColumnSpec("value", "STRING" if fmt == "raw_string" else "BINARY")] if raw else r.COLUMNS
    )
    return TableSpec(
        "fuzzed",
        "single_file",
        "source",
        {},
        columns,
        FormatSpec(fmt, {}, bad_data),
        primary_key=list(primary_key),
    )


def _decode(spark: SparkSession, fmt: str, records: list[bytes], bad_data: BadData) -> list[Any]:
    from pyspark.sql import types as T

    from arroyo.formats.codec import decode

    schema = T.StructType(
        [
            T.StructField("value", T.BinaryType()),
            T.StructField("_eoi", T.BooleanType(), False),
            T.StructField("_index", T.IntegerType(), False),
        ]
    )
    rows = [(record, False, i) for i, record in enumerate(records)]
    df = spark.createDataFrame(rows, schema, verifySchema=False)
    table = _table(fmt, bad_data, FORMATS[fmt].primary_key)
    return decode(df, table).collect()


def check_format(spark: SparkSession, fmt: str, records: list[bytes]) -> int:
    """Decode ``records`` with bad_data 'drop', then (when any was dropped) 'fail'; assert
    both agree with the independent reading; the number of records dropped."""
    case = FORMATS[fmt]
    kept = {row["_index"]: row.asDict() for row in _decode(spark, fmt, records, "drop")}
    for index, record in enumerate(records):
        expected = case.expect(record)
        if expected.bad:
            assert index not in kept, (fmt, record, kept[index])
        if expected.row is not None:
            assert index in kept, (fmt, record, "dropped", expected.row)
            assert r.same_row(kept[index], expected.row), (fmt, record, kept[index])
    dropped = [records[i] for i in range(len(records)) if i not in kept]
    if not dropped:
        assert len(_decode(spark, fmt, records, "fail")) == len(records)
        return 0
    try:
        _decode(spark, fmt, records, "fail")
    except Exception as err:
        message = str(err)
        assert f"bad data in table 'fuzzed' ({fmt}): could not decode " in message, message
        named = [_as_named(fmt, record) for record in dropped]
        assert any(text is None or text in message for text in named), (message, dropped)
    else:
        raise AssertionError(f"{fmt}: bad_data 'fail' passed {len(dropped)} bad records")
    return len(dropped)


def _as_named(fmt: str, record: bytes) -> str | None:
    """How the failure names a record: hex for Avro, else its text (None: not UTF-8, so its
    rendering is the JVM's)."""
    if fmt == "avro":
        return record.hex().upper()
    try:
        return record.decode("utf-8")
    except UnicodeDecodeError:
        return None
