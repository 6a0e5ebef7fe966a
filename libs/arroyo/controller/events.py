"""What a job's state machine hears while it runs: worker reports, loss, and user changes.

The controller's gRPC handlers and its monitors put these on the job's queue; the state that is
current takes them off. Reports from a stale generation never get here (the handlers refuse
them), so a state only ever sees its own worker's news.
"""

from __future__ import annotations

from dataclasses import dataclass

from arroyo.store import Checkpoint


@dataclass(frozen=True, slots=True)
class WorkerRegistered:
    worker_id: str
    address: str


@dataclass(frozen=True, slots=True)
class TaskStarted:
    pass


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class TaskFailed:
    message: str
    domain: str
    retryable: bool
    details: str = ""


@dataclass(frozen=True, slots=True)
class TaskFinished:
    pass


@dataclass(frozen=True, slots=True)
class WorkerFinished:
    pass


@dataclass(frozen=True, slots=True)
class WorkerLost:
    """The worker's heartbeats stopped, or its node reported it gone, or the node died."""

    reason: str


@dataclass(frozen=True, slots=True)
class ConfigChanged:
    """The api changed what the user wants of the job (``ctx.config`` holds the new one)."""


JobEvent = (
    WorkerRegistered
    | TaskStarted
    | CheckpointCompleted
    | TaskFailed
    | TaskFinished
    | WorkerFinished
    | WorkerLost
    | ConfigChanged
)
