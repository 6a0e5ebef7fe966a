"""The filesystem sink's way on S3: Spark writes each file straight to its final key as a
multipart upload left pending, and the driver completes a batch's uploads when it commits the
batch. No reader sees a file before its batch commits, and nothing is copied: a staged batch's
move into place is a server-side copy of every file on S3.

Spark writes under an S3A "magic" directory, ``__magic_job-<sink>-<batch>/__base/``, hidden
from readers by its leading '_': S3A turns each file created there into an upload to the same
path without the magic part, pending, with its parts recorded beside it (``.pending``).
Spark's files are named by the sink (``arroyo.files.NamedFilesProtocol``: the batch's name,
numbered by the task that wrote it), and the driver completes or aborts the uploads
(``arroyo.files.PendingUploads``).

Spark's first task writes a file even when it has no rows (for a format's schema); the batch
observes its lowest task with rows, and that file's upload is aborted when the first task had
none, so a batch without rows leaves no file, as on local disk."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

PROTOCOL = "arroyo.files.NamedFilesProtocol"
_PROTOCOL_CONF = "spark.sql.sources.commitProtocolClass"
NAME_OPTION = "arroyo.files.name"


def magic_dir(sink_id: str, batch_id: int) -> str:
    """The batch's magic directory, relative to the sink's."""
    return f"__magic_job-{sink_id}-{batch_id}"


class BatchUploads:
    """One batch's uploads under ``magic`` (its URI, ``s3a://...``)."""

    def __init__(self, df: DataFrame, magic: str) -> None:
        self.session = df.sparkSession
        jvm: Any = self.session.sparkContext._jvm
        self._uploads = jvm.arroyo.files.PendingUploads
        self.magic = magic
        self._observed: Observation | None = None
        self._pending: Any = None

    def abort_leftovers(self, directory: str, names: str) -> None:
        """Uploads an attempt of this batch cut short left pending (its files in ``directory``
        all named starting ``names``): aborted, never to appear."""
        self._uploads.abort(self.magic, directory, names)

    def observed(self, frame: DataFrame) -> DataFrame:
        """``frame`` observing its lowest task with rows, to write in place of it."""
        self._observed = Observation()
        return frame.observe(self._observed, F.min(F.spark_partition_id()).alias("first"))

    def write(self, save: Callable[[str], None]) -> None:
        """Runs ``save`` (Spark's write, given the directory to write into) with Spark's
        files named by the sink and left pending."""
        conf = self.session.conf
        before = conf.get(_PROTOCOL_CONF, None)
        # The query's own session (foreachBatch's batch runs in the stream's clone), so the
        # other queries' writes keep Spark's protocol.
        conf.set(_PROTOCOL_CONF, PROTOCOL)
        try:
            save(f"{self.magic}/__base")
        finally:
            if before is None:
                conf.unset(_PROTOCOL_CONF)
            else:
                conf.set(_PROTOCOL_CONF, before)

    def pending(self) -> list[str]:
        """Where the write's uploads go (``s3a://bucket/key``), in name order."""
        self._pending = self._uploads.of(self.magic)
        return sorted(str(uri) for uri in self._pending.destinations())

    def first_task_empty(self) -> bool:
        if self._observed is None:
            return False
        first = self._observed.get.get("first")
        return first is None or int(first) > 0

    def complete(self, dropped: list[str]) -> None:
        """Completes every pending upload but those to ``dropped`` (aborted), together."""
        gateway: Any = self.session.sparkContext._gateway
        array = gateway.new_array(gateway.jvm.java.lang.String, len(dropped))
        for i, uri in enumerate(dropped):
            array[i] = uri
        self._pending.complete(array)


# Writes that failed or were interrupted (a bounded run's end stops the batch in flight), whose
# uploads are aborted again once the run's queries have stopped: Spark's tasks, cancelled with
# the batch, may go on creating theirs after the batch's own abort.
_cut_short: list[tuple[Any, str, str, str]] = []
_cut_short_lock = threading.Lock()
_TASKS_GONE_S = 10.0


def remember_cut_short(batch: BatchUploads, directory: str, names: str) -> None:
    with _cut_short_lock:
        _cut_short.append((batch.session, batch.magic, directory, names))


def abort_cut_short() -> None:
    """Aborts the uploads of the writes cut short in this process (the runner's end, once every
    query has stopped)."""
    with _cut_short_lock:
        cut = list(_cut_short)
        _cut_short.clear()
    if not cut:
        return
    tracker = cut[0][0].sparkContext.statusTracker()
    deadline = time.monotonic() + _TASKS_GONE_S
    while tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    for session, magic, directory, names in cut:
        jvm: Any = session.sparkContext._jvm
        with contextlib.suppress(Exception):
            jvm.arroyo.files.PendingUploads.abort(magic, directory, names)


def sweep(df: DataFrame, directory: str, sink_id: str, committed: int) -> None:
    """Removes the magic directories of the sink's committed batches under ``directory`` that
    a crash left (their removal runs after the batch, in the background)."""
    jvm: Any = df.sparkSession.sparkContext._jvm
    jvm.arroyo.files.PendingUploads.sweep(directory, magic_dir(sink_id, 0)[:-1], committed)
