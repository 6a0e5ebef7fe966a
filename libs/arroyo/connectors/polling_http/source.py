"""The polling HTTP source: the endpoint requested every ``poll_interval_ms`` (each request
within 5 seconds, as Arroyo's), each successful response's body spooled as one message
(``runtime/http_source.py``; ``framing = 'newline'`` makes each line a record), or under
``emit_behavior = 'changed'`` only a body unlike the one before (after a restart, the last
one spooled). A failed request is made again with backoff, not at the next interval.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from arroyo.connectors.polling_http.options import PollingHttpOptions
from arroyo.connectors.runtime.http_source import (
    Connection,
    HttpSpooledReader,
    last_record,
    read_http,
)
from arroyo.connectors.runtime.spool import Spool, SpooledSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

_REQUEST_TIMEOUT_S = 5.0


class PollingHttpReader(HttpSpooledReader):
    options_model = PollingHttpOptions
    kind = "polled HTTP endpoint"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.last_body: bytes | None = None

    def resume(self, spool: Spool) -> None:
        last = last_record(spool)
        self.last_body = None if last is None else last[1]

    async def stream(self, connection: Connection) -> None:
        assert isinstance(self.opts, PollingHttpOptions)
        interval_s = self.opts.poll_interval_ms / 1000
        while True:
            started = time.monotonic()
            body = await self._poll(connection)
            connection.backoff.succeeded()
            if self.opts.emit_behavior == "all" or body != self.last_body:
                await connection.buffer.put("", body)
                self.last_body = body
            await asyncio.sleep(max(0.0, started + interval_s - time.monotonic()))

    async def _poll(self, connection: Connection) -> bytes:
        import aiohttp

        assert isinstance(self.opts, PollingHttpOptions)
        limit = self.opts.max_message_bytes
        request = connection.session.request(
            self.opts.method,
            connection.url,
            headers=connection.headers,
            data=self.opts.body.encode() if self.opts.body is not None else None,
            timeout=aiohttp.ClientTimeout(total=_REQUEST_TIMEOUT_S),
        )
        async with request as response:
            await self.check(response)
            if (response.content_length or 0) > limit:
                raise self.too_large("a body")
            # The whole body (read(n) gives only what has arrived), and no more than the limit.
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.content.iter_chunked(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise self.too_large("a body")
                chunks.append(chunk)
            return b"".join(chunks)


class PollingHttpSource(SpooledSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory)."""

    reader_type = PollingHttpReader

    @classmethod
    def name(cls) -> str:
        return "arroyo_polling_http"


def read_polling_http(ctx: ReadContext, table: TableSpec, opts: PollingHttpOptions) -> DataFrame:
    """Each response's body as ``value``."""
    df = read_http(ctx, PollingHttpSource, table, opts.model_dump_json(by_alias=True))
    return df.drop("_meta_topic")
