"""The filesystem sink's way on S3: Spark writes each file straight to its final key as a
multipart upload left pending, and the sink completes a batch's uploads when it commits the
batch. No reader sees a file before its batch commits, and nothing is copied: a staged batch's
move into place is a server-side copy of every file on S3.

The batch runs in the JVM (``arroyo.files.UploadsSink``, a Spark streaming sink that writes
a batch's plan as Spark's own file sink does), so that writing a batch costs what Spark's file
sink costs: a Python function per batch (foreachBatch) costs a sixth of the throughput here
(bench/storage.py). Python prepares the stream (partition columns, the format's encoding) and
the sink's options; the JVM keeps the sink's records in the same files the staged way does.

Spark writes under an S3A "magic" directory, ``__magic_job-<sink>-<batch>/<task attempt>/
__base/``, hidden from readers by its leading '_': S3A turns each file created there into an
upload to the same path without the magic part, pending, with its parts recorded beside it
(``.pending``). Spark's files are named by the sink (``arroyo.files.NamedFilesProtocol``: the
batch's name, numbered by the task that wrote it); the uploads of the task attempts Spark
committed are completed, all others aborted (``arroyo.files.PendingUploads``).

Spark's first task writes a file even when it has no rows (for a format's schema); the write
counts the rows of each file (``arroyo.files.EmptyFiles``) and the uploads of files without
rows are aborted, so a batch without rows leaves no file, as on local disk."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext

from arroyo.connectors.runtime.remote_state import stored_uri

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

SINK = "arroyo.files.UploadsSinkProvider"
# Writes cut short are aborted again at the runner's end, once Spark's tasks are gone.
_TASKS_GONE_MS = 10_000
_used = False


def write_uploads(
    df: DataFrame,
    state_dir: Path,
    partition: list[str],
    write_options: dict[str, str],
    sink_options: dict[str, str],
) -> DataStreamWriter:
    """The stream ``df`` (prepared: ``partition`` columns added, encoded for a text format)
    written by the uploads sink with ``sink_options`` (see ``arroyo.files.UploadsSink``) and
    the file format's ``write_options``, its records kept in ``state_dir``."""
    global _used  # noqa: PLW0603
    _used = True
    state_dir.mkdir(parents=True, exist_ok=True)
    writer = df.writeStream.format(SINK).option("state", str(state_dir.resolve()))
    remote = stored_uri(state_dir)
    if remote is not None:
        writer = writer.option("state.remote", remote)
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    for key, value in write_options.items():
        writer = writer.option(f"write.{key}", value)
    if partition:
        writer = writer.partitionBy(*partition)
    return writer


def abort_cut_short() -> None:
    """Aborts the uploads of the writes cut short in this process (the runner's end, once every
    query has stopped): Spark's cancelled tasks may have started some after their batch's own
    abort."""
    context = SparkContext._active_spark_context
    if not _used or context is None:
        return
    jvm: Any = context._jvm
    with contextlib.suppress(Exception):
        jvm.arroyo.files.UploadsSink.abortCutShort(_TASKS_GONE_MS)
