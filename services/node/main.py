"""``arroyo node``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from arroyo.config import Config
from arroyo.node import NodeRuntime
from arroyo.rpc import ControllerClient
from arroyo.service import Listen, Readiness, RunningService, serve
from arroyo.tls import load_identity
from arroyo_rpc.v1 import node_pb2_grpc

from .servicer import NodeServicer


def main(config: Config, args: argparse.Namespace) -> int:
    asyncio.run(_serve(config, args))
    return 0


async def _serve(config: Config, args: argparse.Namespace) -> None:
    # Its workers get the same config (file and environment) and so the same certificate.
    controller = ControllerClient(config.controller.dial(), tls=load_identity(config))
    # Workers run as ``arroyo worker``, with this interpreter (the one that has our packages).
    worker_program = (sys.executable, "-m", "arroyo_cli.main")
    runtime = NodeRuntime(config, controller, "", args.config, worker_program)

    async def startup(running: RunningService) -> None:
        # Registered under the address the server actually bound (the port may be 0).
        assert running.grpc_address is not None
        runtime.address = config.node.address or running.grpc_address
        await runtime.run()

    async def shutdown() -> None:
        await runtime.close()
        await controller.close()

    await serve(
        "node",
        config,
        listen=Listen.of(config.node),
        register=lambda server: node_pb2_grpc.add_NodeServiceServicer_to_server(
            NodeServicer(runtime), server
        ),
        startup=startup,
        shutdown=shutdown,
        readiness=_ready(runtime),
        status=lambda: {
            "node_id": runtime.node_id,
            "free_slots": runtime.free_slots,
            "workers": [
                {
                    "worker_id": w.worker_id,
                    "job_id": w.job_id,
                    "generation": w.generation,
                    "pid": w.process.pid,
                    "adopted": w.adopted,
                }
                for w in runtime.workers.values()
                if w.running
            ],
        },
    )


def _ready(runtime: NodeRuntime) -> Readiness:
    async def check() -> dict[str, str | None]:
        return runtime.readiness()

    return check
