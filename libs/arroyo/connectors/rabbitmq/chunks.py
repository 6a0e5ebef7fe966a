"""A RabbitMQ stream read a chunk at a time, over rstream's protocol client.

rstream's ``Consumer`` calls back once per message, and that callback is what bounds its reads.
Here a subscription hands over each delivered chunk whole (its first offset, record count,
timestamp and, when asked for, its messages), so that a task turns a chunk into Arrow columns
in one step, and the driver can follow the stream's end by looking at chunk headers alone.

Offsets count records: a chunk of ``num_records`` records starting at ``chunk_first_offset``
ends where the next begins. Messages written as AMQP 1.0 (by every client but a raw-bytes
producer) are read for their body; others are their own bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from arroyo.connectors.rabbitmq.options import RabbitmqConnection, RabbitmqOptions
from arroyo.connectors.runtime.arrow_rows import TIMESTAMP
from arroyo.connectors.runtime.loop import Loop
from arroyo.formats import arrow_json

if TYPE_CHECKING:
    from rstream.client import Client, ClientPool

CONNECT_TIMEOUT_S = 10.0
# How long a task waits for the next chunk of a range the stream has already written.
CHUNK_TIMEOUT_S = 60.0
# Chunks a subscription may have on their way at once.
_CREDIT = 8
# Rows in one record batch a task yields.
_BATCH_ROWS = 131_072
# An AMQP 1.0 message begins with a section's descriptor (0x00, then a small ulong, 0x53).
_AMQP = b"\x00\x53"
SCHEMA = pa.schema(
    [
        ("_offset", pa.int64()),
        ("_source_time", TIMESTAMP),
        ("value", pa.binary()),
        ("_eoi", pa.bool_()),
    ]
)


class RabbitmqError(RuntimeError):
    """A node that cannot be reached or refuses us, or a stream that does not exist."""


def where(conn: RabbitmqConnection) -> str:
    return f"{conn.host}:{conn.port}{conn.virtual_host}"


def _ssl(conn: RabbitmqConnection) -> Any:
    if not conn.tls_enabled:
        return None
    import ssl

    context = ssl.create_default_context(cafile=conn.tls_root_certificates_path)
    if conn.tls_trust_certificates:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if conn.tls_client_certificates_path:
        context.load_cert_chain(conn.tls_client_certificates_path, conn.tls_client_keys_path)
    return context


@dataclass(frozen=True, slots=True)
class Chunk:
    first: int  # the offset of its first record
    records: int
    timestamp_ms: int
    size: int  # bytes of its data
    messages: list[bytes] | None  # None: not asked for

    @property
    def end(self) -> int:
        return self.first + self.records


def body(message: bytes) -> bytes:
    """An AMQP 1.0 message's body (its data sections joined, or its value as text); any other
    message as it is."""
    if not message.startswith(_AMQP):
        return message
    from rstream.amqp import amqp_decoder

    try:
        data = amqp_decoder(message).body
    except Exception:  # bytes that only began like AMQP: they are the message
        return message
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, list) and all(isinstance(d, bytes | bytearray) for d in data):
        return b"".join(bytes(d) for d in data)
    return data.encode() if isinstance(data, str) else str(data).encode()


class Subscription:
    """A subscription to one stream from ``spec`` (an rstream ``OffsetType`` name: ``first``,
    ``last``, ``next``, ``offset`` or ``timestamp``, with ``at`` for the last two), on a loop of
    its own. Each chunk goes to ``on_chunk`` (on the loop's thread) with its messages if
    ``messages``; ``on_lost`` is called if the connection goes. ``credit()`` asks for one more
    chunk; ``auto_credit`` asks for one as each arrives."""

    def __init__(
        self,
        opts: RabbitmqOptions,
        spec: str,
        at: int | None,
        on_chunk: Callable[[Chunk], None],
        *,
        messages: bool,
        auto_credit: bool,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.opts = opts
        self.loop = Loop()
        self._pool: ClientPool | None = None
        self._client: Client | None = None
        self._on_chunk = on_chunk
        self._messages = messages
        self._auto_credit = auto_credit
        self._on_lost = on_lost
        try:
            self.loop.run(self._start(spec, at), CONNECT_TIMEOUT_S + 5)
        except Exception as err:
            self.close()
            reason = str(err) or type(err).__name__
            raise RabbitmqError(
                f"cannot read stream '{opts.stream}' at {where(opts)}: {reason}"
            ) from err

    async def _start(self, spec: str, at: int | None) -> None:
        from rstream import OffsetType, schema
        from rstream.client import Addr, ClientPool

        opts = self.opts
        self._pool = ClientPool(
            opts.host,
            opts.port,
            ssl_context=_ssl(opts),
            vhost=opts.virtual_host,
            username=opts.username,
            password=opts.password,
            frame_max=1024 * 1024,
            heartbeat=60,
            load_balancer_mode=opts.load_balancer_mode,
            max_retries=1,
        )
        locator = await asyncio.wait_for(
            self._pool.get(connection_name="arroyo-locator", locator_request=True),
            CONNECT_TIMEOUT_S,
        )
        if not await locator.stream_exists(opts.stream):
            raise RabbitmqError(f"no stream named '{opts.stream}'")
        leader, replicas = await locator.query_leader_and_replicas(opts.stream)
        broker = random.choice(replicas) if replicas else leader
        client = await asyncio.wait_for(
            self._pool.get(
                connection_name="arroyo",
                addr=Addr(broker.host, broker.port),
                stream=opts.stream,
                connection_closed_handler=self._lost,
            ),
            CONNECT_TIMEOUT_S,
        )
        self._client = client
        client.add_handler(schema.Deliver, self._deliver, name="0")
        # The stream deleted, or its leader or a replica moved: this subscription gets nothing
        # more, so it is lost (as rstream's own consumer treats it), never a silent stall.
        client.add_handler(schema.MetadataUpdate, self._metadata_update, name="0")
        await client.run_queue_listener_task(subscriber_id=0, handler=self._deliver)
        kind = OffsetType[spec.upper()]
        await client.subscribe(
            opts.stream,
            subscription_id=0,
            offset_spec=schema.OffsetSpec.from_params(kind, at),
            initial_credit=_CREDIT,
        )

    async def _lost(self, info: Any) -> None:
        if self._on_lost is not None:
            self._on_lost(f"the connection to {where(self.opts)} was lost ({info.reason})")

    async def _metadata_update(self, frame: Any) -> None:
        if frame.metadata_info.stream == self.opts.stream and self._on_lost is not None:
            self._on_lost(
                f"stream '{self.opts.stream}' changed at {where(self.opts)} (deleted, or its "
                f"leader or a replica moved; code {frame.metadata_info.code})"
            )

    async def _deliver(self, frame: Any) -> None:
        if frame.subscription_id != 0:
            return
        if self._auto_credit:
            await self._client_credit()
        messages = frame.get_messages() if self._messages else None
        self._on_chunk(
            Chunk(
                frame.chunk_first_offset,
                frame.num_records,
                frame.timestamp,
                frame.data_length,
                messages,
            )
        )

    async def _client_credit(self) -> None:
        if self._client is not None:
            await self._client.credit(0, 1)

    def credit(self) -> None:
        asyncio.run_coroutine_threadsafe(self._client_credit(), self.loop.loop)

    def close(self, wait: bool = True) -> None:
        """Closes the connections and stops the loop; ``wait=False``: in the background
        (rstream's close pauses a fifth of a second per connection, which a task need not
        wait for)."""

        loop = self.loop.loop
        if loop.is_closed():
            return

        async def close() -> None:
            with contextlib.suppress(Exception):  # a node that went away
                if self._pool is not None:
                    await self._pool.close()

        done = asyncio.run_coroutine_threadsafe(close(), loop)
        # Stopped once the closing is done, not from within it: the future is completed by a
        # callback the stopped loop would never run.
        done.add_done_callback(lambda _: loop.call_soon_threadsafe(loop.stop))
        if wait:
            with contextlib.suppress(Exception):
                done.result(10)
            self.loop.thread.join(5)


def read_range(
    opts: RabbitmqOptions, begin: int, end: int, decode: arrow_json.Columns | None = None
) -> Iterator[pa.RecordBatch]:
    """The records at offsets ``begin`` to ``end`` (not included), which the stream has
    written, as record batches of ``SCHEMA`` (and, with ``decode``, their JSON decoded into
    its columns: ``arroyo.formats.arrow_json``). Raises if the stream no longer holds them all
    (its retention removed the first) or stops giving them."""
    chunks: queue.Queue[Chunk | str] = queue.Queue()
    sub = Subscription(
        opts, "offset", begin, chunks.put, messages=True, auto_credit=False, on_lost=chunks.put
    )
    what = f"stream '{opts.stream}' at {where(opts)}"
    try:
        at = begin
        rows = _Rows(decode)
        while at < end:
            try:
                chunk = chunks.get(timeout=CHUNK_TIMEOUT_S)
            except queue.Empty:
                raise RabbitmqError(
                    f"{what} did not give offsets {at} to {end - 1} within {CHUNK_TIMEOUT_S:.0f} s"
                ) from None
            if isinstance(chunk, str):
                raise RabbitmqError(f"{what}: {chunk} while reading offsets {at} to {end - 1}")
            sub.credit()
            if chunk.end <= at:
                continue
            if chunk.first > at:
                # Offsets no message has (a chunk of the server's own, offset tracking, takes
                # some), unless retention removed the first of the range.
                if at == begin and _first_offset(opts) > begin:
                    raise RabbitmqError(
                        f"{what} no longer holds offsets {at} to {chunk.first - 1} (its "
                        "retention removed them): the checkpoint counts on them"
                    )
                at = chunk.first
                if at >= end:
                    break
            assert chunk.messages is not None
            rows.add(chunk, at - chunk.first, min(end, chunk.end) - chunk.first)
            at = min(end, chunk.end)
            if rows.count >= _BATCH_ROWS:
                yield rows.batch()
        if rows.count:
            yield rows.batch()
    finally:
        sub.close(wait=False)


def _first_offset(opts: RabbitmqOptions) -> int:
    """The offset of the stream's first message it still holds."""
    tail = Tail(opts, "first", None)
    try:
        if not tail.wait(CONNECT_TIMEOUT_S) or tail.first is None:
            raise RabbitmqError(
                f"stream '{opts.stream}' at {where(opts)} gave no chunk from its first offset"
            )
        return tail.first
    finally:
        tail.close(wait=False)


class _Rows:
    """Columns of ``SCHEMA`` built up chunk by chunk."""

    def __init__(self, decode: arrow_json.Columns | None = None) -> None:
        self.decode = decode
        self.offsets: list[range] = []
        self.times: list[tuple[int, int]] = []  # (microseconds, how many)
        self.values: list[bytes] = []
        self.count = 0

    def _clear(self) -> None:
        self.offsets, self.times, self.values, self.count = [], [], [], 0

    def add(self, chunk: Chunk, lo: int, hi: int) -> None:
        assert chunk.messages is not None
        taken = chunk.messages[lo:hi]
        self.values += [m if not m.startswith(_AMQP) else body(m) for m in taken]
        self.offsets.append(range(chunk.first + lo, chunk.first + hi))
        self.times.append((chunk.timestamp_ms * 1000, hi - lo))
        self.count += hi - lo

    def batch(self) -> pa.RecordBatch:
        import numpy as np

        offsets = np.concatenate([np.arange(r.start, r.stop, dtype=np.int64) for r in self.offsets])
        times = np.concatenate([np.full(n, t, dtype=np.int64) for t, n in self.times])
        batch = pa.record_batch(
            [
                pa.array(offsets),
                pa.array(times).cast(TIMESTAMP),
                pa.array(self.values, pa.binary()),
                pa.array(np.zeros(self.count, dtype=bool)),
            ],
            schema=SCHEMA,
        )
        batch = arrow_json.with_decoded(batch, self.values, self.decode)
        self._clear()
        return batch


class Tail:
    """Follows where the stream ends, on the driver: a subscription from ``spec`` that looks at
    each chunk's header only, never at its messages. ``first`` is the first offset it was
    given (where ``spec`` put it), ``end`` the offset after the last chunk seen."""

    def __init__(self, opts: RabbitmqOptions, spec: str, at: int | None) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Event()
        self.first: int | None = None
        self.end: int | None = None
        self.failure: str | None = None
        self._sub = Subscription(
            opts, spec, at, self._chunk, messages=False, auto_credit=True, on_lost=self._lost
        )

    def _chunk(self, chunk: Chunk) -> None:
        with self._lock:
            if self.first is None:
                self.first = chunk.first
            self.end = max(self.end or 0, chunk.end)
        self._arrived.set()

    def _lost(self, why: str) -> None:
        self.failure = why
        self._arrived.set()

    def wait(self, timeout: float) -> bool:
        """Whether a chunk has come, waiting up to ``timeout`` for the first."""
        return self._arrived.wait(timeout)

    def close(self, wait: bool = True) -> None:
        self._sub.close(wait)


# How far back a sample looks for the newest messages; the pause in their arrival that says
# the subscription has caught up, and how long it waits for a first one once subscribed.
_SAMPLE_WINDOW_S = 3600.0
_SAMPLE_QUIET_S = 0.5
_SAMPLE_FIRST_S = 2.0


def newest_messages(opts: RabbitmqOptions, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the stream's newest messages (of the last hour), read until the
    subscription has caught up (nothing new for half a second; nothing at all for two seconds)
    or ``timeout_s`` has passed. No offset is stored on the server (the source keeps its own in
    checkpoints), so no reader's position moves."""
    import time

    got: list[bytes] = []
    lock = threading.Lock()
    last: list[float] = []

    def on_chunk(chunk: Chunk) -> None:
        with lock:
            got.extend(chunk.messages or [])
            del got[:-count]
            last[:] = [time.monotonic()]

    began = time.monotonic()
    since_ms = int((time.time() - _SAMPLE_WINDOW_S) * 1000)
    sub = Subscription(opts, "timestamp", since_ms, on_chunk, messages=True, auto_credit=True)
    subscribed = time.monotonic()
    try:
        while time.monotonic() < began + timeout_s:
            with lock:
                if last and time.monotonic() - last[0] >= _SAMPLE_QUIET_S:
                    break
                if not last and time.monotonic() - subscribed >= _SAMPLE_FIRST_S:
                    break
            time.sleep(0.05)
    finally:
        sub.close()
    with lock:
        return [body(m) for m in got]
