"""The SSE source: an HTTP GET of ``text/event-stream``, parsed as the HTML standard's
EventSource does (a leading byte order mark skipped; lines ended by CRLF, LF or CR; ``data``,
``event``, ``id`` and ``retry`` fields; comments), each event's data spooled
(``runtime/http_source.py``) with its type and the last event id. A connection lost is made
again with ``Last-Event-ID``: the id as of the last complete block received (an ``id:``-only
block counts, as the standard says), or, after a restart, that of the last event the spool
holds (blocks without data are not spooled).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from arroyo.connectors.runtime.http_source import (
    Buffer,
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


# The byte order mark a stream may begin with, which the standard says to skip.
_BOM = b"\xef\xbb\xbf"

# An event: its type, the last event id, its data.
Event = tuple[str, str | None, bytes]
# Events of one type and id: their data, one a line when there are more than one, and how many.
Run = tuple[str, str | None, bytes, int]


class EventParser:
    """Server-sent events from the bytes of a stream, fed in chunks as they arrive. An event
    or line longer than ``limit`` bytes raises ``ValueError``.

    ``last_id`` is the id field last read (the standard's last event ID buffer); ``dispatched_id``
    the id as of the last blank line, with or without data (the last event ID string, which a
    reconnection sends as ``Last-Event-ID``): an ``id:`` of an event cut off by a lost
    connection is not sent."""

    def __init__(self, limit: int, last_id: str | None = None) -> None:
        self.limit = limit
        self.pending = b""
        self.started = False  # past the stream's first bytes, and a byte order mark there
        self.data: list[bytes] = []
        self.size = 0
        self.event_type = ""
        self.last_id = last_id
        self.dispatched_id = last_id
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        """The events ``chunk`` completes: (type, last event id, data)."""
        events: list[Event] = []
        for event_type, event_id, data, count in self.runs(chunk):
            if count == 1:
                events.append((event_type, event_id, data))
            else:
                events += [(event_type, event_id, line) for line in data.split(b"\n")]
        return events

    def runs(self, chunk: bytes) -> list[Run]:
        """The events ``chunk`` completes, as ``feed``, each with a count of 1, or several at
        once: a run of events of one ``data:`` line each, what a busy stream mostly is, with
        their data one a line, and their count."""
        data = self.pending + chunk
        self.pending = b""
        if not self.started:
            if len(data) < len(_BOM) and _BOM.startswith(data):
                self.pending = data  # the mark, or not, is known with the next bytes
                return []
            self.started = True
            data = data.removeprefix(_BOM)
        found: list[Run] = []
        if self.data or self.event_type:
            # An event an earlier chunk began: line by line, up to its blank line.
            blank = -1 if data[:1] == b"\n" else data.find(b"\n\n")
            if (blank < 0 and data[:1] != b"\n") or b"\r" in data:
                return [(*event, 1) for event in self._lines(data)]
            end = blank + 2
            found = [(*event, 1) for event in self._lines(data[:end])]
            data = data[end:]
        run, data = self._plain(data)
        if run:
            found.append(run)
        if data:
            found += [(*event, 1) for event in self._lines(data)]
        return found

    def _plain(self, data: bytes) -> tuple[Run | None, bytes]:
        """The events at the start of ``data`` up to its last blank line as one run, if each
        is one ``data: `` line (LF-ended, within the limit), and the rest of ``data``; else
        no run, and all of it. Found with a few passes of bytes methods, not event by event."""
        cut = data.rfind(b"\n\n")
        if cut < 0 or b"\r" in data:
            return None, data
        head = data[:cut]
        blanks = head.count(b"\n\n")
        if (
            not head.startswith(b"data: ")
            or head.count(b"\n") != 2 * blanks  # no line but the data one in any event
            or head.count(b"\n\ndata: ") != blanks  # each event's line its data
        ):
            return None, data
        if len(head) > self.limit and any(len(b) > self.limit for b in head.split(b"\n\n")):
            return None, data
        lines = head[6:].replace(b"\n\ndata: ", b"\n")
        self.dispatched_id = self.last_id
        return ("message", self.last_id, lines, blanks + 1), data[cut + 2 :]

    def _lines(self, data: bytes) -> list[Event]:
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

    def _dispatch(self) -> Event | None:
        data, event_type = self.data, self.event_type or "message"
        self.data, self.size, self.event_type = [], 0, ""
        self.dispatched_id = self.last_id
        if not data:
            return None
        return event_type, self.last_id, b"\n".join(data)


def _type_and_id(run: Run) -> tuple[str, str | None]:
    return run[0], run[1]


async def _spool(buffer: Buffer, topic: str, runs: list[Run]) -> None:
    """``runs`` of one topic into the spool: a run of several events as one record of lines,
    single events a write for those in a row."""
    single: list[bytes] = []
    for _, _, data, count in runs:
        if count == 1:
            single.append(data)
            continue
        if single:
            await buffer.put_many(topic, single)
            single = []
        await buffer.put_lines(topic, data, count)
    if single:
        await buffer.put_many(topic, single)


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
                    runs = parser.runs(chunk)
                except ValueError as err:
                    raise self.too_large(str(err)) from err
                # As of the last blank line: an id-only block moves it too.
                self.last_id = parser.dispatched_id
                if runs:
                    connection.backoff.succeeded()
                # Spooled a run of events of one type and id at a time.
                for (event_type, event_id), same in itertools.groupby(runs, _type_and_id):
                    if wanted and event_type not in wanted:
                        continue
                    topic = (
                        event_type if event_id is None else f"{event_type}{_ID_SEPARATOR}{event_id}"
                    )
                    await _spool(connection.buffer, topic, list(same))
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
