"""Bounded Parquet reading as a Python streaming data source, moving Arrow batches. (Lines are
read in the JVM by libs/arroyo/java/arroyo/files/BoundedLinesSource.java, with the same offsets
and markers; this source still reads lines too, where a test compares the two.)

Why not Spark's own file source: a bounded table must end, and its end must push the watermark
past every row so that open windows flush (Arroyo's semantics). Spark's file source can do
neither; this source knows where its input ends and, after the last record, emits end-of-input
marker rows (``_eoi``), one per batch.

Offsets are ``{"file": i, "pos": p, "eoi": n}``: file ``i`` of the sorted listing, byte offset
``p`` (JSON lines) or row index ``p`` (Parquet) inside it, and how many end-of-input batches have
been emitted. Once the input is exhausted every batch carries the marker: the first moves the
watermark to the end of time, the next ones are batches with data, so they run under that
watermark even where Spark would not schedule a no-data batch (stream-stream joins do not); and a
run resumed after the end sees the end again, so it knows it is done without any state of its own.
The runner stops the query once it has seen that.

This module is imported by Spark's Python workers, so it must stay importable on its own.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

_CHUNK_ROWS = 65_536
_CONTROL = "`_source_time` TIMESTAMP, `_eoi` BOOLEAN"


def list_files(path: str, pattern: str | None = None) -> list[str]:
    """The input files, in the order they are read: one file, or a directory's visible files
    at any depth; with ``pattern``, those whose path relative to the directory it matches
    (anywhere in the path, as Arroyo's ``source.regex_pattern``)."""
    p = Path(path)
    if p.is_file():
        return [str(p)]
    if not p.is_dir():
        return []
    matches = re.compile(pattern).search if pattern else None
    return sorted(
        str(f)
        for f in p.rglob("*")
        if f.is_file()
        and not any(part.startswith((".", "_")) for part in f.relative_to(p).parts)
        and (matches is None or matches(f.relative_to(p).as_posix()))
    )


def open_lines(path: str, compression: str) -> BinaryIO:
    """A file of lines, decompressed (``gzip`` or ``zstd``) where it is compressed: byte
    offsets are then offsets into the decompressed text."""
    if compression == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if compression == "zstd":
        with pa.input_stream(path, compression="zstd") as stream:
            return io.BytesIO(stream.read())
    return open(path, "rb")


def _unreadable(path: str, compression: str, err: BaseException) -> ValueError:
    how = "" if compression == "none" else f" as {compression} (source.compression)"
    return ValueError(f"cannot read '{path}'{how}: {err}")


class _Range(InputPartition):
    """Records ``[start, end)`` of one file (``end`` -1: to the end of the file)."""

    def __init__(self, path: str, start: int, end: int) -> None:
        super().__init__((path, start, end))
        self.path, self.start, self.end = path, start, end


class _EndOfInput(InputPartition):
    """The end-of-input marker row."""

    def __init__(self) -> None:
        super().__init__(None)


class _FileReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.path = options["path"]
        self.mode = options.get("mode", "lines")
        self.pattern = options.get("pattern") or None
        self.compression = options.get("compression", "none")
        self.max_records = int(options.get("max_records", "0")) or None
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def initialOffset(self) -> dict[str, Any]:
        return {"file": 0, "pos": 0, "eoi": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        files = list_files(self.path, self.pattern)
        file, pos = start["file"], start["pos"]
        if file >= len(files):
            return {"file": file, "pos": 0, "eoi": start["eoi"] + 1}
        if not isinstance(limit, ReadMaxRows):
            return {"file": len(files), "pos": 0, "eoi": 0}
        budget = limit.max_rows
        while budget > 0 and file < len(files):
            pos, taken, done = self._advance(files[file], pos, budget)
            budget -= taken
            if done:
                file, pos = file + 1, 0
        return {"file": file, "pos": pos, "eoi": 0}

    def _advance(self, path: str, pos: int, budget: int) -> tuple[int, int, bool]:
        """Move up to ``budget`` records from ``pos``: (new pos, records, reached end of file)."""
        if self.mode == "parquet":
            rows = pq.ParquetFile(path).metadata.num_rows
            take = min(budget, rows - pos)
            return pos + take, take, pos + take >= rows
        taken = 0
        try:
            with open_lines(path, self.compression) as f:
                f.seek(pos)
                while taken < budget:
                    line = f.readline()
                    if not line:
                        return f.tell(), taken, True
                    pos = f.tell()
                    if line.strip():
                        taken += 1
                at_end = f.read(1) == b""
        except (OSError, EOFError, pa.ArrowException) as err:
            raise _unreadable(path, self.compression, err) from err
        return pos, taken, at_end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        files = list_files(self.path, self.pattern)
        parts: list[InputPartition] = []
        for i in range(start["file"], min(end["file"] + 1, len(files))):
            lo = start["pos"] if i == start["file"] else 0
            hi = end["pos"] if i == end["file"] else -1
            if i == end["file"] and hi == 0:
                continue
            parts.append(_Range(files[i], lo, hi))
        if end["eoi"] > start["eoi"]:
            parts.append(_EndOfInput())
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, _EndOfInput):
            yield self._batch_of_nulls(1, eoi=True)
            return
        assert isinstance(partition, _Range)
        if self.mode == "parquet":
            yield from self._read_parquet(partition)
        else:
            yield from self._read_lines(partition)

    def _read_lines(self, part: _Range) -> Iterator[pa.RecordBatch]:
        try:
            with open_lines(part.path, self.compression) as f:
                f.seek(part.start)
                data = f.read(max(0, part.end - part.start) if part.end >= 0 else -1)
        except (OSError, EOFError, pa.ArrowException) as err:
            raise _unreadable(part.path, self.compression, err) from err
        lines = [ln.rstrip(b"\r") for ln in data.split(b"\n")]
        lines = [ln for ln in lines if ln.strip()]
        for i in range(0, len(lines), _CHUNK_ROWS):
            chunk = lines[i : i + _CHUNK_ROWS]
            value = pa.array([ln.decode("utf-8", errors="replace") for ln in chunk], pa.string())
            yield self._with_control(value.cast(self.arrow_schema.field("value").type), len(chunk))

    def _read_parquet(self, part: _Range) -> Iterator[pa.RecordBatch]:
        wanted = [f for f in self.arrow_schema if f.name not in ("_source_time", "_eoi")]
        pf = pq.ParquetFile(part.path)
        present = set(pf.schema_arrow.names)
        offset = 0
        end = part.end if part.end >= 0 else pf.metadata.num_rows
        for batch in pf.iter_batches(
            batch_size=_CHUNK_ROWS, columns=[f.name for f in wanted if f.name in present]
        ):
            lo, hi = max(part.start - offset, 0), min(end - offset, batch.num_rows)
            offset += batch.num_rows
            if hi <= lo:
                continue
            rows = batch.slice(lo, hi - lo)
            arrays = [
                rows.column(f.name).cast(f.type)
                if f.name in present
                else pa.nulls(rows.num_rows, f.type)
                for f in wanted
            ]
            yield self._with_control(arrays, rows.num_rows)

    def _with_control(self, values: pa.Array | list[pa.Array], n: int) -> pa.RecordBatch:
        arrays = values if isinstance(values, list) else [values]
        time_type = self.arrow_schema.field("_source_time").type
        arrays = [*arrays, pa.nulls(n, time_type), pa.array([False] * n, pa.bool_())]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _batch_of_nulls(self, n: int, eoi: bool) -> pa.RecordBatch:
        arrays = [pa.nulls(n, f.type) for f in self.arrow_schema if f.name != "_eoi"]
        arrays.append(pa.array([eoi] * n, pa.bool_()))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)


class BoundedFilesSource(DataSource):
    """Options: ``path`` (a file or a directory), ``mode`` (lines | parquet), ``columns`` (Spark
    DDL of the Parquet columns to read), ``max_records`` (per micro-batch, 0 = no cap),
    ``pattern`` (a regular expression the files' paths under ``path`` match) and
    ``compression`` (of the lines: none | gzip | zstd)."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_files"

    def schema(self) -> str:
        if self.options.get("mode", "lines") == "parquet":
            return f"{self.options['columns']}, {_CONTROL}"
        return f"`value` STRING, {_CONTROL}"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _FileReader(dict(self.options), schema)
