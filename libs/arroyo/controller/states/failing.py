from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.store import JobState


class Failing:
    """The job gave up: its worker is killed and the last error kept for the user."""

    name: ClassVar[JobState] = JobState.FAILING

    async def next(self, ctx: JobContext) -> JobState:
        await ctx.kill_worker()
        ctx.forget_worker()
        if ctx.failure is not None:
            ctx.update(failure_message=ctx.failure.message, failure_domain=str(ctx.failure.domain))
        return JobState.FAILED
