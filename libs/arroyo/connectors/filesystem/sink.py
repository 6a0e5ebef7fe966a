"""The filesystem sink: each micro-batch written (Parquet, or the table's format as text lines)
into a hidden staging directory, then moved into place under names of its own, so that a
reader listing the directory sees only finished batches, and a replayed batch replaces what an
attempt cut short left instead of adding to it."""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from arroyo.connectors.base import WriteContext
from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.connectors.runtime.file_tables import file_mode
from arroyo.connectors.runtime.sinks import batch_in_flight, consume
from arroyo.formats.codec import encode
from arroyo.program.spec import TableSpec

# Hidden from readers that skip names starting with '_' or '.' (Spark's file sources do).
STAGING_DIR = "_staging"


def write_directory(
    ctx: WriteContext, df: DataFrame, table: TableSpec, options: FilesystemOptions
) -> DataStreamWriter:
    return df.writeStream.foreachBatch(BatchFiles(ctx.state_dir, table, options.path))


class BatchFiles:
    """A foreachBatch function: batch N's files become ``part-<sink>-<N>-<i><suffix>``. The
    last batch moved into place is recorded in the sink's state; a batch at or before it is
    not written again."""

    def __init__(self, state_dir: Path, table: TableSpec, path: str) -> None:
        self.table = table
        self.root = Path(path)
        self.committed_file = state_dir / "committed_batch"
        self.id_file = state_dir / "sink_id"
        self._committed: int | None = None  # read from the state once, then kept here

    @functools.cached_property
    def sink_id(self) -> str:
        """Names of this sink's own (two pipelines may write one directory), kept in its
        state: a pipeline restored elsewhere names its files as before."""
        if not self.id_file.exists():
            _write_atomically(self.id_file, uuid.uuid4().hex[:12])
        return self.id_file.read_text().strip()

    def committed(self) -> int:
        if self._committed is None:
            try:
                self._committed = int(self.committed_file.read_text())
            except FileNotFoundError:
                self._committed = -1
        return self._committed

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if batch_id <= self.committed():
                # Run all the same: a stateful query's batch must run to its end.
                consume(df)
                return
            self._write(df, batch_id)

    def _write(self, df: DataFrame, batch_id: int) -> None:
        sink_id = self.sink_id
        staging = self.root / STAGING_DIR / f"{sink_id}-{batch_id}"
        shutil.rmtree(staging, ignore_errors=True)
        parquet = file_mode(self.table) == "parquet"
        if parquet:
            df.write.parquet(str(staging))
        else:
            encode(df, self.table).write.text(str(staging))
        prefix = f"part-{sink_id}-{batch_id:010d}-"
        # An attempt cut short may have moved some of its files: they go before these come.
        for stale in self.root.glob(f"{prefix}*"):
            stale.unlink()
        written = sorted(
            p for p in staging.iterdir() if p.name.startswith("part-") and _has_rows(p, parquet)
        )
        for i, part in enumerate(written):
            suffix = "".join(part.suffixes)
            os.replace(part, self.root / f"{prefix}{i:05d}{suffix}")
        _write_atomically(self.committed_file, str(batch_id))
        self._committed = batch_id
        shutil.rmtree(staging, ignore_errors=True)


def _has_rows(part: Path, parquet: bool) -> bool:
    """Whether a written file holds rows: a batch without rows (the watermark moved, nothing
    arrived) leaves no file behind."""
    if not parquet:
        return part.stat().st_size > 0
    import pyarrow.parquet as pq

    return bool(pq.read_metadata(part).num_rows)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
