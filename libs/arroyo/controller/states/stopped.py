from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext, now_micros
from arroyo.controller.states.base import await_change
from arroyo.store import JobState


class Stopped:
    """Nothing runs; the checkpoints stay. Leaves when the user wants it running again."""

    name: ClassVar[JobState] = JobState.STOPPED

    async def next(self, ctx: JobContext) -> JobState:
        if ctx.status.finished_at is None:
            ctx.update(finished_at=now_micros())
            await ctx.save()
        while not (ctx.wants_running() or ctx.restart_requested()):
            await await_change(ctx)
        ctx.update(restart_nonce=ctx.config.restart_nonce, finished_at=None, restarts=0)
        return JobState.COMPILING
