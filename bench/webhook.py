"""Requests/s and rows/s of the webhook sink into a local receiver, one record per request
and batched; beside them, a plain aiohttp client posting as many requests, as many at once.

The receiver is an aiohttp server in this process (on a thread of its own) that reads each
body and counts its records; both sides are timed by it, from the first request's arrival to
the last's. The pipeline: ``--events`` rows of a generated stream (``impulse``, all due at
once, so one micro-batch written by two tasks) into a ``webhook`` table of each
``--batch-sizes`` (``max_batch_size``) and ``--inflight`` (``max_inflight``, per task), in this
process's Spark (local, parallelism 2), as ``arroyo run`` runs one. The client: one
connection pool, ``2 * --inflight`` requests in flight (the pipeline's two tasks), each body a
batch of the same size, built before it starts.

    .venv/bin/python bench/webhook.py [--events 20000] [--batch-sizes 1,100,1000]
        [--inflight 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, TCPConnector, web

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.testing.ports import free_port

PARALLELISM = 2


class Receiver:
    """Counts requests and records; the times of the first and last request."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner: Any = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()
        self.reset()

    async def _start(self) -> Any:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/hook", self._hook)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        return runner

    def reset(self) -> None:
        self.requests = self.records = 0
        self.first = self.last = 0.0

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        now = time.perf_counter()
        self.first = self.first or now
        self.last = now
        self.requests += 1
        self.records += body.count(b'"counter"')
        return web.Response(text="ok")

    def wait(self, records: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.records < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.records} of {records} records arrived")
            time.sleep(0.05)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def pipeline(spark: Any, receiver: Receiver, events: int, batch: int, inflight: int) -> None:
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000000000', "
        f"message_count = '{events // PARALLELISM}');\n"
        f"CREATE TABLE out (counter BIGINT) WITH (connector = 'webhook', "
        f"endpoint = '{receiver.url}', max_batch_size = '{batch}', "
        f"max_inflight = '{inflight}');\nINSERT INTO out SELECT counter FROM src;"
    )
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        planner = spark_planner(spark, parallelism=PARALLELISM, state_dir=state)
        runner = PipelineRunner(spark, planner.plan(sql), state)
        runner.start()
        if not runner.wait(timeout=600):
            raise RuntimeError("the pipeline did not finish")


def client(receiver: Receiver, events: int, batch: int, inflight: int) -> None:
    records = [json.dumps({"counter": n}).encode() for n in range(events)]
    bodies = (
        records
        if batch == 1
        else [b"[" + b",".join(records[i : i + batch]) + b"]" for i in range(0, events, batch)]
    )

    async def post_all() -> None:
        slots = asyncio.Semaphore(2 * inflight)
        async with ClientSession(connector=TCPConnector(limit=2 * inflight)) as session:

            async def post(body: bytes) -> None:
                async with slots, session.post(receiver.url, data=body) as answer:
                    answer.raise_for_status()

            await asyncio.gather(*(post(b) for b in bodies))

    asyncio.run(post_all())


def measured(receiver: Receiver, events: int, run: Any) -> tuple[int, float]:
    receiver.reset()
    run()
    receiver.wait(events)
    return receiver.requests, receiver.last - receiver.first


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000, help="rows a case")
    parser.add_argument("--batch-sizes", default="1,100,1000", help="comma-separated")
    parser.add_argument("--inflight", type=int, default=50, help="max_inflight, per task")
    args = parser.parse_args()
    events = args.events - args.events % PARALLELISM
    spark = get_or_create_session(SessionSettings(parallelism=PARALLELISM))
    receiver = Receiver()
    try:
        pipeline(spark, receiver, 2_000, 100, args.inflight)  # warm-up, unmeasured
        print(
            f"{'side':<10} {'batch':>6} {'requests':>9} {'seconds':>8} {'requests/s':>11} "
            f"{'rows/s':>10}"
        )
        for batch in (int(b) for b in args.batch_sizes.split(",") if b):
            sides = {
                "webhook": lambda b=batch: pipeline(spark, receiver, events, b, args.inflight),
                "client": lambda b=batch: client(receiver, events, b, args.inflight),
            }
            for side, run in sides.items():
                requests, seconds = measured(receiver, events, run)
                seconds = max(seconds, 1e-6)
                print(
                    f"{side:<10} {batch:>6} {requests:>9} {seconds:>8.2f} "
                    f"{requests / seconds:>11.0f} {events / seconds:>10.0f}"
                )
    finally:
        receiver.close()


if __name__ == "__main__":
    main()
