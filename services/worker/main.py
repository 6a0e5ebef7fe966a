"""``arroyo worker``: started by a node, one per job run."""

from __future__ import annotations

import argparse
import asyncio
import json
import select
import sys
from typing import TYPE_CHECKING, TextIO

from arroyo.config import Config
from arroyo.rpc import ControllerClient
from arroyo.service import Listen, RunningService, serve
from arroyo.tls import load_identity
from arroyo.worker import WorkerIdentity, WorkerRuntime
from arroyo_rpc.v1 import worker_pb2_grpc

from .servicer import WorkerServicer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def main(config: Config, args: argparse.Namespace) -> int:
    from arroyo.engine.session import SessionSettings, get_or_create_session

    # No parent-death signal: a worker with a job outlives its node (killed -9 and restarted,
    # the node adopts it again: arroyo.node.records); a warm one ends on EOF below.

    # Before any gRPC thread exists: PySpark forks the JVM's launcher with a preexec_fn, which
    # can deadlock in a process whose other threads hold locks at the fork.
    spark = get_or_create_session(
        SessionSettings(
            master=config.worker.spark_master,
            parallelism=max(1, args.slots),
            driver_memory=config.worker.driver_memory,
            java_options=config.worker.jvm_options,
            app_name=f"arroyo-{args.worker_id}",
        )
    )
    if args.warm:
        # A warm worker: Spark is up and has run a first pipeline; wait for the node to hand
        # over a job (EOF: the node went).
        from arroyo.engine.warmup import run_sample

        if not _assignment_waiting(sys.stdin):
            run_sample(spark)
        line = sys.stdin.readline()
        if not line:
            return 0
        assignment = json.loads(line)
        args.job_id, args.generation = assignment["job_id"], int(assignment["generation"])
    return asyncio.run(_serve(config, args, spark))


def _assignment_waiting(node: TextIO) -> bool:
    """Whether the node has already handed over a job (or gone: EOF) while Spark started. Then
    the job waits for no warm-up run: a worker started to replace a lost one is often assigned
    before its session is up, and its warm-up run would be on the recovery's clock."""
    readable, _, _ = select.select([node], [], [], 0)
    return bool(readable)


async def _serve(config: Config, args: argparse.Namespace, spark: SparkSession) -> int:
    """Serve until the run is over; the exit code is non-zero when the worker fenced itself."""
    identity = WorkerIdentity(
        args.job_id, args.generation, args.worker_id, args.node_id, args.slots
    )
    controller = ControllerClient(args.controller, tls=load_identity(config))
    runtime: list[WorkerRuntime] = []
    servicer = WorkerServicer()

    async def startup(running: RunningService) -> None:
        assert running.grpc_address is not None
        address = running.grpc_address
        if config.worker.advertise_host:
            address = f"{config.worker.advertise_host}:{running.grpc_port}"
        worker = WorkerRuntime(config, identity, controller, address, spark)
        servicer.runtime = worker
        runtime.append(worker)
        await worker.run()

        async def exit_when_done() -> None:
            await worker.done.wait()
            running.request_stop("run over")

        running_tasks.append(asyncio.create_task(exit_when_done()))

    async def shutdown() -> None:
        for worker in runtime:
            await worker.close()
        await controller.close()

    running_tasks: list[asyncio.Task[None]] = []
    await serve(
        "worker",
        config,
        listen=Listen(config.worker.bind_host, 0, 0),
        register=lambda server: worker_pb2_grpc.add_WorkerServiceServicer_to_server(
            servicer, server
        ),
        startup=startup,
        shutdown=shutdown,
        status=lambda: {"job_id": identity.job_id, "generation": identity.generation},
    )
    return runtime[0].exit_code if runtime else 0
