"""A store holding one Running job, for the controller's fault and fencing tests."""

from __future__ import annotations

from pathlib import Path

from arroyo.program.spec import PipelineProgram
from arroyo.store import (
    JobConfig,
    JobId,
    JobState,
    JobStatus,
    Pipeline,
    PipelineId,
    StopMode,
    Store,
    open_store,
)
from arroyo.testing.ports import free_port

JOB = JobId("job_1")
PIPELINE = PipelineId("pl_1")
GENERATION = 4
WORKER = "worker_1"
# The worker's address as the job's record has it: nothing listens there, so a stop sent to
# the worker directly is lost, as to a worker cut off from the controller.
LOST_ADDRESS = f"127.0.0.1:{free_port()}"


async def running_job(tmp_path: Path, slots: int = 1) -> Store:
    """A store with job_1 Running at generation 4 on worker_1 (node_a, which never registers),
    holding ``slots`` slots."""
    store = await open_store(f"sqlite:///{tmp_path / 'arroyo.db'}")
    await store.migrate()
    empty = PipelineProgram(sources=[], views=[], queries=[]).to_json()
    await store.create_pipeline(
        Pipeline(PIPELINE, "pl_1", "SELECT 1", "", empty, "{}", 0),
        JOB,
        JobConfig(StopMode.NONE, slots, 0, 0, False, False),
    )
    running = JobStatus(
        JobState.RUNNING, GENERATION, 0, 0, 0, None, None, WORKER, LOST_ADDRESS, "node_a",
        None, None, 0,
    )  # fmt: skip
    await store.update_job_status(JOB, running)
    return store
