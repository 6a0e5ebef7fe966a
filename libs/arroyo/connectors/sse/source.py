"""The SSE source: an HTTP GET of ``text/event-stream``, parsed as the HTML standard's
EventSource does (lines ended by CRLF, LF or CR; ``data``, ``event``, ``id`` and ``retry``
fields; comments), each event's data spooled (``runtime/http_source.py``) with its type and
the last event id. A connection lost is made again with ``Last-Event-ID``: the id of the
last event received, or, after a restart, of the last event the spool holds.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from arroyo.connectors.runtime.http_source import (
    Connection,
    HttpSpooledReader,
    last_record,
    read_http,
)
from arroyo.connectors.runtime.spool import Spool, SpooledSource
from arroyo.connectors.sse.options import SseOptions
from arroyo.formats.arrow_json import carried

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

# An event's spool topic: its type, then a newline and its id where it has one (neither
# holds a newline).
_ID_SEPARATOR = "\n"


class EventParser:
    """Server-sent events from the bytes of a stream, fed in chunks as they arrive. An event
    or line longer than ``limit`` bytes raises ``ValueError``."""

    def __init__(self, limit: int, last_id: str | None = None) -> None:
        self.limit = limit
        self.pending = b""
        self.data: list[bytes] = []
        self.size = 0
        self.event_type = ""
        self.last_id = last_id
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, str | None, bytes]]:
        """The events ``chunk`` completes: (type, last event id, data)."""
        data = self.pending + chunk
        self.pending = b""
        if not self.data and not self.event_type:
            # What a busy stream mostly is: events of one ``data:`` line each, split at once.
            events, data = self._plain(data)
            if data:
                events += self._lines(data)
            return events
        return self._lines(data)

    def _plain(self, data: bytes) -> tuple[list[tuple[str, str | None, bytes]], bytes]:
        """The events at the start of ``data`` up to its last blank line, if each is one
        ``data:`` line (LF-ended, within the limit), and the rest of ``data``; else none, and
        all of it."""
        cut = data.rfind(b"\n\n")
        if cut < 0 or b"\r" in data:
            return [], data
        blocks = data[:cut].split(b"\n\n")
        if data.count(b"\n", 0, cut) != 2 * (len(blocks) - 1) or not all(
            b[:5] == b"data:" and len(b) <= self.limit for b in blocks
        ):
            return [], data
        last_id = self.last_id
        events = [("message", last_id, b[6:] if b[5:6] == b" " else b[5:]) for b in blocks]
        return events, data[cut + 2 :]

    def _lines(self, data: bytes) -> list[tuple[str, str | None, bytes]]:
        """The events ``data`` completes, line by line."""
        # A CR at the end may be half of a CRLF: held back until the next chunk says.
        hold = b"\r" if data.endswith(b"\r") else b""
        lines = (data[:-1] if hold else data).splitlines(keepends=True)
        self.pending = hold
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            self.pending = lines.pop() + hold
        if len(self.pending) > self.limit:
            raise ValueError("a line")
        events = []
        for raw in lines:
            line = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            if not line:
                if event := self._dispatch():
                    events.append(event)
            elif line[:1] != b":":
                self._field(line)
        return events

    def _field(self, line: bytes) -> None:
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self.data.append(value)
            self.size += len(value) + 1
            if self.size > self.limit:
                raise ValueError("an event")
        elif name == b"event":
            self.event_type = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self.last_id = value.decode("utf-8", "replace") or None
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)

    def _dispatch(self) -> tuple[str, str | None, bytes] | None:
        data, event_type = self.data, self.event_type or "message"
        self.data, self.size, self.event_type = [], 0, ""
        if not data:
            return None
        return event_type, self.last_id, b"\n".join(data)


def _type_and_id(event: tuple[str, str | None, bytes]) -> tuple[str, str | None]:
    return event[0], event[1]


class SseReader(HttpSpooledReader):
    options_model = SseOptions
    kind = "SSE endpoint"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.last_id: str | None = None

    def resume(self, spool: Spool) -> None:
        last = last_record(spool)
        if last is not None and _ID_SEPARATOR in last[0]:
            self.last_id = last[0].split(_ID_SEPARATOR, 1)[1]

    async def stream(self, connection: Connection) -> None:
        import aiohttp

        assert isinstance(self.opts, SseOptions)
        wanted = self.opts.event_types()
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        headers.update(connection.headers)
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        request = connection.session.get(
            connection.url, headers=headers, timeout=aiohttp.ClientTimeout(sock_read=None)
        )
        async with request as response:
            await self.check(response)
            if response.content_type != "text/event-stream":
                raise self.refusal(f"answered with {response.content_type}, not an event stream")
            parser = EventParser(self.opts.max_message_bytes, self.last_id)
            async for chunk in response.content.iter_any():
                try:
                    events = parser.feed(chunk)
                except ValueError as err:
                    raise self.too_large(str(err)) from err
                if events:
                    self.last_id = events[-1][1]
                    connection.backoff.succeeded()
                # Spooled a run of events of one type and id at a time.
                for (event_type, event_id), run in itertools.groupby(events, _type_and_id):
                    if wanted and event_type not in wanted:
                        continue
                    topic = (
                        event_type if event_id is None else f"{event_type}{_ID_SEPARATOR}{event_id}"
                    )
                    await connection.buffer.put_many(topic, [data for _, _, data in run])
                if parser.retry_ms is not None:
                    connection.backoff.first_s = parser.retry_ms / 1000


class SseSource(SpooledSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory)."""

    reader_type = SseReader

    @classmethod
    def name(cls) -> str:
        return "arroyo_sse"


def read_sse(ctx: ReadContext, table: TableSpec, opts: SseOptions) -> DataFrame:
    """Each event's data as ``value``, its type and the last event id as the ``event_type``
    and ``event_id`` metadata."""
    from pyspark.sql import functions as F

    df = read_http(ctx, SseSource, table, opts.model_dump_json(by_alias=True))
    topic = F.col("_meta_topic")
    has_id = F.instr(topic, _ID_SEPARATOR) > 0
    return df.select(
        "value",
        "_source_time",
        "_eoi",
        F.substring_index(topic, _ID_SEPARATOR, 1).alias("_meta_event_type"),
        F.when(has_id, F.substring_index(topic, _ID_SEPARATOR, -1)).alias("_meta_event_id"),
        *carried(df.columns),
    )
