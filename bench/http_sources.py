"""Events/s of the SSE and WebSocket sources reading a local server that sends as fast as it
can, beside a plain aiohttp client reading the same server alone: for SSE, one that only
splits the stream at blank lines ("client"), and one that reads events, parsing each line's
field as the standard says ("events").

The server is aiohttp in this process (on a thread of its own): on each connection (the
WebSocket one after a subscription message) it sends ``--events`` events, ``{"n": 17}`` each
(SSE: ``data:`` lines, written a thousand events at a time; WebSocket: one text message each),
then holds the connection open. Both sides are timed from the server's first write: the
client to its last event (it does not decode the JSON), the
pipeline to the end of the micro-batch that read the last one (``connector = 'sse'`` or
``'websocket'``, decoded into a column, into a ``blackhole``), in this process's Spark (local,
parallelism 2), as ``arroyo run`` runs one. "with start-up" adds, for the pipeline, the time
from planning it to the server's first write (Spark already running). Each pipeline runs once
unmeasured first, on as many events (its tasks' Python workers started, the JIT warm).

    .venv/bin/python bench/http_sources.py [--events 200000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, WSMsgType, web

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import BatchReport, PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.testing.ports import free_port

PARALLELISM = 2
_CHUNK = 1000
_SUBSCRIBE = '{"type": "subscribe"}'


class Server:
    """Sends ``events`` events on each connection; the time of the latest first write."""

    def __init__(self, events: int) -> None:
        self.events = events
        self.port = free_port()
        self.first = 0.0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner: Any = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()

    async def _start(self) -> Any:
        app = web.Application()
        app.router.add_get("/sse", self._sse)
        app.router.add_get("/ws", self._ws)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner

    def url(self, kind: str) -> str:
        scheme = "ws" if kind == "websocket" else "http"
        return f"{scheme}://127.0.0.1:{self.port}/{'ws' if kind == 'websocket' else 'sse'}"

    async def _hold(self) -> None:
        while True:
            await asyncio.sleep(1)

    async def _sse(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.first = time.perf_counter()
        for start in range(0, self.events, _CHUNK):
            stop = min(start + _CHUNK, self.events)
            await response.write(b"".join(b'data: {"n": %d}\n\n' % n for n in range(start, stop)))
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await self._hold()
        return response

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.receive()  # the subscription
        self.first = time.perf_counter()
        for n in range(self.events):
            await ws.send_str(f'{{"n": {n}}}')
        async for _ in ws:
            pass
        return ws

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def client(server: Server, kind: str, parse: bool = False) -> float:
    """Seconds from the first write to the last event read by a plain client. SSE: split at
    blank lines only, or (``parse``) read as events, each line's field parsed as the standard
    says (``data``, ``id``, ``event``; the data lines joined), as a client that hands its
    user events does."""

    async def read() -> float:
        count = 0
        async with ClientSession() as session:
            if kind == "websocket":
                async with session.ws_connect(server.url(kind)) as ws:
                    await ws.send_str(_SUBSCRIBE)
                    async for message in ws:
                        if message.type == WSMsgType.TEXT:
                            count += 1
                            if count == server.events:
                                return time.perf_counter()
            elif parse:
                async with session.get(server.url(kind)) as response:
                    pending, data = b"", list[bytes]()
                    fields: dict[bytes, bytes] = {}
                    received: list[tuple[bytes, bytes | None, bytes]] = []
                    async for chunk in response.content.iter_any():
                        *lines, pending = (pending + chunk).split(b"\n")
                        for raw in lines:
                            line = raw.rstrip(b"\r")
                            if not line:
                                if data:
                                    kind_ = fields.get(b"event", b"message")
                                    received.append((kind_, fields.get(b"id"), b"\n".join(data)))
                                    data = []
                                continue
                            field, _, value = line.partition(b":")
                            value = value[1:] if value.startswith(b" ") else value
                            if field == b"data":
                                data.append(value)
                            elif field in (b"id", b"event"):
                                fields[field] = value
                        if len(received) >= server.events:
                            return time.perf_counter()
                    count = len(received)
            else:
                async with session.get(server.url(kind)) as response:
                    pending = b""
                    async for chunk in response.content.iter_any():
                        *events, pending = (pending + chunk).split(b"\n\n")
                        count += len([e[6:] for e in events if e.startswith(b"data: ")])
                        if count >= server.events:
                            return time.perf_counter()
        raise RuntimeError(f"the stream ended after {count} events")

    done = asyncio.run(read())
    return done - server.first


def pipeline(spark: Any, server: Server, kind: str) -> tuple[float, float]:
    """Seconds from the first write to the end of the batch that read the last event, and
    from planning the pipeline to the first write."""
    subscription = f", subscription_message = '{_SUBSCRIBE}'" if kind == "websocket" else ""
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = '{kind}', "
        f"endpoint = '{server.url(kind)}', format = 'json'{subscription});\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )
    read = [0]
    done = threading.Event()
    ended = [0.0]

    def on_batch(report: BatchReport) -> None:
        read[0] += report.rows_in
        if read[0] >= server.events and not done.is_set():
            ended[0] = time.perf_counter()
            done.set()

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        planned = time.perf_counter()
        program = spark_planner(spark, state_dir=state).plan(sql)
        runner = PipelineRunner(spark, program, state, on_batch=on_batch)
        runner.start()
        waiting = threading.Thread(target=runner.wait, daemon=True)
        waiting.start()
        try:
            if not done.wait(600):
                raise RuntimeError(f"the pipeline read {read[0]} of {server.events} events")
        finally:
            runner.stop(graceful=False)
            waiting.join(60)
    return ended[0] - server.first, server.first - planned


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000, help="events a run")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side")
    args = parser.parse_args()
    spark = get_or_create_session(SessionSettings(parallelism=PARALLELISM))
    server = Server(args.events)
    try:
        for kind in ("sse", "websocket"):
            # Warm-up, unmeasured, as large as the measured runs: a smaller one would start
            # fewer tasks' Python workers, and leave the JIT cold.
            pipeline(spark, server, kind)
        print(f"{'source':<10} {'side':<9} {'seconds':>8} {'events/s':>10} {'with start-up':>14}")
        for kind in ("sse", "websocket"):
            for _ in range(args.repeat):
                seconds = client(server, kind)
                rate = args.events / seconds
                print(f"{kind:<10} {'client':<9} {seconds:>8.2f} {rate:>10.0f}")
                if kind == "sse":
                    seconds = client(server, kind, parse=True)
                    rate = args.events / seconds
                    print(f"{kind:<10} {'events':<9} {seconds:>8.2f} {rate:>10.0f}")
                seconds, startup = pipeline(spark, server, kind)
                rate, total = args.events / seconds, args.events / (seconds + startup)
                print(f"{kind:<10} {'pipeline':<9} {seconds:>8.2f} {rate:>10.0f} {total:>14.0f}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
