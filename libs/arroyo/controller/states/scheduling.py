from __future__ import annotations

import time
from typing import ClassVar

import structlog

from arroyo.controller.context import JobContext, StateError, now_micros, task_error
from arroyo.controller.events import ConfigChanged, TaskFailed, TaskStarted, WorkerLost
from arroyo.controller.events import WorkerRegistered as Registered
from arroyo.controller.states.compiling import load_program
from arroyo.rpc import NodeClient, RpcError, WorkerClient
from arroyo.store import JobState
from arroyo_rpc.v1 import node_pb2, worker_pb2

log = structlog.get_logger(__name__)

# A worker process registers before it starts Spark; starting the queries includes Spark's
# start-up and the first planning, which takes a while on a cold JVM.
_REGISTER_TIMEOUT_S = 60.0
_START_TIMEOUT_S = 300.0


class Scheduling:
    """A new generation: a node with free slots starts a worker, which registers, gets the
    program, and reports its queries started."""

    name: ClassVar[JobState] = JobState.SCHEDULING

    async def next(self, ctx: JobContext) -> JobState:
        # An earlier generation's worker may live on (a controller restart mid-scheduling).
        await ctx.kill_worker()
        ctx.forget_worker()
        ctx.drain()
        if not ctx.program_json:
            await load_program(ctx)
        ctx.update(generation=ctx.status.generation + 1)
        await ctx.save()
        slots = ctx.config.parallelism
        claim = f"scheduling:{ctx.job_id}"
        node = await ctx.nodes.claim_slots(slots, claim, ctx.settings.heartbeat_timeout_s)
        if node is None:
            raise StateError(f"no node has {slots} free task slots", code="no_slots")
        client = NodeClient(node.address, tls=ctx.tls)
        ctx.starting_worker = True
        try:
            started = await client.start_worker(
                node_pb2.StartWorkerRequest(
                    job_id=ctx.job_id, generation=ctx.status.generation, slots=slots
                )
            )
            ctx.nodes.assign(node.node_id, started.worker_id, slots)
            # Before anything else awaits: the worker is the job's from here on.
            ctx.update(worker_id=started.worker_id, node_id=node.node_id)
        except RpcError as err:
            raise StateError(f"node {node.node_id} did not start a worker: {err.message}") from err
        finally:
            ctx.starting_worker = False
            ctx.nodes.release(claim)
            await client.close()
        await ctx.save()
        address = await _registered(ctx)
        ctx.update(worker_address=address)
        ctx.last_heartbeat = time.monotonic()
        worker = WorkerClient(address, tls=ctx.tls)
        try:
            await worker.start_execution(
                worker_pb2.StartExecutionRequest(
                    job=ctx.ref(),
                    program_json=ctx.program_json,
                    state_dir=ctx.state_dir(),
                    restore=True,
                    checkpoint_interval_micros=ctx.config.checkpoint_interval_micros,
                )
            )
        except RpcError as err:
            raise StateError(f"the worker did not start the program: {err.message}") from err
        finally:
            await worker.close()
        return await _started(ctx)


async def _registered(ctx: JobContext) -> str:
    deadline = time.monotonic() + _REGISTER_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        event = await ctx.next_event(left)
        if isinstance(event, Registered) and event.worker_id == ctx.status.worker_id:
            return event.address
        if isinstance(event, WorkerLost):
            raise StateError(f"the worker died before registering: {event.reason}")
    raise StateError("the worker did not register in time", code="worker_timeout")


async def _started(ctx: JobContext) -> JobState:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        event = await ctx.next_event(left)
        if isinstance(event, TaskStarted):
            ctx.update(started_at=now_micros(), failure_message=None, failure_domain=None)
            log.info("job_running", job_id=ctx.job_id, generation=ctx.status.generation)
            return JobState.RUNNING
        if isinstance(event, TaskFailed):
            raise task_error(event.message, event.domain, event.retryable, event.details)
        if isinstance(event, WorkerLost):
            raise StateError(f"the worker died while starting: {event.reason}")
        if isinstance(event, ConfigChanged) and not ctx.wants_running():
            return JobState.STOPPING
    raise StateError("the worker did not start its queries in time", code="worker_timeout")
