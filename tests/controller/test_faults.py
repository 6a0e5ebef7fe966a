"""What the chaos run (tests/cluster/chaos.py) found in the controller, pinned: a node restarted
in place (a new id at the old one's address) replaces the old one at once, rather than after the
heartbeat timeout, and nothing waits for a node known to be gone (a killed node cost two
heartbeat timeouts); the worker a restarted node adopted keeps its job running; a checkpoint
record the database cannot take does not restart a healthy job."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

from arroyo.config import Config, ControllerConfig
from arroyo.controller import Controller
from arroyo.controller.context import JobContext
from arroyo.controller.controller import MONITOR_INTERVAL_S
from arroyo.controller.events import CheckpointCompleted, TaskFinished
from arroyo.controller.nodes import NodeRegistry
from arroyo.controller.states.running import Running
from arroyo.store import (
    Checkpoint,
    JobConfig,
    JobId,
    JobState,
    JobStatus,
    PipelineId,
    StopMode,
    Store,
    StoreError,
)
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb
from tests.controller.jobs import JOB, running_job
from tests.waiting import eventually


async def test_a_node_at_a_taken_address_replaces_the_old_one() -> None:
    registry = NodeRegistry(heartbeat_timeout_s=60)
    await registry.register("node_a", "127.0.0.1:5118", 4)
    await registry.register("node_b", "127.0.0.1:5119", 4)
    assert registry.expired() == []

    await registry.register("node_c", "127.0.0.1:5118", 4)  # node_a restarted in place
    assert set(registry.nodes) == {"node_b", "node_c"}
    assert [n.node_id for n in registry.expired()] == ["node_a"]
    assert registry.expired() == []  # reported once
    assert registry.lost == {"node_a"}

    # A node that comes back under its old id is live again.
    await registry.register("node_a", "127.0.0.1:5120", 4)
    assert "node_a" in registry.nodes and "node_a" not in registry.lost


async def test_killing_a_worker_on_a_lost_node_does_not_wait_for_the_node() -> None:
    settings = ControllerConfig(heartbeat_timeout_s=30)
    registry = NodeRegistry(settings.heartbeat_timeout_s)
    await registry.register("node_a", "127.0.0.1:5118", 4)
    registry.assign("node_a", "worker_1", 1)
    await registry.register("node_b", "127.0.0.1:5118", 4)
    registry.expired()
    ctx = context(registry, settings, cast(Store, cast(Any, None)))
    started = time.monotonic()
    await ctx.kill_worker()
    assert time.monotonic() - started < 1


def context(registry: NodeRegistry, settings: ControllerConfig, store: Store) -> JobContext:
    status = JobStatus(
        JobState.RUNNING, 1, 0, 0, 0, None, None, "worker_1", "127.0.0.1:1", "node_a", None,
        None, 0,
    )  # fmt: skip
    job_config = JobConfig(StopMode.NONE, 1, 0, 0, False, False)
    return JobContext(
        JobId("job_1"), PipelineId("pl_1"), job_config, status, store, registry, settings, "/x"
    )


class _DatabaseAway:
    """A store whose database is away: every checkpoint record fails, retryably."""

    def __init__(self) -> None:
        self.attempts = 0

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.attempts += 1
        raise StoreError("PostgreSQL: [Errno 104] Connection reset by peer")


async def test_a_checkpoint_record_the_database_cannot_take_keeps_the_job_running() -> None:
    settings = ControllerConfig()
    store = _DatabaseAway()
    ctx = context(NodeRegistry(60), settings, cast(Store, cast(Any, store)))
    record = Checkpoint(JobId("job_1"), "q", 3, 1, None, "{}", 0, 0, 0, 0, 0)
    ctx.events.put_nowait(CheckpointCompleted(record))
    ctx.events.put_nowait(TaskFinished())
    assert await Running().next(ctx) is JobState.FINISHING
    assert store.attempts == 1


async def test_a_stop_asked_for_while_the_worker_was_scheduled_is_acted_on_when_running() -> None:
    """Found by the web UI's journey: the stop's event came while Scheduling waited for the
    worker to register, which takes no other event; the job stayed Running, asked to stop."""
    ctx = context(NodeRegistry(60), ControllerConfig(), cast(Store, cast(Any, _DatabaseAway())))
    ctx.config = JobConfig(StopMode.CHECKPOINT, 1, 0, 0, False, False)
    # Bounded: without the fix, Running waits for an event that never comes.
    assert await asyncio.wait_for(Running().next(ctx), 30) is JobState.CHECKPOINT_STOPPING


async def test_a_worker_adopted_by_a_node_restarted_in_place_keeps_its_job_running(
    tmp_path: Path,
) -> None:
    """A node killed -9 leaves its worker running; the node restarted at its address lists the
    worker it adopted when it registers, and the job moves onto it in the same generation, its
    slots with it. A node that replaces one without listing the job's worker (it died) makes
    the job recover at once, as before."""
    store = await running_job(tmp_path, slots=2)
    job_id = JOB
    config = Config(data_dir=tmp_path, controller=ControllerConfig(heartbeat_timeout_s=30))
    controller = Controller(config, store)
    await controller.start()
    try:
        address = "127.0.0.1:5118"
        await controller.register_node(
            pb.RegisterNodeRequest(node_id="node_a", address=address, task_slots=4)
        )
        assert controller.nodes.nodes["node_a"].free_slots == 2
        adopted = pb.NodeWorker(worker_id="worker_1", job_id=job_id, generation=4, slots=2)
        # A worker of an older generation, listed too, moves nothing (the controller has the
        # node kill it: tests/controller/test_fencing.py).
        stale = pb.NodeWorker(worker_id="worker_0", job_id=job_id, generation=3, slots=2)
        await controller.register_node(
            pb.RegisterNodeRequest(
                node_id="node_b", address=address, task_slots=4, workers=[stale, adopted]
            )
        )
        assert set(controller.nodes.nodes) == {"node_b"}
        assert controller.nodes.nodes["node_b"].free_slots == 2
        ctx = controller.drivers[job_id].ctx

        async def saved_on_node_b() -> bool:
            job = await store.get_job(job_id)
            return job is not None and job.status.node_id == "node_b"

        await eventually("the move saved", saved_on_node_b, 10)
        # Nothing to wait on for what does not happen: the monitor has looked twice since
        # node_a was replaced, and the job runs on, in its generation.
        await asyncio.sleep(2 * MONITOR_INTERVAL_S)
        assert (ctx.status.state, ctx.status.generation) == (JobState.RUNNING, 4)
        assert ctx.status.worker_id == "worker_1"

        # node_b restarted in its turn, its worker gone with it: the job recovers at once.
        await controller.register_node(
            pb.RegisterNodeRequest(node_id="node_c", address=address, task_slots=4)
        )

        async def next_generation() -> bool:
            return ctx.status.generation == 5

        await eventually("the job scheduled again", next_generation, 10)
    finally:
        await controller.close()
        await store.close()


async def test_a_silent_node_fails_over_no_job_whose_worker_still_heartbeats(
    tmp_path: Path,
) -> None:
    """A node that stops heartbeating (killed, not restarted) leaves its worker running: the
    job stays Running while the worker's own heartbeats come; once they stop too (the machine
    is gone), it recovers."""
    store = await running_job(tmp_path, slots=1)
    job_id = JOB
    timeout_s = 1.0
    config = Config(data_dir=tmp_path, controller=ControllerConfig(heartbeat_timeout_s=timeout_s))
    controller = Controller(config, store)
    await controller.start()
    try:
        await controller.register_node(
            pb.RegisterNodeRequest(node_id="node_a", address="127.0.0.1:5118", task_slots=4)
        )
        ctx = controller.drivers[job_id].ctx
        ref = common.JobRef(job_id=job_id, generation=4, worker_id="worker_1")

        async def node_dropped() -> bool:
            # The worker heartbeats; the node does not.
            controller.heartbeat(pb.HeartbeatRequest(job=ref, address="127.0.0.1:1"))
            return "node_a" in controller.nodes.lost

        await eventually("node_a dropped", node_dropped, 10, interval=timeout_s / 5)
        # Nothing to wait on for what does not happen: the monitor has looked at the job
        # while its worker kept heartbeating, past the heartbeat timeout.
        for _ in range(10):
            controller.heartbeat(pb.HeartbeatRequest(job=ref, address="127.0.0.1:1"))
            await asyncio.sleep(timeout_s / 5)
        assert (ctx.status.state, ctx.status.generation) == (JobState.RUNNING, 4)

        async def next_generation() -> bool:
            return ctx.status.generation == 5

        await eventually("the job recovered once its worker went quiet", next_generation, 10)
    finally:
        await controller.close()
        await store.close()
