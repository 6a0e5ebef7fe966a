"""Files of a staged batch cut at the sink's rolling size (``rolling_policy.file_size``): text
lines at a line's end (gzip files by their uncompressed size), Parquet at a row group of the
rows that fit. A piece always holds at least one line or row, so one larger than the size is a
file of its own. A file without rows gives no piece: a batch without rows leaves no file.
Files are read and written through the sink's store (local disk or S3), relative to it."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator

from arroyo.connectors.filesystem.store import SinkStore


def split_file(store: SinkStore, part: str, parquet: bool, max_bytes: int | None) -> list[str]:
    """The pieces of ``part`` (``part`` itself when it fits), written beside it."""
    if parquet:
        return _split_parquet(store, part, max_bytes)
    size = store.size(part)
    if size == 0:
        return []
    zipped = part.endswith(".gz")
    if zipped:
        with store.read(part) as f:
            if not gzip.GzipFile(fileobj=f).read(1):  # an empty stream still has a header
                return []
    if max_bytes is None or (not zipped and size <= max_bytes):
        return [part]
    with store.read(part) as f:
        raw = f.read()
    data = gzip.decompress(raw) if zipped else raw
    if len(data) <= max_bytes:
        return [part]
    pieces = []
    for n, chunk in enumerate(_chunks(data, max_bytes)):
        piece = f"{part}.{n:05d}"
        with store.write(piece) as out:
            out.write(gzip.compress(chunk) if zipped else chunk)
        pieces.append(piece)
    store.delete(part)
    return pieces


def _chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        end = start + max_bytes
        if end < len(data):
            cut = data.rfind(b"\n", start, end)
            end = cut + 1 if cut >= start else data.find(b"\n", end) + 1 or len(data)
        yield data[start:end]
        start = end


def _split_parquet(store: SinkStore, part: str, max_bytes: int | None) -> list[str]:
    import pyarrow.parquet as pq

    with store.read(part) as f:
        meta = pq.read_metadata(f)
    if meta.num_rows == 0:
        return []
    size = store.size(part)
    if max_bytes is None or size <= max_bytes:
        return [part]
    with store.read(part) as f:
        table = pq.read_table(io.BytesIO(f.read()))
    codec = meta.row_group(0).column(0).compression.lower() if meta.num_columns else "none"
    compression = "none" if codec == "uncompressed" else codec.removesuffix("_raw")
    rows = max(1, meta.num_rows * max_bytes // size)
    # The row groups Spark cut (parquet.row_group_size), as rows.
    group_rows = meta.row_group(0).num_rows
    pieces = []
    for n, start in enumerate(range(0, meta.num_rows, rows)):
        piece = f"{part}.{n:05d}"
        with store.write(piece) as out:
            pq.write_table(
                table.slice(start, rows), out, compression=compression, row_group_size=group_rows
            )
        pieces.append(piece)
    store.delete(part)
    return pieces
