from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.controller.states.base import await_worker_exit
from arroyo.store import JobState
from arroyo_rpc.v1 import common_pb2 as common

_STOP_TIMEOUT_S = 90.0


class CheckpointStopping:
    """The worker stops after the batch in flight commits: that batch is the final checkpoint,
    and the next run resumes right after it."""

    name: ClassVar[JobState] = JobState.CHECKPOINT_STOPPING

    async def next(self, ctx: JobContext) -> JobState:
        await ctx.stop_worker(common.STOP_MODE_GRACEFUL)
        if await await_worker_exit(ctx, _STOP_TIMEOUT_S):
            ctx.forget_worker()
        return JobState.STOPPING
