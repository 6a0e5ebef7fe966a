"""Feeds for tests of the HTTP sources, served by aiohttp on 127.0.0.1 (``serve``): ``/sse``,
an event stream of ``{"id": n}`` for n = 0 .. EVENTS - 1 (each with its id), then kept open;
``/ws``, the same over a WebSocket once the client sends ``subscribe``; ``/poll``, one JSON
document (``POLLED``); anything else answers 404 ``no such feed``."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

POLLED = {"id": 7, "name": "polled"}
EVENTS = 100


async def _held_open() -> None:
    """Until the server shuts the connection down (the handler is cancelled)."""
    await asyncio.Event().wait()


async def _feed(request: web.Request) -> web.StreamResponse:
    kind = request.match_info["kind"]
    if kind == "sse":
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n in range(EVENTS):
            await response.write(f"id: {n}\ndata: {json.dumps({'id': n})}\n\n".encode())
        await _held_open()
        return response
    if kind == "ws":
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        if (await ws.receive_str(timeout=10)) == "subscribe":
            for n in range(EVENTS):
                await ws.send_str(json.dumps({"id": n}))
            async for _ in ws:  # until closed, answering pings
                pass
        return ws
    if kind == "poll":
        return web.json_response(POLLED)
    return web.Response(status=404, text="no such feed")


async def serve(port: int) -> web.AppRunner:
    """The feeds on ``port``, until the runner's ``cleanup``."""
    app = web.Application()
    app.add_routes([web.get("/{kind}", _feed)])
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
