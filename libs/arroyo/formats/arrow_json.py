"""JSON records decoded where a Python source reads them, by Arrow's JSON reader, instead of
by Spark's ``from_json`` in the JVM: a fast path for the sources whose tasks build Arrow
batches in Python (the spooled ones, RabbitMQ).

``from_json`` costs about 2.4 us a record on this machine's cores, more than reading most
sources' messages does; Arrow's reader takes a slice of a few thousand records in one call, at
about 0.2 us a record. It applies only where both read JSON alike: a table whose columns are
all of ``ARROW_TYPES`` (no TIMESTAMP, DECIMAL, DATE or nested column, whose readings differ),
in plain ``json`` (no registry header, no envelope, no framing). Even then Arrow's reader is
stricter than Spark's (single quotes, NaN, a number given for a STRING column, a value spread
over lines), so each slice of ``SLICE_ROWS`` records is taken whole or not at all: a slice
Arrow refuses, or one whose records are not each one line holding one object, or that holds
what the two read apart (``Inf``, ``-NaN``, a ``-0`` DOUBLE, what passes Jackson's limits on
nesting and on the lengths of numbers and keys), is left to ``from_json`` (``_decoded``
false), which then decides, with ``bad_data``, as for any record.
tests/formats/test_arrow_json.py checks that both read the same records alike.

A source that decodes gives Spark, beside ``value`` (kept: a record found bad is named by
it), a column per table column (``_json_<i>``) and ``_decoded``; ``arroyo.formats.codec``
reads those where ``_decoded`` is true and runs ``from_json`` on the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from arroyo.program.spec import TableSpec

# Spark's types whose JSON reading Arrow's reader agrees with (what it refuses, Spark decides).
ARROW_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
}
DECODED = "_decoded"
PREFIX = "_json_"
# Records decoded in one call of Arrow's reader, and left to from_json together if one fails.
SLICE_ROWS = 4096
# The option that carries the columns to a source (``option``), as JSON.
OPTION = "decode_json"

Columns = Sequence[tuple[str, str]]  # (name, Spark type)


def columns_for(table: TableSpec) -> list[tuple[str, str]] | None:
    """The table's physical columns, if its records can be decoded where they are read."""
    from arroyo.formats import JsonOptions, parse_format_options

    fmt = table.format
    if fmt is None or fmt.name != "json" or fmt.framing is not None:
        return None
    opts = parse_format_options(fmt.name, fmt.options)
    assert isinstance(opts, JsonOptions)
    if opts.unstructured or opts.confluent_schema_registry or opts.include_schema:
        return None
    physical = [(c.name, c.spark_type) for c in table.columns if c.physical]
    if not physical or any(t not in ARROW_TYPES for _, t in physical):
        return None
    return physical


def option(table: TableSpec) -> str:
    """The source option that asks its reader to decode (empty: it cannot)."""
    columns = columns_for(table)
    return json.dumps(columns) if columns else ""


def parse_option(text: str | None) -> list[tuple[str, str]] | None:
    if not text:
        return None
    return [(name, kind) for name, kind in json.loads(text)]


def spark_fields(columns: Columns) -> str:
    """The DDL of the columns a decoding source adds to its schema."""
    names = value_names(len(columns))
    fields = [f"`{name}` {kind}" for name, (_, kind) in zip(names, columns, strict=True)]
    return ", ".join([*fields, f"`{DECODED}` BOOLEAN"])


def value_names(count: int) -> list[str]:
    """The names of a decoding source's columns of ``count`` table columns' values."""
    return [f"{PREFIX}{i}" for i in range(count)]


def column_names(columns: Columns) -> list[str]:
    return [*value_names(len(columns)), DECODED]


def decoded(records: Sequence[bytes | None], columns: Columns) -> list[pa.Array]:
    """For ``records``, the decoded columns and ``_decoded``, in ``column_names`` order."""
    names = value_names(len(columns))
    schema = pa.schema([(n, ARROW_TYPES[t]) for n, (_, t) in zip(names, columns, strict=True)])
    parts: list[list[pa.Array]] = []
    for at in range(0, len(records), SLICE_ROWS):
        parts.append(_slice(records[at : at + SLICE_ROWS], columns, schema))
    if not parts:
        return [pa.array([], f.type) for f in schema] + [pa.array([], pa.bool_())]
    return [pa.concat_arrays([p[i] for p in parts]) for i in range(len(schema) + 1)]


def _slice(records: Sequence[bytes | None], columns: Columns, schema: pa.Schema) -> list[pa.Array]:
    table = _read(records, columns)
    if table is None:
        nulls = [pa.nulls(len(records), f.type) for f in schema]
        return [*nulls, pa.repeat(pa.scalar(False), len(records))]
    arrays = [table.column(name).combine_chunks() for name, _ in columns]
    return [*arrays, pa.repeat(pa.scalar(True), len(records))]


def _read(records: Sequence[bytes | None], columns: Columns) -> pa.Table | None:
    """The records read by Arrow's reader, one row each, or None where it cannot say for
    certain (then from_json decides)."""
    import pyarrow.json as pj

    # Each record one line holding one object: it begins with "{" (Arrow's reader crashes on
    # a document that is a bare null, and this keeps one record from running into the next)
    # and ends with "}", with no line break within; the row count then proves each record
    # gave exactly one row.
    for record in records:
        if not record or record[0] != 0x7B or record[-1] != 0x7D:
            return None
    joined = b"\n".join(records)  # type: ignore[arg-type]
    if joined.count(b"\n") != len(records) - 1 or b"\r" in joined:
        return None
    # Arrow's reader takes Inf, -Inf and -NaN, which Jackson (Spark's) refuses (anywhere in
    # the text: one in a string only sends its slice to from_json).
    if b"Inf" in joined or b"NaN" in joined:
        return None
    if max(map(len, records)) > _SHORT and any(_past_jackson(r) for r in records):  # type: ignore[arg-type]
        return None
    try:  # Arrow's reader lets bytes that are not UTF-8 into its strings
        joined.decode("utf-8")
    except UnicodeDecodeError:
        return None
    schema = pa.schema([(name, ARROW_TYPES[kind]) for name, kind in columns])
    try:
        table = pj.read_json(
            pa.BufferReader(joined),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(joined))),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
    except pa.ArrowException:
        return None
    if table.num_rows != len(records):
        return None
    for name, kind in columns:
        # A -0 read into a DOUBLE: Arrow gives -0.0, Spark 0.0 (as it gives -0.0 for -0.0).
        if kind == "DOUBLE" and _negative_zero(table.column(name)):
            return None
    return table


# Records this long or shorter cannot reach Jackson's limits (``_past_jackson``).
_SHORT = 1000
# A number of a thousand characters or more (Jackson's longest is 1,000).
_LONG_NUMBER = re.compile(rb"[-+.eE0-9]{1000}")


def _past_jackson(record: bytes) -> bool:
    """Whether ``record`` may pass a limit of Jackson's that Arrow's reader does not have (a
    key of 50,000 characters, nesting 1,000 deep, a number of 1,000 digits), so that Spark
    would refuse it; conservatively (then from_json decides)."""
    if len(record) <= _SHORT:
        return False
    if len(record) > 50_000 or record.count(b"{") + record.count(b"[") > 1000:
        return True
    return _LONG_NUMBER.search(record) is not None


def _negative_zero(column: pa.ChunkedArray) -> bool:
    import numpy as np

    values = column.to_numpy()
    return bool(np.any((values == 0) & np.signbit(values)))


def with_decoded(
    batch: pa.RecordBatch, records: Sequence[bytes | None], columns: Columns | None
) -> pa.RecordBatch:
    """``batch``, whose ``value`` holds ``records``, with their decoded columns added (when
    ``columns`` asks)."""
    if not columns:
        return batch
    arrays = decoded(records, columns)
    names = column_names(columns)
    return pa.RecordBatch.from_arrays(
        [*batch.columns, *arrays], names=[*batch.schema.names, *names]
    )


def carried(names: Sequence[str]) -> list[str]:
    """Those of a source's columns ``names`` that are decoded ones, to carry along."""
    return [n for n in names if n.startswith(PREFIX) or n == DECODED]
