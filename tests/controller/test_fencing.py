"""A job's worker never runs on once the controller has stopped, deleted or lost touch with
its job: the controller refuses a worker its job no longer has (and a heartbeat never gives a
job its worker back), the worker stops on a refusal (stale generation or an unknown job), and
a worker that hears nothing from the controller stops itself before the controller could fail
its job over. Real controller (in-process over gRPC, or its own process), real worker runtime
(no execution: what matters is its conversation with the controller)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from arroyo.config import Config, ControllerConfig, WorkerConfig
from arroyo.controller import Controller
from arroyo.controller.context import JobContext
from arroyo.controller.controller import NotSyncedError, StaleGenerationError
from arroyo.controller.nodes import NodeRegistry
from arroyo.node import NodeRuntime
from arroyo.node.records import WorkerRecord, boot_id, process_start_time
from arroyo.rpc import ControllerClient
from arroyo.store import (
    JobConfig,
    JobState,
    JobStatus,
    StopMode,
    Store,
)
from arroyo.testing.ports import free_port
from arroyo.worker import Phase, WorkerIdentity, WorkerRuntime
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb
from arroyo_rpc.v1 import node_pb2_grpc

# services/ installs as arroyo_services through the editable install's finder, which mypy does
# not follow.
from arroyo_services.node.servicer import (  # type: ignore[import-not-found, unused-ignore]
    NodeServicer,
)
from tests.controller.jobs import GENERATION, JOB, LOST_ADDRESS, PIPELINE, WORKER, running_job
from tests.services import ScriptedWorkerRuntime, controller_service, serving, worker_service
from tests.waiting import eventually


def worker_runtime(controller_address: str, controller_timeout_s: float = 60) -> WorkerRuntime:
    """job_1's worker (generation 4, worker_1), heartbeating every 0.2 s; it fences itself when
    the controller has not answered for ``controller_timeout_s`` less two heartbeats."""
    config = Config(
        controller=ControllerConfig(heartbeat_timeout_s=controller_timeout_s),
        worker=WorkerConfig(heartbeat_interval_s=0.2),
    )
    identity = WorkerIdentity(JOB, GENERATION, WORKER, "node_a", 1)
    client = ControllerClient(controller_address)
    # No execution is started: no SparkSession.
    return WorkerRuntime(config, identity, client, LOST_ADDRESS, cast(Any, None))


@asynccontextmanager
async def in_process_controller(tmp_path: Path, store: Store) -> AsyncIterator[Controller]:
    # The node never registers: the stop's wait for it is this short.
    settings = ControllerConfig(heartbeat_timeout_s=2, poll_interval_s=0.2)
    controller = Controller(Config(data_dir=tmp_path, controller=settings), store)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.close()


async def test_a_stopped_jobs_worker_is_refused_and_stops(tmp_path: Path) -> None:
    store = await running_job(tmp_path)
    async with (
        in_process_controller(tmp_path, store) as controller,
        serving(controller_service(controller)) as served,
    ):
        ctx = controller.drivers[JOB].ctx
        worker = worker_runtime(f"127.0.0.1:{served.grpc_port}")
        await worker.run()
        try:
            # Stopped while the worker cannot be reached: neither its node nor it hears the stop.
            await store.update_job_config(JOB, stop=StopMode.FORCE)
            controller.jobs_changed()

            async def stopped() -> bool:
                return ctx.status.state is JobState.STOPPED

            await eventually("the job stopped", stopped, 30)
            # Its next heartbeat is refused (the job has no worker), and it stops on it.
            await asyncio.wait_for(worker.done.wait(), 10)
            assert worker.exit_code == 0
            # A heartbeat never gives the job its worker back.
            ref = common.JobRef(job_id=JOB, generation=GENERATION, worker_id=WORKER)
            with pytest.raises(StaleGenerationError):
                controller.heartbeat(pb.HeartbeatRequest(job=ref, address=LOST_ADDRESS))
            assert (ctx.status.worker_id, ctx.status.worker_address) == (None, None)
            job = await store.get_job(JOB)
            assert job is not None and job.status.worker_id is None
        finally:
            await worker.close()
            await worker.controller.close()
    await store.close()


async def test_another_worker_of_the_current_generation_is_refused(tmp_path: Path) -> None:
    store = await running_job(tmp_path)
    async with in_process_controller(tmp_path, store) as controller:
        ctx = controller.drivers[JOB].ctx
        other = common.JobRef(job_id=JOB, generation=GENERATION, worker_id="worker_2")
        with pytest.raises(StaleGenerationError):
            controller.heartbeat(pb.HeartbeatRequest(job=other, address="127.0.0.1:2"))
        assert (ctx.status.worker_id, ctx.status.worker_address) == (WORKER, LOST_ADDRESS)
    await store.close()


async def test_a_deleted_jobs_worker_stops_on_not_found(tmp_path: Path) -> None:
    store = await running_job(tmp_path)
    async with (
        in_process_controller(tmp_path, store) as controller,
        serving(controller_service(controller)) as served,
    ):
        worker = worker_runtime(f"127.0.0.1:{served.grpc_port}")
        await worker.run()
        try:
            await store.delete_pipeline(PIPELINE)
            controller.jobs_changed()
            await asyncio.wait_for(worker.done.wait(), 30)
            assert JOB not in controller.drivers
            assert worker.exit_code == 0
        finally:
            await worker.close()
            await worker.controller.close()
    await store.close()


async def test_a_worker_whose_controller_is_gone_stops_itself(tmp_path: Path) -> None:
    """The controller's process paused (SIGSTOP): the worker's heartbeats hang unanswered, and
    it stops itself (exit code non-zero) before the controller's heartbeat timeout."""
    store = await running_job(tmp_path)
    await store.close()
    port, admin_port = free_port(), free_port()
    # Long enough for the controller, started just now, to hear from the worker in time.
    timeout_s = 5.0
    env = {
        **os.environ,
        "ARROYO__DATA_DIR": str(tmp_path),
        "ARROYO__DATABASE__URL": f"sqlite:///{tmp_path / 'arroyo.db'}",
        "ARROYO__CONTROLLER__PORT": str(port),
        "ARROYO__CONTROLLER__ADMIN_PORT": str(admin_port),
        "ARROYO__CONTROLLER__HEARTBEAT_TIMEOUT_S": str(timeout_s),
    }
    with (tmp_path / "controller.log").open("ab") as out:
        controller = subprocess.Popen(
            [sys.executable, "-m", "arroyo_cli.main", "controller"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    worker = worker_runtime(f"127.0.0.1:{port}", controller_timeout_s=timeout_s)
    try:
        assert await worker.controller.connected(60), "the controller did not start"
        # Registered: the controller answers (it retries until the controller has started).
        await asyncio.wait_for(worker.run(), 60)
        assert not worker.done.is_set()
        os.kill(controller.pid, signal.SIGSTOP)
        await asyncio.wait_for(worker.done.wait(), 10 * timeout_s)
        assert worker.exit_code != 0
    finally:
        os.kill(controller.pid, signal.SIGCONT)
        controller.terminate()
        controller.wait(30)
        await worker.close()
        await worker.controller.close()


async def test_a_node_registering_before_the_first_sync_is_asked_to_retry(
    tmp_path: Path,
) -> None:
    """The worker it adopted would otherwise not move: the job is not known yet."""
    store = await running_job(tmp_path)
    settings = ControllerConfig(heartbeat_timeout_s=30)
    controller = Controller(Config(data_dir=tmp_path, controller=settings), store)
    adopted = pb.NodeWorker(worker_id=WORKER, job_id=JOB, generation=GENERATION, slots=1)
    request = pb.RegisterNodeRequest(
        node_id="node_b", address="127.0.0.1:5118", task_slots=4, workers=[adopted]
    )
    with pytest.raises(NotSyncedError) as refused:
        await controller.register_node(request)
    assert refused.value.retryable
    with pytest.raises(NotSyncedError):
        controller.heartbeat(pb.HeartbeatRequest(job=common.JobRef(job_id=JOB)))
    await controller.start()
    try:
        await controller.register_node(request)
        assert controller.drivers[JOB].ctx.status.node_id == "node_b"
    finally:
        await controller.close()
        await store.close()


@pytest.mark.skipif(sys.platform != "linux", reason="adoption reads /proc")
async def test_a_listed_worker_its_job_moved_on_from_is_killed_through_its_node(
    tmp_path: Path,
) -> None:
    """A node restarted in place lists a worker of generation 3 it adopted, while the job runs
    generation 4: the controller has the node kill it rather than trust it to hear its
    refusal."""
    store = await running_job(tmp_path)
    stale = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "--worker-id", "worker_0"],
        start_new_session=True,
    )
    node_port = free_port()
    address = f"127.0.0.1:{node_port}"
    node_controller = ControllerClient("127.0.0.1:1")  # the node never calls it here
    try:
        node = NodeRuntime(Config(data_dir=tmp_path), node_controller, address, None, ("-",))
        start_time = process_start_time(stale.pid)
        assert start_time is not None
        node.records.write(
            WorkerRecord("worker_0", JOB, 3, 1, stale.pid, start_time, "", boot_id())
        )
        assert [h.worker_id for h in node.adopt()] == ["worker_0"]
        hosted = (node_pb2_grpc.add_NodeServiceServicer_to_server, NodeServicer(node))
        async with (
            in_process_controller(tmp_path, store) as controller,
            serving(hosted, port=node_port),
        ):
            await controller.register_node(
                pb.RegisterNodeRequest(
                    node_id="node_b", address=address, task_slots=4, workers=node.job_workers()
                )
            )

            async def killed() -> bool:
                return stale.poll() is not None

            await eventually("the stale worker killed", killed, 10)
            assert stale.returncode == -signal.SIGKILL
            ctx = controller.drivers[JOB].ctx
            assert (ctx.status.generation, ctx.status.worker_id) == (GENERATION, WORKER)
    finally:
        stale.kill()
        stale.wait()
        await node_controller.close()
    await store.close()


async def test_a_worker_with_no_node_on_record_is_stopped_directly() -> None:
    """A job whose record names its worker and where it is, but no node (none known to this
    controller): killing the worker asks it directly."""
    worker = ScriptedWorkerRuntime(WorkerIdentity(JOB, GENERATION, WORKER, "node_a", 1))
    worker.phase = Phase.RUNNING
    async with serving(worker_service(worker)) as served:
        status = JobStatus(
            JobState.STOPPING, GENERATION, 0, 0, 0, None, None, WORKER,
            f"127.0.0.1:{served.grpc_port}", None, None, None, 0,
        )  # fmt: skip
        ctx = JobContext(
            JOB,
            PIPELINE,
            JobConfig(StopMode.FORCE, 1, 0, 0, False, False),
            status,
            cast(Store, cast(Any, None)),  # no status is saved
            NodeRegistry(30),
            ControllerConfig(),
            "/x",
        )
        await ctx.kill_worker()
        assert worker.phase is Phase.STOPPED
