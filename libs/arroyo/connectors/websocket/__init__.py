"""``websocket``: the messages of a WebSocket endpoint as a source."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, ReadContext
from arroyo.connectors.websocket.options import WebsocketOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class WebsocketConnector(Connector[WebsocketOptions]):
    """Source (``source.py``): connects to ``endpoint``, sends the subscription messages, and
    reads each text or binary message as a record in the table's format. Each message is
    written to a spool in the table's state, and Spark's offsets are positions in it, so a
    replayed micro-batch reads exactly what it first read. A connection lost is made again
    with backoff and the subscription messages sent again; what the server sent while nothing
    was connected is lost: at most once, and it cannot replay (messages before the pipeline
    started are never read). Event time: when the message reached the spool.
    """

    name = "websocket"
    description = "WebSocket endpoints"
    capabilities = Capabilities(source=True, needs_format=True, source_time=True)
    options_model = WebsocketOptions
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"

    def sample(self, options: WebsocketOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.runtime.http_source import sample_http
        from arroyo.connectors.websocket.source import WebsocketReader

        return sample_http(WebsocketReader, options, count, timeout_s)

    def read(self, ctx: ReadContext, table: TableSpec, options: WebsocketOptions) -> DataFrame:
        from arroyo.connectors.websocket.source import read_websocket

        return read_websocket(ctx, table, options)


__all__ = ["WebsocketConnector"]
