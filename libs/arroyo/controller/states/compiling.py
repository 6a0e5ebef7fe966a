from __future__ import annotations

import dataclasses
from typing import ClassVar

from arroyo.controller.context import JobContext, StateError
from arroyo.errors import ErrorDomain
from arroyo.program.spec import PipelineProgram
from arroyo.store import JobState


class Compiling:
    """Load the pipeline's program (compiled by the api through the compiler) and apply the
    job's settings to it. A program that does not load is the user's to fix: no retry."""

    name: ClassVar[JobState] = JobState.COMPILING

    async def next(self, ctx: JobContext) -> JobState:
        if not ctx.wants_running():
            return JobState.STOPPED
        await load_program(ctx)
        return JobState.SCHEDULING


async def load_program(ctx: JobContext) -> None:
    """The program the job's workers run, in ``ctx.program_json``. A controller that restarts
    mid-run resumes past Compiling, so Scheduling loads it too when it is missing."""
    pipeline = await ctx.store.get_pipeline(ctx.pipeline_id)
    if pipeline is None:
        raise StateError("the job's pipeline is gone", code="not_found", retryable=False)
    try:
        program = PipelineProgram.from_json(pipeline.program_json)
    except (ValueError, KeyError, TypeError) as err:
        raise StateError(
            f"the pipeline's program does not load: {err}",
            code="bad_program",
            domain=ErrorDomain.USER,
            retryable=False,
        ) from err
    # Without its secrets' values: the worker asks for them (Controller.job_secrets).
    program = dataclasses.replace(program, parallelism=ctx.config.parallelism, secrets={})
    ctx.program_json = program.to_json()
