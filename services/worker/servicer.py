"""The worker's gRPC surface, over its WorkerRuntime."""

from __future__ import annotations

from typing import Any

from arroyo.errors import ArroyoError
from arroyo.rpc.status import STALE_GENERATION
from arroyo.worker import Phase, WorkerRuntime
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import worker_pb2 as pb
from arroyo_rpc.v1 import worker_pb2_grpc

_PHASES = {
    Phase.IDLE: pb.WORKER_PHASE_IDLE,
    Phase.RUNNING: pb.WORKER_PHASE_RUNNING,
    Phase.STOPPING: pb.WORKER_PHASE_STOPPING,
    Phase.STOPPED: pb.WORKER_PHASE_STOPPED,
    Phase.FINISHED: pb.WORKER_PHASE_FINISHED,
    Phase.FAILED: pb.WORKER_PHASE_FAILED,
}


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):  # type: ignore[misc]
    """Created before the runtime exists (the runtime needs the server's bound address);
    ``runtime`` is set at startup, before the worker registers, so no call precedes it."""

    def __init__(self) -> None:
        self._runtime: WorkerRuntime | None = None

    @property
    def runtime(self) -> WorkerRuntime:
        assert self._runtime is not None, "the worker has not registered yet"
        return self._runtime

    @runtime.setter
    def runtime(self, value: WorkerRuntime) -> None:
        self._runtime = value

    async def StartExecution(self, request: pb.StartExecutionRequest, context: Any) -> Any:
        await self.runtime.start_execution(
            request.program_json,
            request.state_dir,
            request.restore,
            request.checkpoint_interval_micros,
        )
        return pb.StartExecutionResponse()

    async def StopExecution(self, request: pb.StopExecutionRequest, context: Any) -> Any:
        identity = self.runtime.identity
        if request.job.job_id and (request.job.job_id, request.job.generation) != (
            identity.job_id,
            identity.generation,
        ):
            # A stop meant for a worker that had this address before (its port reused).
            raise ArroyoError(
                f"this worker runs job {identity.job_id} generation {identity.generation}",
                code=STALE_GENERATION,
            )
        self.runtime.stop_execution(graceful=request.mode == common.STOP_MODE_GRACEFUL)
        return pb.StopExecutionResponse()

    async def GetWorkerPhase(self, request: pb.GetWorkerPhaseRequest, context: Any) -> Any:
        return pb.GetWorkerPhaseResponse(
            job=self.runtime.identity.ref(), phase=_PHASES[self.runtime.phase]
        )
