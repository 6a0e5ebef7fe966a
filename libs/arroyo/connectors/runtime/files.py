"""Files as the file connectors list and open them: which files a path holds, in the order they
are read, and their lines decompressed. (The streaming source that reads them is our Java:
libs/arroyo/java/arroyo/files/BoundedFilesSource.java, which lists them the same way.)"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa


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
    """A file of lines, decompressed (``gzip`` or ``zstd``) where it is compressed."""
    if compression == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if compression == "zstd":
        with pa.input_stream(path, compression="zstd") as stream:
            return io.BytesIO(stream.read())
    return open(path, "rb")
