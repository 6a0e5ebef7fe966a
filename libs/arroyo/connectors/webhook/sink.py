"""The webhook sink: each micro-batch's rows, encoded in the table's format, POSTed from the
executors. Each task (a partition of the micro-batch) cuts its rows into batches of
``max_batch_size`` records, or fewer where ``max_batch_interval`` passes first or its rows end,
and keeps up to ``max_inflight`` requests in flight on an event loop of its own: the rows are
read only as fast as requests are answered, so a slow receiver slows the pipeline, never
fills memory. A request that times out, cannot connect or is answered 408, 429 or 5xx is sent
again, backing off from 100 ms to 5 s, ``_ATTEMPTS`` times in all; any other answer of 400 or
more fails the job with the answer's status and body. At least once: a micro-batch replayed
after a crash, or a task Spark runs again, is posted again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arroyo.connectors.base import ConnectorError, WriteContext
from arroyo.connectors.runtime.http import parse_headers, substitute
from arroyo.connectors.webhook.options import WebhookOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    import aiohttp
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.streaming.readwriter import DataStreamWriter

_ATTEMPTS = 10
_BACKOFF_S = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0)
_RETRIED_STATUSES = frozenset({408, 429})
# The most of a refusing answer's body a job's error carries.
_BODY_CHARS = 1_000
_CONTENT_TYPES = {
    "json": "application/json",
    "raw_string": "text/plain; charset=utf-8",
    "raw_bytes": "application/octet-stream",
}


class WebhookSendError(RuntimeError):
    """A batch the endpoint refused (4xx), or that could not be sent in ``_ATTEMPTS`` tries:
    names the sink, the endpoint and its answer."""


def request_body(records: list[bytes], fmt: str, batched: bool) -> bytes:
    """One request's body: the record itself where each request holds one (``batched``
    false), else a JSON array of the records (json) or their lines (the other formats)."""
    if not batched:
        return records[0]
    if fmt == "json":
        return b"[" + b",".join(records) + b"]"
    return b"\n".join(records)


@dataclass(frozen=True)
class PartitionPoster:
    """Posts one partition's encoded rows (a ``value`` column) to ``url`` with ``headers``
    (their variables substituted on the driver); pickled to the executors."""

    sink: str
    url: str
    headers: dict[str, str]
    options: WebhookOptions
    fmt: str

    def __call__(self, rows: Iterator[Row]) -> None:
        poster = _Poster(self)
        try:
            poster.post_all(rows)
        finally:
            poster.close()


class _Poster:
    """One task's requests: an event loop in a thread of its own, fed batches by the task's
    thread, which waits while ``max_inflight`` requests are unanswered."""

    def __init__(self, task: PartitionPoster) -> None:
        self.sink = task.sink
        self.url = task.url
        self.headers = task.headers
        self.options = options = task.options
        self.fmt = task.fmt
        self.slots = threading.BoundedSemaphore(options.max_inflight)
        self.pending: set[concurrent.futures.Future[None]] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name=f"webhook-{self.sink}", daemon=True
        )
        self.thread.start()
        self.session: aiohttp.ClientSession = self._on_loop(self._session())

    async def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.options.max_inflight)
        return aiohttp.ClientSession(connector=connector, headers=self.headers)

    def _on_loop(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def post_all(self, rows: Iterator[Row]) -> None:
        opts = self.options
        interval = opts.batch_interval_s()
        records: list[bytes] = []
        first_at = 0.0
        for row in rows:
            value = row["value"]
            if value is None:
                continue
            if not records:
                first_at = time.monotonic()
            records.append(value.encode() if isinstance(value, str) else bytes(value))
            if len(records) >= opts.max_batch_size or time.monotonic() - first_at >= interval:
                self._submit(records)
                records = []
        if records:
            self._submit(records)
        self._wait(concurrent.futures.ALL_COMPLETED)

    def _submit(self, records: list[bytes]) -> None:
        body = request_body(records, self.fmt, self.options.max_batch_size > 1)
        self.slots.acquire()
        self._wait(concurrent.futures.FIRST_EXCEPTION, timeout=0)
        future = asyncio.run_coroutine_threadsafe(self._post(body), self.loop)
        self.pending.add(future)
        future.add_done_callback(lambda _: self.slots.release())

    def _wait(self, until: str, timeout: float | None = None) -> None:
        """Raise the error of a request that failed; with ALL_COMPLETED, after waiting for
        every request."""
        done, self.pending = concurrent.futures.wait(
            self.pending, timeout=timeout, return_when=until
        )
        for future in done:
            err = future.exception()
            if err is not None:
                raise err

    async def _post(self, body: bytes) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.options.request_timeout_s())
        # The endpoint as written: {{ VAR }}s in it (a token, say) stay out of errors.
        where = f"webhook sink '{self.sink}': {self.options.endpoint}"
        last = ""
        for attempt in range(_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_BACKOFF_S[min(attempt - 1, len(_BACKOFF_S) - 1)])
            try:
                async with self.session.post(self.url, data=body, timeout=timeout) as answer:
                    if answer.status < 400:
                        return
                    text = (await answer.text(errors="replace"))[:_BODY_CHARS]
                    last = f"answered {answer.status} {answer.reason}: {text}"
                    if answer.status < 500 and answer.status not in _RETRIED_STATUSES:
                        raise WebhookSendError(f"{where} {last}")
            except TimeoutError:
                last = f"did not answer within {self.options.request_timeout}"
            except aiohttp.ClientError as err:
                last = f"could not be reached: {err}"
        raise WebhookSendError(f"{where} failed {_ATTEMPTS} times, the last: {last}")

    def close(self) -> None:
        for future in self.pending:
            future.cancel()
        self._on_loop(self.session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def write_webhook(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: WebhookOptions
) -> DataStreamWriter:
    from arroyo.connectors.runtime.sinks import write_partitions
    from arroyo.formats.codec import encode

    fmt = table.format.name if table.format is not None else "json"
    headers = {"Content-Type": _CONTENT_TYPES.get(fmt, "application/octet-stream")}
    try:
        url = substitute(opts.endpoint)
        headers.update(parse_headers(substitute(opts.headers or "")))
    except ValueError as err:
        raise ConnectorError(f"webhook sink '{table.name}': {err}") from err
    poster = PartitionPoster(table.name, url, headers, opts, fmt)
    return write_partitions(encode(df, table), poster)
