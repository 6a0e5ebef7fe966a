from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.controller.states.base import await_worker_exit
from arroyo.store import JobState, StopMode
from arroyo_rpc.v1 import common_pb2 as common

_STOP_TIMEOUT_S = 30.0


class Stopping:
    """Whatever still runs stops: at once when asked (immediate), else killed through the node
    (force, or a worker that did not stop in time)."""

    name: ClassVar[JobState] = JobState.STOPPING

    async def next(self, ctx: JobContext) -> JobState:
        if ctx.status.worker_id is not None:
            stopped = False
            if ctx.config.stop is not StopMode.FORCE:
                await ctx.stop_worker(common.STOP_MODE_IMMEDIATE)
                stopped = await await_worker_exit(ctx, _STOP_TIMEOUT_S)
            if not stopped:
                await ctx.kill_worker()
            ctx.forget_worker()
        return JobState.STOPPED
