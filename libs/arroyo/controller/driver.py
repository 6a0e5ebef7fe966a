"""Drives one job through its states: the one place retry and failure policy live.

Each state's ``next`` returns the state to go to; the driver checks it against the transition
table, persists the job's status, and goes on. A ``StateError`` from a state is recorded as a
job error and becomes Recovering when it is retryable (the restart limit is Recovering's to
enforce) or Failing when it is not. Any other exception is a bug: it is recorded and retried
like a retryable error, so that no job is left without a driver.
"""

from __future__ import annotations

import asyncio

import structlog

from arroyo.controller.context import JobContext, StateError
from arroyo.controller.states import STATES
from arroyo.controller.transitions import allowed
from arroyo.errors import ErrorDomain
from arroyo.store import JobState, LeaseLost

log = structlog.get_logger(__name__)

_BUG_RETRY_S = 1.0


class JobDriver:
    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"job-{self.ctx.job_id}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def run(self) -> None:
        """Drive the job until cancelled, or until a write of its status is fenced off (the
        controller lost its lease: ``arroyo.controller.lease``), when it stops at once."""
        try:
            await self._drive()
        except LeaseLost as err:
            log.error("job_driver_fenced", job_id=self.ctx.job_id, error=err.message)

    async def _drive(self) -> None:
        ctx = self.ctx
        while True:
            current = ctx.status.state
            try:
                following = await STATES[current].next(ctx)
            except StateError as err:
                following = await self._failed(current, err)
            except (asyncio.CancelledError, LeaseLost):
                raise
            except Exception as err:
                log.exception("state_crashed", job_id=ctx.job_id, state=str(current))
                await asyncio.sleep(_BUG_RETRY_S)
                bug = StateError(f"internal error in {current}: {err}")
                following = await self._failed(current, bug)
            if following is current:
                continue
            if not allowed(current, following):
                log.error(
                    "transition_refused",
                    job_id=ctx.job_id,
                    state=str(current),
                    to=str(following),
                )
                following = JobState.FAILING
            ctx.update(state=following)
            await ctx.save()
            log.info(
                "job_transition",
                job_id=ctx.job_id,
                generation=ctx.status.generation,
                state=str(following),
                previous=str(current),
            )

    async def _failed(self, current: JobState, err: StateError) -> JobState:
        ctx = self.ctx
        log.warning(
            "job_error",
            job_id=ctx.job_id,
            state=str(current),
            code=err.code,
            error=err.message,
            retryable=err.retryable,
        )
        await ctx.record_error(err.message, str(err.domain), err.retryable, err.code)
        ctx.update(failure_message=err.message, failure_domain=str(err.domain))
        if err.retryable and allowed(current, JobState.RECOVERING):
            return JobState.RECOVERING
        if allowed(current, JobState.FAILING):
            ctx.failure = err
            return JobState.FAILING
        if err.domain is ErrorDomain.USER:
            ctx.failure = err
        # States that cannot fail onwards (stopping, recovering) try again.
        await asyncio.sleep(_BUG_RETRY_S)
        return current
