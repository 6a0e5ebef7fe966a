"""A file's lines decompressed, as a lookup table reads them. (Which files a table reads, and the
streaming source that reads them, are our Java: libs/arroyo/java/arroyo/files/
BoundedFilesSource.java.)"""

from __future__ import annotations

import gzip
import io
from typing import BinaryIO

import pyarrow as pa


def open_lines(path: str, compression: str) -> BinaryIO:
    """A file of lines, decompressed (``gzip`` or ``zstd``) where it is compressed."""
    if compression == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if compression == "zstd":
        with pa.input_stream(path, compression="zstd") as stream:
            return io.BytesIO(stream.read())
    return open(path, "rb")
