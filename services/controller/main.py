"""``arroyo controller``."""

from __future__ import annotations

import argparse
import asyncio

from arroyo.config import Config
from arroyo.controller import Controller
from arroyo.service import Listen, RunningService, serve, store_ready
from arroyo.store import Store, open_store
from arroyo.store.secrets import secret_box
from arroyo.tls import load_identity
from arroyo_rpc.v1 import controller_pb2_grpc

from .servicer import ControllerServicer


def main(config: Config, args: argparse.Namespace) -> int:
    asyncio.run(_serve(config))
    return 0


async def _serve(config: Config) -> None:
    store: Store = await open_store(config.database_url(), secrets=secret_box(config))
    await store.migrate()
    controller = Controller(config, store, tls=load_identity(config))

    async def startup(running: RunningService) -> None:
        await controller.start()

    async def shutdown() -> None:
        await controller.close()
        await store.close()

    await serve(
        "controller",
        config,
        listen=Listen.of(config.controller),
        register=lambda server: controller_pb2_grpc.add_ControllerServiceServicer_to_server(
            ControllerServicer(controller), server
        ),
        startup=startup,
        shutdown=shutdown,
        readiness=store_ready(store),
        status=lambda: {"jobs": len(controller.drivers), "nodes": len(controller.nodes.nodes)},
    )
