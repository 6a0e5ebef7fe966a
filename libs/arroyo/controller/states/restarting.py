from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.controller.states.base import await_worker_exit
from arroyo.store import JobState
from arroyo_rpc.v1 import common_pb2 as common

_STOP_TIMEOUT_S = 90.0


class Restarting:
    """The user asked for a restart (or a new parallelism): stop with a checkpoint (or kill,
    when forced), then compile and schedule again; ``ignore_state`` starts the next run from
    nothing."""

    name: ClassVar[JobState] = JobState.RESTARTING

    async def next(self, ctx: JobContext) -> JobState:
        if ctx.config.restart_force:
            await ctx.kill_worker()
        else:
            await ctx.stop_worker(common.STOP_MODE_GRACEFUL)
            if not await await_worker_exit(ctx, _STOP_TIMEOUT_S):
                await ctx.kill_worker()
        ctx.forget_worker()
        run_id = ctx.status.run_id + (1 if ctx.config.ignore_state else 0)
        ctx.update(restart_nonce=ctx.config.restart_nonce, run_id=run_id, restarts=0)
        return JobState.COMPILING if ctx.wants_running() else JobState.STOPPING
