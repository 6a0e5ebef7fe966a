"""What every state is: a coroutine from the job's context to the state that follows."""

from __future__ import annotations

import time
from typing import ClassVar, Protocol

from arroyo.controller.context import JobContext
from arroyo.controller.events import ConfigChanged, WorkerFinished, WorkerLost
from arroyo.store import JobState


class State(Protocol):
    """One state of a job. ``next`` does the state's work, waiting on the job's events as it
    needs, and returns the state to go to; the driver checks it against the transition table
    and persists it. Raising ``StateError`` leaves recovery to the driver."""

    name: ClassVar[JobState]

    async def next(self, ctx: JobContext) -> JobState: ...


async def await_worker_exit(ctx: JobContext, timeout: float) -> bool:
    """Wait for the worker to report that it finished (True) or to be lost or time out."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        event = await ctx.next_event(left)
        if isinstance(event, WorkerFinished | WorkerLost):
            return isinstance(event, WorkerFinished)
    return False


async def await_change(ctx: JobContext) -> None:
    """Wait until the user changes something about the job."""
    while not isinstance(await ctx.next_event(None), ConfigChanged):
        pass
