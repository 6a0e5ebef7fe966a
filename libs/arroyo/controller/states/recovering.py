from __future__ import annotations

import time
from typing import ClassVar

import structlog

from arroyo.controller.context import JobContext, StateError
from arroyo.controller.events import ConfigChanged
from arroyo.store import JobState

log = structlog.get_logger(__name__)


class Recovering:
    """After a failure: the old worker is killed, and after a backoff that doubles with each
    consecutive failure the job is scheduled again, to resume from its last checkpoint. Past
    the restart limit it fails with the last error."""

    name: ClassVar[JobState] = JobState.RECOVERING

    async def next(self, ctx: JobContext) -> JobState:
        await ctx.kill_worker()
        ctx.forget_worker()
        if not ctx.wants_running():
            return JobState.STOPPED
        restarts = ctx.status.restarts + 1
        settings = ctx.settings
        if restarts > settings.max_restarts:
            ctx.failure = StateError(
                f"gave up after {settings.max_restarts} restarts: "
                f"{ctx.status.failure_message or 'the worker kept failing'}",
                code="too_many_restarts",
                retryable=False,
            )
            return JobState.FAILING
        ctx.update(restarts=restarts)
        await ctx.save()
        backoff = min(
            settings.restart_backoff_s * 2 ** (restarts - 1), settings.restart_backoff_max_s
        )
        log.info("job_recovering", job_id=ctx.job_id, restarts=restarts, backoff_s=backoff)
        deadline = time.monotonic() + backoff
        while (left := deadline - time.monotonic()) > 0:
            event = await ctx.next_event(left)
            if isinstance(event, ConfigChanged) and not ctx.wants_running():
                return JobState.STOPPED
        return JobState.SCHEDULING
