"""``sse``: a Server-Sent Events (EventSource) stream as a source."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import Capabilities, Connector, ReadContext
from arroyo.connectors.sse.options import SseOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class SseConnector(Connector[SseOptions]):
    """Source (``source.py``): an HTTP GET of ``endpoint`` read as an event stream, the data of
    each event whose type is in ``events`` (all when unset) a message in the table's format.
    Each event is written to a spool in the table's state, and Spark's offsets are positions in
    it, so a replayed micro-batch reads exactly what it first read. A connection lost is made
    again with backoff, sending ``Last-Event-ID`` (across restarts too, from the spool): a
    server that honours it resends what was missed, and then delivery is at least once;
    one that does not loses what it sent while nothing was connected (at most once). The
    stream itself cannot replay: events sent before the pipeline started are never read.
    Event time: when the event reached the spool. Metadata: ``event_type`` and ``event_id``.
    """

    name = "sse"
    description = "Server-Sent Events streams"
    capabilities = Capabilities(source=True, needs_format=True, source_time=True)
    options_model = SseOptions
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "event_type": ("STRING",),
        "event_id": ("STRING",),
    }

    def sample(self, options: SseOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.runtime.http_source import sample_http
        from arroyo.connectors.sse.source import SseReader

        return sample_http(SseReader, options, count, timeout_s)

    def read(self, ctx: ReadContext, table: TableSpec, options: SseOptions) -> DataFrame:
        from arroyo.connectors.sse.source import read_sse

        return read_sse(ctx, table, options)


__all__ = ["SseConnector"]
