"""The HTTP sources' reader (``sse``, ``websocket``, ``polling_http``): a connection on an
asyncio loop of its own writes each message to the table's spool (``runtime/spool.py``), and
Spark's offsets are positions in that spool, so a micro-batch replays exactly what it first
read although the endpoints cannot replay; Spark's micro-batch loop only ever reads the spool,
so a slow or silent endpoint never blocks it.

The buffer is bounded: ``buffer.max_bytes`` of messages spooled and not yet taken by a
micro-batch. (Not "not yet committed": Spark commits a batch's offsets to its source only
when it plans the next batch, which needs new messages; so the spool holds at most the bound
and the batch in flight.) Past the bound, ``buffer.overflow = 'backpressure'`` stops reading
the connection until a micro-batch has taken the buffer (the server's sends block on TCP's
window, a poll is not made), and ``'drop'`` discards each new message and counts it: the
count goes into the spool as a marker record the table's stream filters out and sums into
the observed metric ``overflow:<table>`` (``dropped``), which the runner reports.

A connection lost, refused, or answered with a 5xx (or 408, 429) is tried again, waiting
longer each time (``http.Backoff``); after ``http.GIVE_UP_S`` without a success, or at once
on another 4xx or a message over ``max_message_bytes``, the source stops and the next read
fails the query with the reason (an ``HttpSourceError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import structlog

from arroyo.connectors.runtime.http import GIVE_UP_S, Backoff, HttpSourceError, permanent_status
from arroyo.connectors.runtime.spool import Spool, SpooledReader, read_spooled
from arroyo.formats.arrow_json import carried

if TYPE_CHECKING:
    import aiohttp
    from pyspark.sql import DataFrame
    from pyspark.sql.datasource import DataSource

    from arroyo.connectors.base import ReadContext
    from arroyo.connectors.runtime.http import HttpSourceOptions
    from arroyo.connectors.runtime.loop import Loop
    from arroyo.program.spec import TableSpec

log = structlog.get_logger(__name__)

# The topic of a marker record: the payload is how many messages were dropped before it.
OVERFLOW_TOPIC = "\x00dropped"
_BACKPRESSURE_POLL_S = 0.05
_CONNECT_TIMEOUT_S = 10.0
# The columns of the spooled schema (spool.SPOOLED_SCHEMA), in order.


class TransientError(Exception):
    """A failure that another attempt may mend (a 5xx answer, a connection closed early)."""


@dataclass(frozen=True, slots=True)
class Connection:
    """What one attempt to connect works with: the endpoint's URL and headers (their
    variables substituted), the session, the buffer to fill, the backoff to tell of each
    success."""

    session: aiohttp.ClientSession
    url: str
    headers: dict[str, str]
    buffer: Buffer
    backoff: Backoff


class Buffer:
    """The spool as a connection fills it, bounded by ``buffer.max_bytes`` of what no
    micro-batch has taken. ``put`` runs on the connection's loop, ``flush_dropped`` on
    either thread."""

    def __init__(self, spool: Spool, opts: HttpSourceOptions, reader: HttpSpooledReader) -> None:
        self.spool = spool
        self.limit = opts.buffer_max_bytes
        self.drop = opts.buffer_overflow == "drop"
        self.reader = reader
        self.dropped = 0
        self.lock = threading.Lock()

    def full(self) -> bool:
        return self.spool.end - self.reader.taken >= self.limit

    async def put(self, topic: str, payload: bytes) -> None:
        await self.put_many(topic, [payload])

    async def put_many(self, topic: str, payloads: list[bytes]) -> None:
        """Spools ``payloads`` (of one topic), once there is room: all of them then, though
        they may take the spool past its bound by their own size."""
        if await self._room(len(payloads)):
            # Flushed by the reader before it reads (``HttpSpooledReader.read``).
            self.spool.append_many(topic, int(time.time() * 1000), payloads)

    async def put_lines(self, topic: str, lines: bytes, count: int) -> None:
        """Spools the ``count`` messages ``lines`` holds, one a line, as ``put_many``."""
        if await self._room(count):
            self.spool.append_lines(topic, int(time.time() * 1000), lines)

    async def _room(self, count: int) -> bool:
        """Whether ``count`` messages are to be spooled (else they were dropped, and
        counted), once there is room."""
        if self.full():
            if self.drop:
                with self.lock:
                    self.dropped += count
                return False
            while self.full():
                await asyncio.sleep(_BACKPRESSURE_POLL_S)
        if self.dropped:
            self.flush_dropped()
        return True

    def flush_dropped(self) -> None:
        """Writes the count of messages dropped since the last marker, if any, and there is
        room again (a marker is how the count reaches a micro-batch)."""
        with self.lock:
            if not self.dropped or self.full():
                return
            count, self.dropped = self.dropped, 0
        self.spool.append(OVERFLOW_TOPIC, int(time.time() * 1000), str(count).encode(), flush=False)


class HttpSpooledReader(SpooledReader):
    """A spooled reader whose subscriber is one HTTP connection at a time, made again when it
    ends. Subclasses say how one connection runs (``stream``). Options: ``options`` (the
    table's, as JSON), ``spool``; ``give_up_s`` (tests: sooner than ``http.GIVE_UP_S``)."""

    options_model: ClassVar[type[HttpSourceOptions]]
    # What the errors call the source ("SSE endpoint").
    kind: ClassVar[str]

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = self.options_model.model_validate(json.loads(options["options"]))
        self.give_up_s = float(options.get("give_up_s", GIVE_UP_S))
        # The spool position up to which micro-batches have taken: from the first read on,
        # which sets it (to where the checkpoint starts) before it connects.
        self.taken = 0

    @property
    def where(self) -> str:
        return f"{self.kind} {self.opts.endpoint}"

    @abstractmethod
    async def stream(self, connection: Connection) -> None:
        """One connection: puts each message into its buffer and tells its backoff of each
        success; returns when the server ends it. Raises ``TransientError`` (or aiohttp's
        errors) for what another attempt may mend, ``HttpSourceError`` for what it will not."""

    def resume(self, spool: Spool) -> None:
        """Called once before the first connection: what to take from the spool of an
        earlier run (the last event id an SSE source sends again)."""

    def connect(self, spool: Spool) -> Loop:
        from arroyo.connectors.runtime.loop import Loop

        self.resume(spool)
        loop = Loop()
        buffer = Buffer(spool, self.opts, self)
        loop.buffer = buffer  # type: ignore[attr-defined]

        async def begin() -> asyncio.Task[None]:
            task = asyncio.ensure_future(self._keep_connected(buffer))
            task.add_done_callback(self._ended)
            return task

        loop.task = loop.run(begin(), 10)  # type: ignore[attr-defined]
        return loop

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.fail(task.exception())  # type: ignore[arg-type]

    async def _keep_connected(self, buffer: Buffer) -> None:
        import aiohttp

        try:
            url, headers = self.opts.endpoint_url(), dict(self.opts.header_pairs())
        except ValueError as err:  # a variable that is not set
            raise HttpSourceError(f"{self.where}: {err}") from err
        backoff = Backoff(self.give_up_s)
        timeout = aiohttp.ClientTimeout(total=None, connect=_CONNECT_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            connection = Connection(session, url, headers, buffer, backoff)
            while True:
                try:
                    await self.stream(connection)
                    reason = "the server ended the connection"
                except aiohttp.WSServerHandshakeError as err:
                    reason = self.refused(err.status, err.message)
                except (TransientError, aiohttp.ClientError, TimeoutError) as err:
                    reason = str(err) or type(err).__name__
                now = time.monotonic()
                wait = backoff.failed(now)
                if backoff.give_up(now):
                    raise HttpSourceError(
                        f"{self.where}: still failing after {self.give_up_s:g} s of retrying; "
                        f"last: {reason}"
                    )
                log.warning("http_source_retry", endpoint=self.opts.endpoint, reason=reason)
                await asyncio.sleep(wait)

    def refused(self, status: int, body: str) -> str:
        """An error answer: raises ``HttpSourceError`` for one retrying will not mend, else
        returns what to log."""
        text = f"answered {status}: {body.strip()[:300]}"
        if permanent_status(status):
            raise self.refusal(text)
        return f"{self.where} {text}"

    async def check(self, response: aiohttp.ClientResponse) -> None:
        """Raises for an error answer (``refused``'s way)."""
        if response.status >= 400:
            body = (await response.content.read(4096)).decode("utf-8", "replace")
            raise TransientError(self.refused(response.status, body))

    def refusal(self, what: str) -> HttpSourceError:
        """The error that stops the source for good: ``what`` went wrong, named with it."""
        return HttpSourceError(f"{self.where} {what}")

    def too_large(self, what: str) -> HttpSourceError:
        return self.refusal(
            f"sent {what} larger than max_message_bytes ({self.opts.max_message_bytes} bytes)"
        )

    def before_batch(self, begin: int) -> None:
        if self.client is not None:
            self.client.buffer.flush_dropped()
        else:
            # Before the connection starts: a burst that comes before this batch is planned
            # is bounded by what the checkpoint has taken, not by the spool's end as it grows.
            self.taken = begin

    def latestOffset(self) -> dict[str, int]:
        end = super().latestOffset()
        self.taken = end["pos"]
        return end

    def disconnect(self, client: Loop) -> None:
        task = getattr(client, "task", None)

        async def cancel() -> None:
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

        with contextlib.suppress(Exception):
            client.run(cancel(), timeout=10)
        client.close()


def sample_http(
    reader_type: type[HttpSpooledReader], opts: HttpSourceOptions, count: int, timeout_s: float
) -> list[bytes]:
    """Up to ``count`` of the first messages the source receives in about ``timeout_s``
    (``POST /connection_tables/test``): its own reader, connected as a pipeline's would be,
    spooling into a temporary directory, so nothing a pipeline spooled is touched. Raises
    ``HttpSourceError`` for a failure that retrying will not mend, or that lasts past half of
    ``timeout_s``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arroyo-sample-") as root:
        options = {"options": opts.model_dump_json(by_alias=True), "spool": root}
        reader = reader_type({**options, "give_up_s": str(timeout_s / 2)})
        deadline = time.monotonic() + timeout_s
        try:
            reader.subscribe()
            while True:
                if reader.failure is not None:
                    raise reader.failure
                spool = reader.spool
                found = spool.read(spool.start, spool.flush())
                messages = [payload for topic, _at, payload in found if topic != OVERFLOW_TOPIC]
                if len(messages) >= count or time.monotonic() >= deadline:
                    return messages[:count]
                time.sleep(0.05)
        finally:
            reader.stop()


def last_record(spool: Spool) -> tuple[str, bytes] | None:
    """The last message an earlier run spooled (its topic and payload), if any."""
    last = None
    for topic, _at, payload in spool.read(spool.start, spool.end):
        if topic != OVERFLOW_TOPIC:
            last = (topic, payload)
    return last


def read_http(
    ctx: ReadContext, source: type[DataSource], table: TableSpec, options: str
) -> DataFrame:
    """An HTTP source's stream: ``value``, ``_source_time`` (when the message reached the
    spool), ``_eoi``, ``_meta_topic`` (what the source's topic holds); the overflow markers
    left out, and with ``buffer.overflow = 'drop'`` counted into the metric
    ``overflow:<table>``."""
    from pyspark.sql import functions as F

    df = read_spooled(ctx, source, table, options)
    kept = ["value", "_source_time", "_eoi", "_meta_topic", *carried(df.columns)]
    marker = F.col("_topic") == OVERFLOW_TOPIC
    if json.loads(options).get("buffer.overflow") != "drop":
        # No markers are written now, but a spool an earlier run wrote in drop mode may
        # still hold some: left out, uncounted.
        return df.filter(~marker).select(*kept)
    count = F.when(marker, F.col("value").cast("STRING").cast("BIGINT"))
    df = df.observe(f"overflow:{table.name}", F.coalesce(F.sum(count), F.lit(0)).alias("dropped"))
    return df.filter(~marker).select(*kept)
