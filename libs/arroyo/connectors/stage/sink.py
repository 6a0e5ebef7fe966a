"""The stage sinks: a query's micro-batches written into a stage whole or not at all, once per
batch id (the writer of rows, and the writer of change records the engine computes)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import DataFrame

from arroyo.connectors.runtime.remote_state import durable
from arroyo.connectors.runtime.sinks import batch_in_flight, consume
from arroyo.connectors.runtime.stage_files import (
    END,
    LINES_FILE,
    WRITTEN_FILE,
    batch_dir,
    consumed,
)


def _handed_on(root: Path, batch_id: int) -> bool:
    """Whether a writer's batch needs no writing: written before a crash (its rows are there,
    or were read), or the input has ended and every row was written (the runner marks it so
    only then; what comes after are end-of-input batches, with no rows)."""
    return batch_dir(root, batch_id).exists() or batch_id <= consumed(root) or (root / END).exists()


class StageWriter:
    """A foreachBatch function writing each batch into the stage at ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if _handed_on(self.root, batch_id):
                consume(df)
                return
            tmp = self.root / f".tmp-{batch_id}"
            shutil.rmtree(tmp, ignore_errors=True)
            df.write.mode("overwrite").parquet(str(tmp))
            os.replace(tmp, batch_dir(self.root, batch_id))
            durable(batch_dir(self.root, batch_id))


class StageLines:
    """A LineWriter putting each batch's change records into the stage at ``root``, as one
    JSON-lines file (the engine computes the records on the driver: arroyo.engine.changelog)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def committed(self, batch_id: int) -> bool:
        return _handed_on(self.root, batch_id)

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        tmp = self.root / f".tmp-{batch_id}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        written = 0
        with open(tmp / LINES_FILE, "wb") as f:
            for line in lines:
                written += f.write(line)
        if not written:
            # No changes (the writer's batches that only move its watermark, every other one
            # of a join's): no batch for the reader, whose query would run one for nothing.
            # The reader's offsets are batch ids it lists, so it takes the gap; a replay of
            # this batch computes no changes again.
            shutil.rmtree(tmp)
            return
        # Their time, kept with them: a directory's own time changes when it is restored
        # from an object store on another machine.
        (tmp / WRITTEN_FILE).write_text(str(time.time_ns() // 1000))
        os.replace(tmp, batch_dir(self.root, batch_id))
        durable(batch_dir(self.root, batch_id))


def mark_ended(root: Path) -> None:
    """The writing query's input has ended: its reader ends after the last batch."""
    (root / END).touch()
    durable(root / END)
