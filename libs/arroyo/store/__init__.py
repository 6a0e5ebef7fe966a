"""The control plane's database: SQLite by default, PostgreSQL through asyncpg."""

from arroyo.store.model import (
    Checkpoint,
    Job,
    JobConfig,
    JobError,
    JobId,
    JobState,
    JobStatus,
    Pipeline,
    PipelineId,
    StopMode,
    Store,
)

__all__ = [
    "Checkpoint",
    "Job",
    "JobConfig",
    "JobError",
    "JobId",
    "JobState",
    "JobStatus",
    "Pipeline",
    "PipelineId",
    "StopMode",
    "Store",
]
