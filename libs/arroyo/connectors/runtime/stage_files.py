"""A stage's rows on disk, and the streaming source that reads them back (see
arroyo.connectors.stage).

Layout of a stage's directory::

    batch-<id>/part-*.parquet   the rows of the writing query's micro-batch <id>, committed
    batch-<id>/changes.jsonl    or its change records (a stage of an updating result)
    batch-<id>/_written         and when they were written (their time)
    .tmp-<id>/                  a batch being written (renamed to batch-<id> when whole)
    _consumed                   the last batch the reading query committed (its files removed)
    _end                        the writing query's input has ended: no batch comes after

Offsets are ``{"batch": b, "eoi": n}``: every batch up to ``b`` has been read, and how many
end-of-input batches have been emitted (as the file source counts them, BoundedFilesSource.java:
once ``_end`` is there and every batch is read, each micro-batch carries the marker; unlike the
file source's lines, never the batch of the last rows).

This module is imported by Spark's Python workers, so it must stay importable on its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from arroyo.connectors.runtime.remote_state import forget, write_durably
from arroyo.program.names import EVENT_TIME

BATCH_PREFIX = "batch-"
CONSUMED = "_consumed"
END = "_end"
# The writing query's event time column (EVENT_TIME) is stored with the rows; read back as
# ``_source_time``.
_CONTROL = "`_source_time` TIMESTAMP, `_eoi` BOOLEAN"
LINES_FILE = "changes.jsonl"
# When a batch of change records was written (microseconds): their time.
WRITTEN_FILE = "_written"
_CHUNK_ROWS = 65_536


def batch_dir(root: Path, batch_id: int) -> Path:
    return root / f"{BATCH_PREFIX}{batch_id:012d}"


def committed_batches(root: Path) -> list[int]:
    """The ids of the batches written and not yet consumed, in order."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    return sorted(int(n[len(BATCH_PREFIX) :]) for n in names if n.startswith(BATCH_PREFIX))


def consumed(root: Path) -> int:
    """The last batch the reader has committed (and removed); -1 before any."""
    try:
        return int((root / CONSUMED).read_text())
    except FileNotFoundError:
        return -1


class _File(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _EndOfInput(InputPartition):
    def __init__(self) -> None:
        super().__init__(None)


class _StageReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.root = Path(options["path"])
        # TimestampType as UTC-zoned Arrow timestamps (pyspark 4.1's default).
        self.arrow_schema = to_arrow_schema(schema)
        # The end of the last batch Spark planned: pyspark 4.1's latestOffset is not given
        # it (no admission control for Python sources). After a restart, what was consumed.
        self._start: dict[str, Any] = {"batch": consumed(self.root), "eoi": 0}

    def initialOffset(self) -> dict[str, Any]:
        return {"batch": -1, "eoi": 0}

    def latestOffset(self) -> dict[str, Any]:
        start = self._start
        # _end is looked at before the listing, so a listing taken after it has seen every
        # batch there will ever be.
        ended = (self.root / END).exists()
        batches = [b for b in committed_batches(self.root) if b > start["batch"]]
        if batches:
            latest = {"batch": batches[-1], "eoi": start["eoi"]}
        elif ended:
            latest = {"batch": start["batch"], "eoi": start["eoi"] + 1}
        else:
            latest = start
        # Spark plans a batch up to any offset that differs from its last one.
        self._start = latest
        return latest

    def _seen(self, offset: dict[str, Any]) -> None:
        """Spark planned or committed up to ``offset`` (after a restart, ahead of _start)."""
        if (offset["batch"], offset["eoi"]) > (self._start["batch"], self._start["eoi"]):
            self._start = dict(offset)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        self._seen(end)
        parts: list[InputPartition] = [
            _File(str(f))
            for b in committed_batches(self.root)
            if start["batch"] < b <= end["batch"]
            for f in sorted(batch_dir(self.root, b).iterdir())
            if f.name == LINES_FILE or f.suffix == ".parquet"
        ]
        if end["eoi"] > start["eoi"]:
            parts.append(_EndOfInput())
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, _EndOfInput):
            arrays = [pa.nulls(1, f.type) for f in self.arrow_schema if f.name != "_eoi"]
            yield pa.RecordBatch.from_arrays(
                [*arrays, pa.array([True], pa.bool_())], schema=self.arrow_schema
            )
            return
        assert isinstance(partition, _File)
        if partition.path.endswith(LINES_FILE):
            yield from self._read_lines(Path(partition.path))
            return
        data = [f for f in self.arrow_schema if f.name not in ("_source_time", "_eoi")]
        source_time = self.arrow_schema.field("_source_time")
        # The session writes timestamps as INT64 microseconds; a stage written as INT96 (by an
        # earlier version, or a session set otherwise) is read as microseconds too (Spark's
        # unit), not pyarrow's default nanoseconds, which wrap outside 1677-2262.
        stored = pq.ParquetFile(partition.path, coerce_int96_timestamp_unit="us")
        for batch in stored.iter_batches(
            batch_size=_CHUNK_ROWS, columns=[*(f.name for f in data), EVENT_TIME]
        ):
            arrays = [batch.column(f.name).cast(f.type) for f in data]
            arrays.append(batch.column(EVENT_TIME).cast(source_time.type))
            arrays.append(pa.array([False] * batch.num_rows, pa.bool_()))
            yield pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _read_lines(self, path: Path) -> Iterator[pa.RecordBatch]:
        """Change records, one per line. Their time is when their batch was written (the
        records carry none), the same on every read of it."""
        lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
        try:
            written = int((path.parent / WRITTEN_FILE).read_text())
        except FileNotFoundError:  # a stage written before the time was kept with it
            written = int(path.parent.stat().st_mtime * 1_000_000)
        time_type = self.arrow_schema.field("_source_time").type
        for i in range(0, len(lines), _CHUNK_ROWS):
            chunk = lines[i : i + _CHUNK_ROWS]
            n = len(chunk)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([ln.decode() for ln in chunk], pa.string()).cast(
                        self.arrow_schema.field("value").type
                    ),
                    pa.array([written] * n, pa.int64()).cast(time_type),
                    pa.array([False] * n, pa.bool_()),
                ],
                schema=self.arrow_schema,
            )

    def commit(self, end: dict[str, Any]) -> None:
        """Spark committed every batch up to ``end``: their files are no longer needed. The
        mark goes first, so that the writer, replaying a batch after a crash, knows it was
        consumed even once its files are gone."""
        self._seen(end)
        if end["batch"] > consumed(self.root):
            write_durably(self.root / CONSUMED, str(end["batch"]))
        # Also after a crash between the mark and the removal: what it left goes now.
        for b in committed_batches(self.root):
            if b <= end["batch"]:
                shutil.rmtree(batch_dir(self.root, b), ignore_errors=True)
                forget(batch_dir(self.root, b))


class StageSource(DataSource):
    """Options: ``path`` (the stage's directory), ``columns`` (Spark DDL of its columns; none
    for a stage of change records)."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_stage"

    def schema(self) -> str:
        # Without ``columns``: change records, one ``value`` per line for the format to decode.
        return f"{self.options.get('columns', '`value` STRING')}, {_CONTROL}"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StageReader(dict(self.options), schema)
