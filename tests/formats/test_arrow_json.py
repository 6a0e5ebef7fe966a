"""JSON decoded where a source reads it (``arroyo.formats.arrow_json``, Arrow's reader) reads
every record as Spark's ``from_json`` does: each record is decoded both ways, and the table's
rows (and which records are bad) must be the same."""

from __future__ import annotations

import json
import random

import pytest
from pyspark.sql import SparkSession

from arroyo.formats import arrow_json
from arroyo.formats.codec import decode
from arroyo.program.spec import ColumnSpec, FormatSpec, TableSpec

# Records Arrow's and Spark's readers might read apart: types, numbers, escapes, layout.
TRICKY = [
    b'{"n": 1, "s": "a", "b": true, "d": 1.5}',
    b'{"n": -0, "s": "", "b": false, "d": -0.0}',
    b'{"n": 9223372036854775807, "d": 1e308}',
    b'{"n": 9223372036854775808}',
    b'{"n": -9223372036854775809}',
    b'{"n": 1.0}',
    b'{"n": 1e3}',
    b'{"n": 01}',
    b'{"n": "12"}',
    b'{"n": true}',
    b'{"n": null, "s": null}',
    b'{"s": 12}',
    b'{"s": {"a": 1}}',
    b'{"s": [1, 2]}',
    b'{"s": "\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\"}',
    b'{"s": "\\ud800"}',
    b'{"s": "\xff\xfe"}',
    b'{"s": "tab\tinside"}',
    b'{"d": NaN}',
    b'{"d": Infinity}',
    b'{"d": 1}',
    b'{"d": 12345678901234567891}',
    b'{"d": 1e400}',
    b'{"d": "1.5"}',
    b'{"b": "true"}',
    b'{"b": 1}',
    b"{'n': 1}",
    b"{n: 1}",
    b'{"n": 1,}',
    b'{"n": 1} x',
    b'{"n": 1}{"n": 2}',
    b'{"n": 1} null',
    b'{"n": 1}\n{"n": 2}',
    b'{\n"n": 1\n}',
    b'{"n": 1}\r',
    b"null",
    b" null",
    b"",
    b"[]",
    b'[{"n": 1}]',
    b"1",
    b'"x"',
    b"{}",
    b'{"N": 1, "S": "x"}',
    b'{"n": 1, "n": 2}',
    b'{"other": {"deep": [1, {"x": null}]}, "n": 3}',
    b'{"other": 1}',
    b'{"other": "1"}',
    b'  {"n": 4}',
    b'{"n": 5}  ',
    b'{"n": 6 /* c */}',
    b'{"\\u006e": 7}',
    b'{"i": 2147483647, "h": 32767, "t": 127}',
    b'{"i": 2147483648}',
    b'{"h": 32768}',
    b'{"t": 128}',
    b'{"t": -129}',
    # What Arrow's reader (RapidJSON) reads and Jackson refuses or reads otherwise.
    b'{"d": Inf}',
    b'{"d": -Inf}',
    b'{"d": -NaN}',
    b'{"n": 1, "other": Inf}',
    b'{"d": -0}',
    b'{"d": -0.0}',
    b'{"d": -0, "n": 2}',
    b'{"n": 1, "other": ' + b"[" * 1500 + b"]" * 1500 + b"}",
    b'{"d": 1' + b"0" * 1200 + b"}",
    b'{"n": 1, "other": 0.' + b"1" * 1200 + b"}",
    b'{"n": 1, "' + b"k" * 60_000 + b'": 1}',
    b'{"s": "' + b"x" * 5000 + b'"}',
]
COLUMNS = [
    ("n", "BIGINT"),
    ("s", "STRING"),
    ("b", "BOOLEAN"),
    ("d", "DOUBLE"),
    ("i", "INT"),
    ("h", "SMALLINT"),
    ("t", "TINYINT"),
]


def _value(rng: random.Random) -> object:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.randint(-(2**70), 2**70)
    if kind == 1:
        return rng.randint(-300, 300)
    if kind == 2:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10.0 ** rng.randint(-300, 300)])
    if kind == 3:
        return "".join(rng.choice('ab \u00e9\U0001f600"\\/\n\x01') for _ in range(rng.randrange(6)))
    if kind == 4:
        return rng.choice([True, False, None])
    if kind == 5:
        return [_value(rng) for _ in range(rng.randrange(3))]
    if kind == 6:
        return {"x": _value(rng)}
    if kind == 7:
        return str(rng.randint(-5, 5))
    return rng.choice([0, -1, 1.0, 2.5, ""])


# A value of each column's own type, within its range.
_FITTING = {
    "BIGINT": lambda rng: rng.randint(-(2**63), 2**63 - 1),
    "INT": lambda rng: rng.randint(-(2**31), 2**31 - 1),
    "SMALLINT": lambda rng: rng.randint(-(2**15), 2**15 - 1),
    "TINYINT": lambda rng: rng.randint(-128, 127),
    "DOUBLE": lambda rng: rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-30, 30),
    "STRING": lambda rng: "".join(rng.choice('ab \u00e9"\\/\n') for _ in range(5)),
    "BOOLEAN": lambda rng: rng.random() < 0.5,
}


def _record(rng: random.Random) -> bytes:
    kinds = dict(COLUMNS)
    keys = [*kinds, "other", "N"]
    row = {
        k: _FITTING[kinds[k]](rng) if k in kinds and rng.random() < 0.97 else _value(rng)
        for k in rng.sample(keys, rng.randrange(len(keys)))
    }
    text = json.dumps(
        row, ensure_ascii=rng.random() < 0.5, separators=rng.choice([None, (",", ":")])
    )
    data = text.encode()
    if rng.random() < 0.15 and data:  # a mutation: a byte changed, dropped or added
        at = rng.randrange(len(data))
        byte = bytes([rng.randrange(256)])
        data = rng.choice(
            [
                data[:at] + byte + data[at + 1 :],
                data[:at] + data[at + 1 :],
                data[:at] + byte + data[at:],
            ]
        )
    return data


def _rows(
    spark: SparkSession, records: list[bytes], nullable: bool, fast: bool, per: int = 1
) -> list[tuple]:
    """The table's rows from ``records``, decoded by from_json alone or (``fast``) by Arrow
    ``per`` records a call (a call takes them all or none)."""
    columns = [ColumnSpec(name, kind, nullable or name != "n") for name, kind in COLUMNS]
    table = TableSpec("t", "test", "source", {}, columns, FormatSpec("json", {}, "drop"))
    ddl = "value BINARY, _eoi BOOLEAN, _i INT"
    rows = [(r, False, i) for i, r in enumerate(records)]
    if fast:
        spec = arrow_json.columns_for(table)
        assert spec is not None
        ddl += ", " + arrow_json.spark_fields(spec)
        decoded = []
        for at in range(0, len(records), per):
            arrays = arrow_json.decoded(records[at : at + per], spec)
            decoded += zip(*(a.to_pylist() for a in arrays), strict=True)
        rows = [(*row, *values) for row, values in zip(rows, decoded, strict=True)]
    df = decode(spark.createDataFrame(rows, ddl), table)
    # Floats by their repr: NaN equal to itself, -0.0 not equal to 0.0.
    return [
        tuple(repr(v) if isinstance(v, float) else v for v in row)
        for row in sorted(df.collect(), key=lambda r: int(r["_i"]))
    ]


def _both(spark: SparkSession, records: list[bytes], nullable: bool) -> None:
    plain = _rows(spark, records, nullable, fast=False)
    for per in (1, 7):
        assert _rows(spark, records, nullable, fast=True, per=per) == plain, per


@pytest.mark.spark
@pytest.mark.parametrize("nullable", [True, False], ids=["nullable", "n NOT NULL"])
def test_arrow_reads_tricky_records_as_from_json_does(spark: SparkSession, nullable: bool) -> None:
    _both(spark, TRICKY, nullable)


@pytest.mark.spark
def test_arrow_reads_random_and_mutated_records_as_from_json_does(spark: SparkSession) -> None:
    rng = random.Random(29)
    records = [_record(rng) for _ in range(3000)]
    spec = [(name, kind) for name, kind in COLUMNS]
    taken = sum(bool(arrow_json.decoded([r], spec)[-1][0].as_py()) for r in records)
    print(f"records tried: {len(records)}, decoded by Arrow: {taken}")
    # Both paths are exercised: most records Arrow reads, and many it leaves to from_json.
    assert 0.3 * len(records) < taken < 0.9 * len(records)
    _both(spark, records, nullable=False)


def test_a_slice_is_decoded_whole_or_left_to_from_json() -> None:
    spec = [("n", "BIGINT")]
    good = [b'{"n": %d}' % i for i in range(arrow_json.SLICE_ROWS)]
    arrays = arrow_json.decoded([*good, *good[:10]], spec)
    assert arrays[0].to_pylist() == [*range(arrow_json.SLICE_ROWS), *range(10)]
    assert all(arrays[1].to_pylist())
    # One record Arrow refuses leaves its slice (only) to from_json; a bare null, which
    # crashes Arrow's reader, is never given to it.
    mixed = [*good[:-1], b"null", *good[:10]]
    arrays = arrow_json.decoded(mixed, spec)
    flags = arrays[1].to_pylist()
    assert flags == [False] * arrow_json.SLICE_ROWS + [True] * 10
    assert arrays[0].to_pylist()[-10:] == list(range(10))
    assert arrays[0].null_count == arrow_json.SLICE_ROWS


def test_only_tables_both_readers_agree_on_are_decoded_at_the_source() -> None:
    def table(kind: str, **options: str) -> TableSpec:
        fmt = FormatSpec(options.pop("format", "json"), options)
        return TableSpec("t", "x", "source", {}, [ColumnSpec("c", kind)], fmt)

    assert arrow_json.columns_for(table("BIGINT")) == [("c", "BIGINT")]
    for refused in (
        table("TIMESTAMP"),
        table("DECIMAL(10,2)"),
        table("FLOAT"),
        table("ARRAY<BIGINT>"),
        table("BIGINT", unstructured="true"),
        table("BIGINT", include_schema="true"),
        table("STRING", format="raw_string"),
    ):
        assert arrow_json.columns_for(refused) is None
