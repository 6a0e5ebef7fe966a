"""The filesystem sink: each micro-batch written (Parquet, or the table's format as text lines)
into a hidden staging directory, then moved into place under names of its own, so that a
reader listing the directory sees only finished batches, and a replayed batch replaces what an
attempt cut short left instead of adding to it.

Files roll at every micro-batch (a checkpoint: exactly once needs it) and, within one, at
``rolling_policy.file_size``; ``rolling_policy.interval`` and ``inactivity_interval`` can only
ask for a file to close sooner than that, so they are met whenever the query's trigger
interval is shorter (it is a second by default). Names are deterministic in the batch and the
file's place in it, so a replay writes the same names.

On local disk (arroyo.connectors.filesystem.store) Spark writes the staging files and the
driver renames them into place. On S3 a move is a server-side copy, so there Spark writes each
file straight to its key as a multipart upload that the driver completes when the batch
commits (arroyo.connectors.filesystem.uploads); only a rolling size, which has the driver cut
the files, or ``uuid`` names, which number the files in order, take the staged way there."""

from __future__ import annotations

import functools
import json
import os
import posixpath
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamWriter

from arroyo.connectors.base import ConnectorError, WriteContext
from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.connectors.filesystem.partitions import partition_levels
from arroyo.connectors.filesystem.rolling import split_file
from arroyo.connectors.filesystem.store import SinkStore
from arroyo.connectors.filesystem.uploads import write_uploads
from arroyo.connectors.runtime.remote_state import write_durably
from arroyo.connectors.runtime.sinks import batch_in_flight, consume, error_summary, sink_id
from arroyo.errors import ArroyoError
from arroyo.formats import JsonOptions, ParquetOptions, parse_format_options
from arroyo.formats.codec import encode
from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import TableSpec

# Hidden from readers that skip names starting with '_' or '.' (Spark's file sources do).
STAGING_DIR = "_staging"
# The column holding each row's partition directory while the batch is staged.
_PARTITION = "__arroyo_partition"


def write_directory(
    ctx: WriteContext, df: DataFrame, table: TableSpec, options: FilesystemOptions
) -> DataStreamWriter:
    files = BatchFiles(ctx.state_dir, table, options)
    if not files.uploads:
        return df.writeStream.foreachBatch(files)
    frame, partition, write_options = files.prepare(df)
    return write_uploads(
        frame,
        ctx.state_dir,
        partition,
        write_options,
        {
            "path": files.store.uri(""),
            "sink": files.sink_id,
            "name": files.name("{batch}", "{n}"),
            # The default names hold the sink's id: only its own attempts can have taken them.
            "own_names": str(options.strategy is None).lower(),
            "strategy": options.strategy or "",
            "format": "parquet" if files.parquet else "text",
            "table": table.name,
            "where": files.store.location.describe(),
        },
    )


class BatchFiles:
    """A foreachBatch function: batch N's files are named (by default)
    ``part-<sink>-<N>-<i><suffix>``, under their partition's directory. The last batch moved
    into place is recorded in the sink's state; a batch at or before it is not written
    again, and the files a batch is about to place are listed there first, so that a replay
    removes them before it places its own."""

    def __init__(self, state_dir: Path, table: TableSpec, options: FilesystemOptions) -> None:
        self.table = table
        self.options = options
        self.store = SinkStore(options.location)
        self.committed_file = state_dir / "committed_batch"
        self.state_dir = state_dir
        self.placing_file = state_dir / "placing.json"
        self._committed: int | None = None  # read from the state once, then kept here
        self._attempted: set[int] = set()  # the batches this process began to upload
        spec = table.format
        fmt = parse_format_options(spec.name, spec.options) if spec is not None else None
        self.parquet = isinstance(fmt, ParquetOptions)
        self.format_options = fmt
        self.gzip = isinstance(fmt, JsonOptions) and fmt.compression == "gzip"

    @functools.cached_property
    def sink_id(self) -> str:
        """Names of this sink's own (two pipelines may write one directory), kept in its
        state: a pipeline restored elsewhere names its files as before."""
        return sink_id(self.state_dir)

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
                # Run all the same: a stateful query's batch must run to its end. A crash
                # after the batch was recorded, before its staging went, left that behind.
                consume(df)
                self.store.delete_dir(f"{STAGING_DIR}/{self.sink_id}-{batch_id}")
                return
            try:
                self._write(df, batch_id)
            except ArroyoError:
                raise  # named already (the sink's own errors, its state's store)
            except Exception as err:
                # Spark's or the store's error, with where the files were going: an object
                # store's message names neither the endpoint nor, often, the bucket.
                raise ConnectorError(
                    f"sink '{self.table.name}': cannot write batch {batch_id} to "
                    f"{self.store.location.describe()}: {error_summary(err)}"
                ) from err

    @functools.cached_property
    def uploads(self) -> bool:
        """Whether batches go to S3 as pending uploads (``uploads``) rather than staged and
        moved: where every name is known before the files are (not ``uuid``, which numbers a
        batch's files in order) and no rolling size has the driver cut them."""
        location = self.store.location
        return (
            location.scheme == "s3"
            and self.options.strategy != "uuid"
            and self.options.file_size is None
        )

    def _write(self, df: DataFrame, batch_id: int) -> None:
        staging = f"{STAGING_DIR}/{self.sink_id}-{batch_id}"
        store = self.store
        store.delete_dir(staging)
        self._stage(df, store.uri(staging))
        self._remove_placed(batch_id)
        moves = self._placements(staging, batch_id)
        self._refuse_taken([target for _, target in moves])
        self._placing(batch_id, [target for _, target in moves])
        if store.location.local or len(moves) < 2:
            for source, target in moves:
                store.move(source, target)
        else:
            # On S3 a move is a server-side copy: the copies of a batch's files go together.
            with ThreadPoolExecutor(max_workers=min(8, len(moves))) as pool:
                list(pool.map(lambda m: store.move(*m), moves))
        self._commit(batch_id)
        store.delete_dir(staging)

    def _refuse_taken(self, targets: list[str]) -> None:
        taken = [target for target in targets if self.store.exists(target)]
        if taken:
            # Not this sink's (its own were removed above): another pipeline's, or a run's
            # before this one started afresh. Replacing it would lose that data.
            raise ConnectorError(
                f"sink '{self.table.name}': {self.store.uri(taken[0])} exists and is not this "
                f"pipeline's (filename.strategy = '{self.options.strategy}' names files by "
                "batch alone; write to a fresh path or use the default names or 'uuid')"
            )

    def _placing(self, batch_id: int, targets: list[str]) -> None:
        """The files the batch is about to place, recorded first: a replay removes them."""
        write_durably(
            self.placing_file, json.dumps({"batch": batch_id, "files": targets, "rel": 1})
        )

    def _commit(self, batch_id: int) -> None:
        write_durably(self.committed_file, str(batch_id))
        self._committed = batch_id

    def prepare(self, df: DataFrame) -> tuple[DataFrame, list[str], dict[str, str]]:
        """The rows to write (one column per partition level added, a text format's encoded),
        the partition columns, and the file format's write options."""
        opts = self.options
        frame = df
        partition: list[str] = []
        if opts.partitioned:
            # One column per directory level: Spark writes each as a directory of its own,
            # escaped, and a level's name stays within the file system's limit.
            for i, level in enumerate(partition_levels(opts.time_pattern, opts.fields)):
                partition.append(f"{_PARTITION}{i}")
                frame = frame.withColumn(partition[-1], level)
            if opts.shuffle_by_partition:
                frame = frame.repartition(*partition)
        if EVENT_TIME in frame.columns:  # there for the time pattern only
            frame = frame.drop(EVENT_TIME)
        write_options: dict[str, str] = {}
        if self.parquet:
            fmt = self.format_options
            assert isinstance(fmt, ParquetOptions)
            write_options["compression"] = fmt.compression
            if fmt.row_group_size is not None:
                write_options["parquet.block.size"] = str(fmt.row_group_size)
        else:
            frame = encode(frame, self.table, beside=partition)
            if self.gzip:
                write_options["compression"] = "gzip"
        return frame, partition, write_options

    def _stage(self, df: DataFrame, staging: str) -> None:
        """The batch's rows as files under ``staging`` (one directory per partition)."""
        frame, partition, options = self.prepare(df)
        writer = frame.write.options(**options)
        if partition:
            writer = writer.partitionBy(*partition)
        # Staging is the sink's own hidden directory, placed from only once Spark's write has
        # returned: tasks commit straight into it (algorithm 2) rather than into a job
        # directory renamed again at job commit, which on S3 is one copy of every file less,
        # and no _SUCCESS marker is written.
        writer = writer.option("mapreduce.fileoutputcommitter.algorithm.version", "2").option(
            "mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"
        )
        if self.parquet:
            writer.parquet(staging)
        else:
            writer.text(staging)

    def _placements(self, staging: str, batch_id: int) -> list[tuple[str, str]]:
        """Where each staged file goes: its partition's directory, split at the rolling
        size, under the names of the batch; files without rows are left behind."""
        moves: list[tuple[str, str]] = []
        staged = [f for f in self.store.files(staging) if posixpath.basename(f).startswith("part-")]
        index = 0
        for part in staged:
            within = posixpath.relpath(posixpath.dirname(part), staging)
            directory = _partition_dir("" if within == "." else within)
            for piece in split_file(self.store, part, self.parquet, self.options.file_size):
                name = self.name(batch_id, index)
                moves.append((piece, f"{directory}/{name}" if directory else name))
                index += 1
        return moves

    def name(self, batch_id: int | str, index: int | str) -> str:
        """A file's name (``batch_id`` and ``index`` may be placeholders, but not for
        ``uuid``): ``filename.prefix`` (default ``part``), then by the strategy the
        sink's id, the batch and the file's number (default), the batch and the number
        (``serial``), or a UUID made from all three (``uuid``); then ``filename.suffix`` or
        the format's."""
        opts = self.options
        suffix = opts.suffix if opts.suffix is not None else self._suffix()
        if opts.strategy == "uuid":
            name = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.sink_id}/{batch_id}/{index}"))
            return f"{opts.prefix}-{name}{suffix}" if opts.prefix else f"{name}{suffix}"
        prefix = opts.prefix or "part"
        number = f"{index:05d}" if isinstance(index, int) else index
        batch = f"{batch_id:010d}" if isinstance(batch_id, int) else batch_id
        if opts.strategy == "serial":
            return f"{prefix}-{batch}-{number}{suffix}"
        return f"{prefix}-{self.sink_id}-{batch}-{number}{suffix}"

    def _suffix(self) -> str:
        if self.parquet:
            return ".parquet"
        name = self.table.format.name if self.table.format else "json"
        base = ".json" if name in ("json", "debezium_json") else ".txt"
        return f"{base}.gz" if self.gzip else base

    def _remove_placed(self, batch_id: int) -> None:
        """Files an attempt of this batch cut short placed: they go before the replay's
        come (the replay may split its rows into fewer files)."""
        try:
            placing = json.loads(self.placing_file.read_text())
        except FileNotFoundError:
            placing = None
        if placing is None:
            # A sink state from before the sink listed them: its names were the default ones
            # (a listing of the directory, once, not at every batch).
            stale = f"part-{self.sink_id}-{batch_id:010d}-"
            for name in self.store.files(recursive=False):
                if name.startswith(stale):
                    self.store.delete(name)
        elif placing["batch"] == batch_id:
            root = os.path.abspath(self.options.path) if self.store.location.local else ""
            for name in placing["files"]:
                # Before "rel", the state listed local files by their absolute paths.
                relative = name if placing.get("rel") else os.path.relpath(name, root)
                self.store.delete(relative)


def _partition_dir(staged: str) -> str:
    """The partition directory of a file Spark staged under ``__arroyo_partition0=<escaped>/
    __arroyo_partition1=...``: the levels' values unescaped, with no part that climbs out of
    the sink's directory."""
    parts: list[str] = []
    for level in staged.split("/") if staged else []:
        _, _, escaped = level.partition("=")
        value = unquote(escaped)
        if value != "__HIVE_DEFAULT_PARTITION__":  # Spark's name for an empty value
            parts += [p.replace(".", "%2E") if p in (".", "..") else p for p in value.split("/")]
    return "/".join(p for p in parts if p)
