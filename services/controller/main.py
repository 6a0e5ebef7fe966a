"""``arroyo controller``: active while it holds the lease in the database, a standby until then
(``arroyo.controller.lease``). A standby binds no gRPC port; a controller that loses its lease
stops its job drivers at once and exits 1, for its supervisor to start it again as a standby."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from arroyo.config import Config
from arroyo.controller import Controller
from arroyo.controller.lease import ControllerLease, holder_id
from arroyo.service import Listen, RunningService, serve, store_ready
from arroyo.store import Store, open_store
from arroyo.store.secrets import secret_box
from arroyo.tls import load_identity
from arroyo_rpc.v1 import controller_pb2_grpc

from .servicer import ControllerServicer


def main(config: Config, args: argparse.Namespace) -> int:
    return asyncio.run(_serve(config))


async def _serve(config: Config) -> int:
    store: Store = await open_store(config.database_url(), secrets=secret_box(config))
    await store.migrate()
    controller = Controller(config, store, tls=load_identity(config))
    lease = ControllerLease(
        store, config.controller.lease_ttl_s, holder=holder_id(config.controller.port)
    )
    keeping: list[asyncio.Task[None]] = []

    async def standby(running: RunningService) -> None:
        controller.fence = await lease.acquire()

    async def startup(running: RunningService) -> None:
        async def lost(reason: str) -> None:
            # Stop acting now, before a standby can take over; the process then exits.
            await controller.close()
            running.request_stop("lease lost")

        keeping.append(asyncio.create_task(lease.keep(lost), name="lease"))
        # Only now, with the port bound: two controllers under one name (one host, one port)
        # cannot both get here. A report that arrives before this adopts the jobs is refused
        # as for an unknown job; a worker's heartbeat simply comes again.
        await controller.start()

    async def shutdown() -> None:
        for task in keeping:
            if task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await controller.close()
        if lease.lost is None:
            await lease.release()
        await store.close()

    check_store = store_ready(store)

    async def ready() -> dict[str, str | None]:
        return {**lease.readiness(), **await check_store()}

    await serve(
        "controller",
        config,
        listen=Listen.of(config.controller),
        register=lambda server: controller_pb2_grpc.add_ControllerServiceServicer_to_server(
            ControllerServicer(controller), server
        ),
        standby=standby,
        startup=startup,
        shutdown=shutdown,
        readiness=ready,
        status=lambda: {
            "jobs": len(controller.drivers),
            "nodes": len(controller.nodes.nodes),
            **lease.status(),
        },
    )
    return 1 if lease.lost is not None else 0
