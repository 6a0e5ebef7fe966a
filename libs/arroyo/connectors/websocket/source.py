"""The WebSocket source: aiohttp's client, which answers the server's pings itself and pings
a silent server (a peer gone without closing is noticed); the subscription messages sent
after each connection, every text or binary message spooled (``runtime/http_source.py``).
A message over ``max_message_bytes`` (aiohttp's ``max_msg_size``, which closes the
connection with 1009) fails the job naming the option: sent again after a reconnect, it
would fail again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.runtime.http_source import (
    Connection,
    HttpSpooledReader,
    TransientError,
    read_http,
)
from arroyo.connectors.runtime.spool import SpooledSource
from arroyo.connectors.websocket.options import WebsocketOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

# Seconds between pings of a silent server (and as long again for its pong).
_HEARTBEAT_S = 30.0


class WebsocketReader(HttpSpooledReader):
    options_model = WebsocketOptions
    kind = "WebSocket endpoint"

    async def stream(self, connection: Connection) -> None:
        import aiohttp

        assert isinstance(self.opts, WebsocketOptions)
        socket = connection.session.ws_connect(
            connection.url,
            headers=connection.headers,
            max_msg_size=self.opts.max_message_bytes,
            heartbeat=_HEARTBEAT_S,
        )
        async with socket as ws:
            for subscription in self.opts.messages():
                await ws.send_str(subscription)
            async for message in ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    await connection.buffer.put("", message.data.encode())
                elif message.type == aiohttp.WSMsgType.BINARY:
                    await connection.buffer.put("", message.data)
                elif message.type == aiohttp.WSMsgType.ERROR:
                    error = message.data
                    code = getattr(error, "code", None)
                    if code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG:
                        raise self.too_large("a message") from error
                    raise TransientError(f"{self.where}: {error}") from error
                else:
                    continue
                connection.backoff.succeeded()
            if ws.close_code not in (None, aiohttp.WSCloseCode.OK):
                raise TransientError(
                    f"{self.where} closed the connection with code {ws.close_code}"
                )


class WebsocketSource(SpooledSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory)."""

    reader_type = WebsocketReader

    @classmethod
    def name(cls) -> str:
        return "arroyo_websocket"


def read_websocket(ctx: ReadContext, table: TableSpec, opts: WebsocketOptions) -> DataFrame:
    """Each message as ``value``."""
    df = read_http(ctx, WebsocketSource, table, opts.model_dump_json(by_alias=True))
    return df.drop("_meta_topic")
