"""The worker: one process per running job, hosting the SparkSession that runs its program."""

from arroyo.worker.execution import Execution, Phase, Reporter
from arroyo.worker.runtime import WorkerIdentity, WorkerRuntime

__all__ = ["Execution", "Phase", "Reporter", "WorkerIdentity", "WorkerRuntime"]
