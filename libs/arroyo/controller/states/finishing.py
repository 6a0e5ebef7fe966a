from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.controller.states.base import await_worker_exit
from arroyo.store import JobState

_FINISH_TIMEOUT_S = 60.0


class Finishing:
    """Every source ended and every query flushed; the worker winds down."""

    name: ClassVar[JobState] = JobState.FINISHING

    async def next(self, ctx: JobContext) -> JobState:
        if not await await_worker_exit(ctx, _FINISH_TIMEOUT_S):
            await ctx.kill_worker()
        ctx.forget_worker()
        return JobState.FINISHED
