"""The sink's directory as the driver handles it when it commits a batch: list what Spark staged,
cut it at the rolling size, move it into place and remove what a cut-short attempt left. One
code path for local disk and S3, through pyarrow's file systems; paths are relative to the
sink's directory, with '/' between parts.

A move is a rename on local disk (atomic) and a server-side copy, then a delete, on S3 (each
object appears whole: S3 has no partial objects)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, cast

import pyarrow.fs as pafs

from arroyo.connectors.base import ConnectorError
from arroyo.connectors.storage import Location, StorageError, filesystem


class SinkStore:
    def __init__(self, location: Location) -> None:
        self.location = location
        try:
            self.fs, self.root = filesystem(location)
        except StorageError as err:
            raise ConnectorError(str(err)) from err

    def uri(self, relative: str) -> str:
        """Where Spark writes ``relative``."""
        return self.location.join(relative)

    def _abs(self, relative: str) -> str:
        return posixpath.join(self.root, relative) if relative else self.root

    def exists(self, relative: str) -> bool:
        info = self.fs.get_file_info(self._abs(relative))
        return bool(info.type != pafs.FileType.NotFound)

    def size(self, relative: str) -> int:
        return int(self.fs.get_file_info(self._abs(relative)).size or 0)

    def files(self, relative: str = "", recursive: bool = True) -> list[str]:
        """The files under ``relative``, relative to the sink's directory, in name order."""
        base = self._abs(relative)
        selector = pafs.FileSelector(base, allow_not_found=True, recursive=recursive)
        found = [
            posixpath.relpath(info.path, self.root)
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        ]
        return sorted(found)

    def move(self, source: str, target: str) -> None:
        if self.location.local:
            self.fs.create_dir(posixpath.dirname(self._abs(target)), recursive=True)
        self.fs.move(self._abs(source), self._abs(target))

    def delete(self, relative: str) -> None:
        with suppress(FileNotFoundError):
            self.fs.delete_file(self._abs(relative))

    def delete_dir(self, relative: str) -> None:
        try:
            self.fs.delete_dir(self._abs(relative))
        except FileNotFoundError:
            pass
        except OSError:
            # One bulk delete of everything listed, directory markers included, can fail in
            # part on some S3 servers (a marker deleted before the objects under it): delete
            # the files one by one, then what is left.
            for name in self.files(relative):
                self.delete(name)
            with suppress(FileNotFoundError):
                self.fs.delete_dir(self._abs(relative))

    @contextmanager
    def read(self, relative: str) -> Iterator[IO[bytes]]:
        with self.fs.open_input_file(self._abs(relative)) as f:
            yield cast(IO[bytes], f)

    @contextmanager
    def write(self, relative: str) -> Iterator[IO[bytes]]:
        with self.fs.open_output_stream(self._abs(relative)) as f:
            yield cast(IO[bytes], f)

    def arrow_path(self, relative: str) -> str:
        """``relative`` as pyarrow's readers and writers take it, with ``self.fs``."""
        return self._abs(relative)
