"""Updating results as debezium change records, exactly once.

Spark's update output mode gives, per micro-batch, the new value of every key that changed. A
change record also needs the old value, so this sink-side stage keeps the last value written for
each key, in SQLite beside the query's checkpoint, and turns each batch into ``c``/``u``/``d``
records::

    {"before": null, "after": {...}, "op": "c"}      a new key (or one that qualifies again)
    {"before": {...}, "after": {...}, "op": "u"}     a changed value
    {"before": {...}, "after": null, "op": "d"}      a key that stopped qualifying (HAVING, WHERE)

Exactly once, across crashes: the records of batch N are written by the sink (which skips a
batch it has already written), and only then is the state of batch N committed, with N, in one
SQLite transaction. A replay of N after a crash before that commit recomputes the same records
from the state of N-1; one after it is skipped.

Rows and keys are JSON text made by Spark (the same encoding as every other sink), so values
round-trip without passing through Python types.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from arroyo.connectors.base import LineWriter
from arroyo.connectors.runtime.remote_state import durable
from arroyo.connectors.runtime.sinks import batch_in_flight, consume
from arroyo.formats.codec import json_row
from arroyo.program.names import quote_name
from arroyo.program.spec import TableSpec

_SCHEMA = """
CREATE TABLE IF NOT EXISTS current (key TEXT PRIMARY KEY, row TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY CHECK (id = 0), batch_id INTEGER);
"""


class Changelog:
    """A foreachBatch function: update-mode rows in, change records out through ``writer``."""

    def __init__(
        self,
        state_path: Path,
        writer: LineWriter,
        sink: TableSpec,
        keys: list[str],
        keep: str | None,
    ) -> None:
        self.state_path = state_path
        self.writer = writer
        self.sink = sink
        self.columns = [c.name for c in sink.columns if c.physical]
        self.keys = keys
        self.keep = keep

    def _connect(self) -> sqlite3.Connection:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.state_path)
        db.executescript(_SCHEMA)
        return db

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            self._apply(df, batch_id)

    def _apply(self, df: DataFrame, batch_id: int) -> None:
        db = self._connect()
        try:
            row = db.execute("SELECT batch_id FROM progress WHERE id = 0").fetchone()
            if row is not None and batch_id <= row[0]:
                consume(df)
                return
            changes = dict(self._changes(db, df))
            if not self.writer.committed(batch_id):
                self.writer.write(batch_id, self._records(_before(db, changes), changes))
            with db:
                # Whole batches of statements: one call per key costs as much again.
                db.executemany(
                    "DELETE FROM current WHERE key = ?",
                    ((key,) for key, after in changes.items() if after is None),
                )
                db.executemany(
                    "INSERT INTO current (key, row) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET row = excluded.row",
                    ((key, after) for key, after in changes.items() if after is not None),
                )
                db.execute(
                    "INSERT INTO progress (id, batch_id) VALUES (0, ?) "
                    "ON CONFLICT (id) DO UPDATE SET batch_id = excluded.batch_id",
                    (batch_id,),
                )
        finally:
            db.close()
        durable(self.state_path)

    def _changes(self, db: sqlite3.Connection, df: DataFrame) -> Iterator[tuple[str, str | None]]:
        """(key, new row JSON or None when the key no longer qualifies), for changed keys."""
        columns = [F.col(quote_name(k)) for k in self.keys]
        texts = [isinstance(df.schema[k].dataType, StringType) for k in self.keys]
        if any(texts) and not all(texts):
            # Text and other keys (a top-N's key and rank): Spark's array() would cast the text
            # to the other type, which fails under ANSI rules. Other mixes (numbers of several
            # types) keep array()'s own widening, the encoding their stored state has.
            columns = [c.cast("string") for c in columns]
        key = F.to_json(F.array(*columns)) if self.keys else F.lit("[]")
        row = json_row(df, self.columns, self.sink)
        keep = F.coalesce(F.col(quote_name(self.keep)), F.lit(False)) if self.keep else F.lit(True)
        for k, r, qualifies in df.select(key, row, keep).toLocalIterator(prefetchPartitions=True):
            yield k, (r if qualifies else None)

    def _records(self, befores: dict[str, str], changes: dict[str, str | None]) -> Iterator[bytes]:
        for key, after in changes.items():
            before = befores.get(key)
            if before == after:
                continue
            op = "c" if before is None else ("d" if after is None else "u")
            text = f'{{"before":{before or "null"},"after":{after or "null"},"op":"{op}"}}\n'
            yield text.encode()


# Keys looked up per statement: well under SQLite's limit on a statement's parameters.
_LOOKUP_CHUNK = 500


def _before(db: sqlite3.Connection, changes: dict[str, str | None]) -> dict[str, str]:
    """The rows last written for the changed keys that have one, a chunk of keys a statement
    (a statement per key took about twice as long on Nexmark q4's 60 K keys a batch)."""
    keys = list(changes)
    found: dict[str, str] = {}
    for start in range(0, len(keys), _LOOKUP_CHUNK):
        chunk = keys[start : start + _LOOKUP_CHUNK]
        marks = ", ".join("?" * len(chunk))
        found.update(db.execute(f"SELECT key, row FROM current WHERE key IN ({marks})", chunk))
    return found
