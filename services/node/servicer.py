"""The node's gRPC surface, over its NodeRuntime."""

from __future__ import annotations

from typing import Any

from arroyo.node import NodeRuntime
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import node_pb2 as pb
from arroyo_rpc.v1 import node_pb2_grpc


class NodeServicer(node_pb2_grpc.NodeServiceServicer):  # type: ignore[misc]
    def __init__(self, runtime: NodeRuntime) -> None:
        self.runtime = runtime

    async def StartWorker(self, request: pb.StartWorkerRequest, context: Any) -> Any:
        handle = await self.runtime.start_worker(
            request.job_id, request.generation, request.slots, dict(request.env)
        )
        return pb.StartWorkerResponse(worker_id=handle.worker_id)

    async def StopWorker(self, request: pb.StopWorkerRequest, context: Any) -> Any:
        found = await self.runtime.stop_worker(
            request.worker_id, force=request.mode == common.STOP_MODE_FORCE
        )
        return pb.StopWorkerResponse(found=found)

    async def GetWorkers(self, request: pb.GetWorkersRequest, context: Any) -> Any:
        return pb.GetWorkersResponse(
            workers=[
                pb.WorkerProcess(
                    worker_id=w.worker_id,
                    job_id=w.job_id,
                    generation=w.generation,
                    slots=w.slots,
                    pid=w.process.pid,
                    running=w.running,
                    exit_code=w.process.returncode or 0,
                )
                for w in self.runtime.workers.values()
            ]
        )
