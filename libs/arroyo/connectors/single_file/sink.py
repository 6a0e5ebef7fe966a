"""The single_file sink: encoded records appended to the file from the driver, once per batch
id (the commit log records each batch's id and the file's length after it)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from arroyo.connectors.base import WriteContext
from arroyo.connectors.runtime.sinks import BatchCommitLog
from arroyo.connectors.single_file.options import SingleFileOptions


class FileAppender:
    """Appends one line per record to a single file (a LineWriter). A batch the log holds is
    committed; a batch cut short by a crash is cut back to the logged length and written
    again."""

    def __init__(self, path: str, log: BatchCommitLog) -> None:
        self.path = path
        self.log = log

    def committed(self, batch_id: int) -> bool:
        return batch_id <= self.log.read()[0]

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        _, length = self.log.read()
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        mode = "r+b" if os.path.exists(self.path) else "wb"
        with open(self.path, mode) as f:
            f.truncate(length)
            f.seek(length)
            for line in lines:
                f.write(line)
            f.flush()
            os.fsync(f.fileno())
            length = f.tell()
        self.log.write(batch_id, length)


def file_appender(ctx: WriteContext, options: SingleFileOptions) -> FileAppender:
    """The sink's writer, its commit log in the sink's state."""
    return FileAppender(options.path, BatchCommitLog(ctx.state_dir / "committed.json"))
