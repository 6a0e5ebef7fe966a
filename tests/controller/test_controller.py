"""The controller service in-process over real gRPC and a real SQLite store: a job is picked up
from the database, its worker's reports are routed by generation, and a stale generation is
refused with FAILED_PRECONDITION (``stale_generation``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arroyo.config import Config, ControllerConfig
from arroyo.controller import Controller
from arroyo.program.spec import PipelineProgram
from arroyo.rpc import ControllerClient, RpcError
from arroyo.store import JobConfig, JobId, JobState, Pipeline, PipelineId, StopMode, open_store
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb
from tests.services import controller_service, serving
from tests.waiting import eventually

EVENTUALLY_S = 20.0


async def test_reports_are_routed_by_generation(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    await store.migrate()
    config = Config(
        data_dir=tmp_path,
        controller=ControllerConfig(poll_interval_s=0.05, heartbeat_timeout_s=30),
    )
    job_id, broken = JobId("job_1"), JobId("job_2")
    empty = PipelineProgram(sources=[], views=[], queries=[]).to_json()
    for pid, jid, program in (("pl_1", job_id, empty), ("pl_2", broken, "{}")):
        await store.create_pipeline(
            Pipeline(PipelineId(pid), pid, "SELECT 1", "", program, "{}", 0),
            jid,
            JobConfig(StopMode.NONE, 1, 0, 0, False, False),
        )
    controller = Controller(config, store)
    await controller.start()
    try:
        async with serving(controller_service(controller)) as running:
            client = ControllerClient(str(running.grpc_address))

            async def scheduling() -> bool:
                job = await store.get_job(job_id)
                return job is not None and job.status.state is JobState.SCHEDULING

            # No node has registered: the job waits in Scheduling, at generation 1.
            await eventually("Scheduling", scheduling, EVENTUALLY_S)
            # No worker was started for it: a worker of its generation is not its worker.
            current = common.JobRef(job_id=job_id, generation=1, worker_id="w")
            with pytest.raises(RpcError) as no_worker:
                await client.heartbeat(pb.HeartbeatRequest(job=current, address="127.0.0.1:1"))
            assert no_worker.value.code == "stale_generation"

            stale = common.JobRef(job_id=job_id, generation=0, worker_id="old")
            with pytest.raises(RpcError) as refused:
                await client.task_started(pb.TaskStartedRequest(job=stale))
            assert refused.value.code == "stale_generation"
            assert not refused.value.retryable

            with pytest.raises(RpcError) as unknown:
                await client.heartbeat(
                    pb.HeartbeatRequest(job=common.JobRef(job_id="nope", generation=1))
                )
            assert unknown.value.code == "not_found"
            await client.close()

            # A program that does not load is the user's to fix: Failed at once, with why.
            async def failed() -> bool:
                job = await store.get_job(broken)
                return job is not None and job.status.state is JobState.FAILED

            await eventually("Failed", failed, EVENTUALLY_S)
            job = await store.get_job(broken)
            assert job is not None and job.status.restarts == 0
            assert job.status.failure_domain == "user"
            # A job's status keeps no code: its failure message is what the user reads.
            assert "does not load" in str(job.status.failure_message)
    finally:
        await controller.close()
        await store.close()


async def test_list_nodes_gives_each_nodes_slots_most_free_first(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    await store.migrate()
    controller = Controller(Config(data_dir=tmp_path), store)
    await controller.start()
    try:
        async with (
            serving(controller_service(controller)) as running,
            ControllerClient(str(running.grpc_address)) as client,
        ):
            assert not (await client.list_nodes(pb.ListNodesRequest())).nodes
            # Each at an address of its own: a node at a taken one replaces the node there.
            for node_id, slots, address in (("a", 2, "x:1"), ("b", 4, "x:2")):
                await client.register_node(
                    pb.RegisterNodeRequest(node_id=node_id, address=address, task_slots=slots)
                )
            controller.nodes.assign("b", "worker-1", 3)
            listed = (await client.list_nodes(pb.ListNodesRequest())).nodes
    finally:
        await controller.close()
        await store.close()
    assert [(n.node_id, n.task_slots, n.free_slots) for n in listed] == [("a", 2, 2), ("b", 4, 1)]
