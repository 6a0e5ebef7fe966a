"""``filesystem``: a directory of files, local or on object storage (JSON lines or Parquet)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, ReadContext, WriteContext
from arroyo.connectors.filesystem.options import SINK_OPTIONS, SOURCE_OPTIONS, FilesystemOptions
from arroyo.connectors.storage import configure
from arroyo.formats import FormatOptions, ParquetOptions
from arroyo.program.spec import Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class FilesystemConnector(Connector[FilesystemOptions]):
    """A directory of files: a local path or an object store's (S3, and through Hadoop's own
    connectors GCS and Azure: arroyo.connectors.storage). Source: bounded, reads the files
    present when the pipeline starts, in name order. Sink: exactly once for any reader that
    lists the directory and skips names starting with ``_`` or ``.`` (as Spark and this source
    do): each micro-batch is written into a hidden staging directory and its files then moved
    into place under names of the batch (a rename on local disk, a server-side copy on S3); a
    replayed batch replaces what an attempt cut short moved and a batch already in place is not
    written again. A reader listing while a crashed batch awaits its replay may
    see part of that batch, never a duplicate (arroyo.connectors.filesystem.sink).

    Options as Arroyo names them: a source reads ``source.regex_pattern``'s files (at any depth)
    compressed as ``source.compression`` says; a sink rolls files at ``rolling_policy.*``, names
    them by ``filename.*`` and lays them out by ``partitioning.*``."""

    name = "filesystem"
    description = "Files in a directory, local or on S3 (JSON lines or Parquet)"
    capabilities = Capabilities(
        source=True,
        sink=True,
        lookup=True,
        bounded="always",
        replayable=True,
        delivery="exactly_once",
        needs_format=True,
    )
    options_model = FilesystemOptions
    formats = frozenset({"json", "parquet", "raw_string"})
    default_format = "json"

    def misplaced_options(self, options: FilesystemOptions, role: Role) -> list[str]:
        wrong = SINK_OPTIONS if role != "sink" else SOURCE_OPTIONS
        given = options.model_dump(by_alias=True, exclude_defaults=True)
        return [name for name in wrong if name in given]

    def misplaced_format_options(self, fmt: FormatOptions, role: Role) -> list[str]:
        if role == "sink":
            return []
        # How files are written: a source reads what it finds (source.compression for JSON).
        prefix = "parquet." if isinstance(fmt, ParquetOptions) else "json."
        given = fmt.model_dump(exclude_defaults=True)
        return [prefix + k for k in ("compression", "row_group_size") if k in given]

    def named_columns(self, options: FilesystemOptions) -> list[tuple[str, str]]:
        return [("partitioning.fields", name) for name in options.fields or []]

    def wants_event_time(self, options: FilesystemOptions) -> bool:
        return options.time_pattern is not None

    def read(self, ctx: ReadContext, table: TableSpec, options: FilesystemOptions) -> DataFrame:
        from arroyo.connectors.filesystem.source import read_directory

        configure(ctx.spark, options.location)
        return read_directory(ctx, table, options)

    def read_static(
        self, ctx: ReadContext, table: TableSpec, options: FilesystemOptions
    ) -> DataFrame:
        from arroyo.connectors.filesystem.source import read_directory_whole

        configure(ctx.spark, options.location)
        return read_directory_whole(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: FilesystemOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.filesystem.sink import write_directory

        configure(ctx.spark, options.location)
        return write_directory(ctx, df, table, options)

    def release(self) -> None:
        from arroyo.connectors.filesystem.uploads import abort_cut_short

        abort_cut_short()


__all__ = ["FilesystemConnector", "FilesystemOptions"]
