from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext, now_micros
from arroyo.controller.states.base import await_change
from arroyo.store import JobState


class Finished:
    """All input was consumed. A restart request runs the pipeline again."""

    name: ClassVar[JobState] = JobState.FINISHED

    async def next(self, ctx: JobContext) -> JobState:
        if ctx.status.finished_at is None:
            ctx.update(finished_at=now_micros())
            await ctx.save()
        while not ctx.restart_requested():
            await await_change(ctx)
        ctx.update(finished_at=None, restart_nonce=ctx.config.restart_nonce)
        return JobState.COMPILING
