from __future__ import annotations

from typing import ClassVar

from arroyo.controller.context import JobContext
from arroyo.store import JobState


class Created:
    """The api stored the job; nothing has run yet."""

    name: ClassVar[JobState] = JobState.CREATED

    async def next(self, ctx: JobContext) -> JobState:
        return JobState.COMPILING if ctx.wants_running() else JobState.STOPPED
