from __future__ import annotations

import time
from typing import ClassVar

import structlog

from arroyo.controller.context import JobContext, task_error
from arroyo.controller.events import (
    CheckpointCompleted,
    ConfigChanged,
    TaskFailed,
    TaskFinished,
    WorkerFinished,
    WorkerLost,
)
from arroyo.store import JobState, StopMode, StoreError

log = structlog.get_logger(__name__)


class Running:
    """The worker runs the program. Checkpoints are recorded as they come; a checkpoint is also
    proof of health, so it resets the count of restarts. A new parallelism or checkpoint
    interval restarts the job from a checkpoint with it."""

    name: ClassVar[JobState] = JobState.RUNNING

    async def next(self, ctx: JobContext) -> JobState:
        # Settings the running worker was started with: a change restarts it (with a
        # checkpoint), the only way to rescale or re-trigger a Spark query.
        started_with = (ctx.config.parallelism, ctx.config.checkpoint_interval_micros)
        ctx.last_heartbeat = time.monotonic()
        if not ctx.wants_running():
            # A stop asked for while the worker was being scheduled (its event may have come
            # while Scheduling waited for the worker to register, which takes no other).
            ctx.events.put_nowait(ConfigChanged())
        while True:
            event = await ctx.next_event(None)
            if isinstance(event, CheckpointCompleted):
                try:
                    await ctx.store.add_checkpoint(event.checkpoint)
                except StoreError as err:
                    # The record is for the user's eyes: the state is in the Spark checkpoint,
                    # so a database that is away (restarting) costs a record, not the worker.
                    if not err.retryable:
                        raise
                    log.warning("checkpoint_record_lost", job_id=ctx.job_id, error=str(err))
                    continue
                if ctx.status.restarts:
                    ctx.update(restarts=0)
                    await ctx.save()
            elif isinstance(event, ConfigChanged):
                if ctx.config.stop in (StopMode.CHECKPOINT, StopMode.GRACEFUL):
                    return JobState.CHECKPOINT_STOPPING
                if ctx.config.stop in (StopMode.IMMEDIATE, StopMode.FORCE):
                    return JobState.STOPPING
                settings = (ctx.config.parallelism, ctx.config.checkpoint_interval_micros)
                if ctx.restart_requested() or settings != started_with:
                    return JobState.RESTARTING
            elif isinstance(event, TaskFinished):
                return JobState.FINISHING
            elif isinstance(event, TaskFailed):
                raise task_error(event.message, event.domain, event.retryable, event.details)
            elif isinstance(event, WorkerLost):
                log.warning("worker_lost", job_id=ctx.job_id, reason=event.reason)
                await ctx.record_error(f"worker lost: {event.reason}", "internal", True, "")
                return JobState.RECOVERING
            elif isinstance(event, WorkerFinished):
                await ctx.record_error("the worker exited unasked", "internal", True, "")
                return JobState.RECOVERING
