"""``arroyo api``: the REST API and the web UI, over HTTP on ``config.api.port``."""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web

from arroyo.api import create_app, web_root
from arroyo.config import Config
from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.service import Listen, RunningService, serve
from arroyo.store import open_store


def main(config: Config, args: argparse.Namespace) -> int:
    asyncio.run(_serve(config))
    return 0


async def _serve(config: Config) -> None:
    store = await open_store(config.database_url())
    await store.migrate()
    # A cold compiler starts Spark before its first answer.
    compiler = CompilerClient(config.compiler.dial(), timeout_s=120)
    controller = ControllerClient(config.controller.dial())
    app = create_app(
        store,
        compiler,
        controller,
        web_root=web_root(),
        compiler_wait_s=config.api.compiler_wait_s,
    )
    runner = web.AppRunner(app)

    async def startup(running: RunningService) -> None:
        await runner.setup()
        await web.TCPSite(runner, config.api.bind_host, config.api.port).start()

    async def shutdown() -> None:
        await runner.cleanup()
        await compiler.close()
        await controller.close()
        await store.close()

    # The API is HTTP, not gRPC: the bootstrap runs only its admin server.
    await serve(
        "api",
        config,
        listen=Listen(config.api.bind_host, None, config.api.admin_port),
        startup=startup,
        shutdown=shutdown,
    )
