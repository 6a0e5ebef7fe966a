"""Records for the decoders' fuzzing: valid ones of a fixed table (``COLUMNS``), their
mutations, and noise; and an independent reading of each (Python's ``json``, fastavro) that
says which must decode (and to what), which must be bad data, and which may be either."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Any

import fastavro
from hypothesis import strategies as st

from arroyo.formats import registry
from arroyo.program.spec import ColumnSpec

COLUMNS = [
    ColumnSpec("id", "BIGINT", nullable=False),
    ColumnSpec("name", "STRING"),
    ColumnSpec("score", "DOUBLE"),
    ColumnSpec("ok", "BOOLEAN"),
]
AVRO_SCHEMA = fastavro.parse_schema(registry.avro_schema(COLUMNS))
_I64 = 2**63
Row = dict[str, Any]
# Lone surrogates cannot be written as UTF-8 at all.
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)

rows = st.fixed_dictionaries(
    {"id": st.integers(-_I64, _I64 - 1)},
    optional={
        "name": st.none() | _text,
        "score": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "ok": st.none() | st.booleans(),
    },
)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


def json_rows() -> st.SearchStrategy[Row]:
    """Valid rows, and rows with a field dropped or replaced by any JSON value."""
    keys = st.sampled_from(["id", "name", "score", "ok", "ID", "extra"])
    broken = st.tuples(rows, keys, st.booleans(), json_values).map(
        lambda t: {
            **{k: v for k, v in t[0].items() if k != t[1]},
            **({t[1]: t[3]} if t[2] else {}),
        }
    )
    return st.one_of(rows, rows, broken)


def change_records() -> st.SearchStrategy[Any]:
    """Debezium change records: valid ones, and ones with a wrong op, a missing image or a
    bad row, and other JSON."""
    op = st.sampled_from(["c", "r", "u", "d"])
    valid = st.fixed_dictionaries({"op": op, "before": st.none() | rows, "after": rows}).map(
        lambda c: {**c, "before": c["before"] or c["after"]} if c["op"] == "d" else c
    )
    image = st.none() | json_rows()
    broken = st.fixed_dictionaries(
        {"op": op | st.text(max_size=2), "before": image, "after": image}
    )
    return st.one_of(valid, valid, broken, json_values)


@st.composite
def mutated(draw: st.DrawFn, encoded: st.SearchStrategy[bytes]) -> bytes:
    """A record's bytes, as they are or with bytes cut, flipped, inserted or removed."""
    data = draw(encoded)
    how = draw(st.sampled_from(["as_is", "as_is", "cut", "flip", "insert", "remove", "noise"]))
    if how == "noise":
        return draw(st.binary(max_size=24))
    if how == "as_is" or not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    if how == "cut":
        return data[:at]
    if how == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    if how == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data[:at] + data[at + 1 :]


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def avro_bytes(row: Row) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, AVRO_SCHEMA, row)
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class Expected:
    """What the independent reader makes of a record: ``row`` when it must decode to that,
    ``bad`` when it must be bad data, neither when the formats' leniencies may go either way
    (Spark reads a number as a STRING column's text; Avro has no end marker)."""

    row: Row | None = None
    bad: bool = False


def _typed_row(value: Any) -> Row | None:
    """The row of a JSON object whose fields all have the column's JSON type, else None."""
    if not isinstance(value, dict) or set(value) - {"id", "name", "score", "ok"}:
        return None
    row = {"id": value.get("id"), **{k: value.get(k) for k in ("name", "score", "ok")}}
    id_ok = type(row["id"]) is int and -_I64 <= row["id"] < _I64
    name_ok = row["name"] is None or isinstance(row["name"], str)
    score = row["score"]
    score_ok = score is None or type(score) is float or (type(score) is int and abs(score) < 2**53)
    ok_ok = row["ok"] is None or isinstance(row["ok"], bool)
    return row if id_ok and name_ok and score_ok and ok_ok else None


def _no_id(value: Any) -> bool:
    """An object without a usable BIGINT ``id``: bad whatever else it holds."""
    if not isinstance(value, dict):
        return True
    key = value.get("id")
    return not (type(key) is int and -_I64 <= key < _I64)


def _parsed(record: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(record.decode("utf-8"))
    except ValueError:
        return False, None


def expect_json(record: bytes) -> Expected:
    ok, value = _parsed(record)
    if not ok:
        # Spark, unlike Python, reads a document followed by other text.
        return Expected(bad=not record.lstrip().startswith(b"{"))
    row = _typed_row(value)
    return Expected(row=row) if row is not None else Expected(bad=_no_id(value))


def expect_debezium(record: bytes) -> Expected:
    ok, value = _parsed(record)
    if not ok:
        return Expected(bad=not record.lstrip().startswith(b"{"))
    if not isinstance(value, dict) or value.get("op") not in ("c", "r", "u", "d"):
        return Expected(bad=True)
    image = value.get("before" if value["op"] == "d" else "after")
    row = _typed_row(image)
    if row is not None and not set(value) - {"op", "before", "after"}:
        other = value.get("after" if value["op"] == "d" else "before")
        if other is None or _typed_row(other) is not None:
            return Expected(row={**row, "__arroyo_keep": value["op"] != "d"})
    return Expected(bad=_no_id(image))


def expect_avro(record: bytes) -> Expected:
    if not record:
        return Expected(bad=True)
    try:
        row = fastavro.schemaless_reader(io.BytesIO(record), AVRO_SCHEMA, None)
    except Exception:
        return Expected()
    exact = avro_bytes(row) == record
    return Expected(row=dict(row)) if exact else Expected()


def same_row(got: Row, want: Row) -> bool:
    """Equal, doubles compared as doubles (JSON's integers read into a DOUBLE column)."""
    for key, value in want.items():
        have = got[key]
        if isinstance(value, int | float) and not isinstance(value, bool) and key == "score":
            if not math.isclose(float(have), float(value), rel_tol=1e-15):
                return False
        elif have != value:
            return False
    return True
