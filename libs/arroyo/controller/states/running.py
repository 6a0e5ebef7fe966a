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
from arroyo.store import JobState, StopMode

log = structlog.get_logger(__name__)


class Running:
    """The worker runs the program. Checkpoints are recorded as they come; a checkpoint is also
    proof of health, so it resets the count of restarts."""

    name: ClassVar[JobState] = JobState.RUNNING

    async def next(self, ctx: JobContext) -> JobState:
        parallelism = ctx.config.parallelism
        ctx.last_heartbeat = time.monotonic()
        while True:
            event = await ctx.next_event(None)
            if isinstance(event, CheckpointCompleted):
                await ctx.store.add_checkpoint(event.checkpoint)
                if ctx.status.restarts:
                    ctx.update(restarts=0)
                    await ctx.save()
            elif isinstance(event, ConfigChanged):
                if ctx.config.stop in (StopMode.CHECKPOINT, StopMode.GRACEFUL):
                    return JobState.CHECKPOINT_STOPPING
                if ctx.config.stop in (StopMode.IMMEDIATE, StopMode.FORCE):
                    return JobState.STOPPING
                if ctx.restart_requested() or ctx.config.parallelism != parallelism:
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
