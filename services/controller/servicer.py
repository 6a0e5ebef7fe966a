"""The controller's gRPC surface: each rpc handed to the Controller as data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from arroyo.controller import Controller
from arroyo.controller import events as ev
from arroyo.store import Checkpoint, JobId
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb
from arroyo_rpc.v1 import controller_pb2_grpc

_DOMAINS = {
    common.ERROR_DOMAIN_USER: "user",
    common.ERROR_DOMAIN_EXTERNAL: "external",
}


def _failure(error: common.TaskError) -> ev.TaskFailed:
    domain = _DOMAINS.get(error.domain, "internal")
    return ev.TaskFailed(error.message, domain, error.retryable, error.details)


class ControllerServicer(controller_pb2_grpc.ControllerServiceServicer):  # type: ignore[misc]
    def __init__(self, controller: Controller) -> None:
        self.c = controller

    async def RegisterNode(self, request: pb.RegisterNodeRequest, context: Any) -> Any:
        await self.c.register_node(request)
        return pb.RegisterNodeResponse()

    async def HeartbeatNode(self, request: pb.HeartbeatNodeRequest, context: Any) -> Any:
        return pb.HeartbeatNodeResponse(known=self.c.heartbeat_node(request))

    async def RegisterWorker(self, request: pb.RegisterWorkerRequest, context: Any) -> Any:
        self.c.report(request.job, ev.WorkerRegistered(request.job.worker_id, request.address))
        return pb.RegisterWorkerResponse()

    async def GetJobSecrets(self, request: pb.GetJobSecretsRequest, context: Any) -> Any:
        values = await self.c.job_secrets(request.job, request.keys)
        return pb.GetJobSecretsResponse(values=values)

    async def Heartbeat(self, request: pb.HeartbeatRequest, context: Any) -> Any:
        self.c.heartbeat(request)
        return pb.HeartbeatResponse()

    async def TaskStarted(self, request: pb.TaskStartedRequest, context: Any) -> Any:
        self.c.report(request.job, ev.TaskStarted())
        return pb.TaskStartedResponse()

    async def TaskCheckpointCompleted(
        self, request: pb.TaskCheckpointCompletedRequest, context: Any
    ) -> Any:
        checkpoint = Checkpoint(
            job_id=JobId(request.job.job_id),
            query=request.query,
            epoch=request.epoch,
            generation=request.job.generation,
            watermark_micros=request.watermark_micros or None,
            offsets_json=_offsets(request.offsets),
            state_rows=request.state_rows,
            state_bytes=request.state_bytes,
            rows_in=request.rows_in,
            duration_micros=request.duration_micros,
            finished_at=request.finished_micros,
        )
        self.c.report(request.job, ev.CheckpointCompleted(checkpoint))
        return pb.TaskCheckpointCompletedResponse()

    async def TaskFailed(self, request: pb.TaskFailedRequest, context: Any) -> Any:
        self.c.report(request.job, _failure(request.error))
        return pb.TaskFailedResponse()

    async def NonfatalError(self, request: pb.NonfatalErrorRequest, context: Any) -> Any:
        ctx = self.c.context(request.job)
        f = _failure(request.error)
        await ctx.record_error(f.message, f.domain, f.retryable, f.details)
        return pb.NonfatalErrorResponse()

    async def TaskFinished(self, request: pb.TaskFinishedRequest, context: Any) -> Any:
        self.c.report(request.job, ev.TaskFinished())
        return pb.TaskFinishedResponse()

    async def WorkerFinished(self, request: pb.WorkerFinishedRequest, context: Any) -> Any:
        self.c.report(request.job, ev.WorkerFinished())
        return pb.WorkerFinishedResponse()

    async def JobMetrics(self, request: pb.JobMetricsRequest, context: Any) -> Any:
        self.c.record_metrics(request)
        return pb.JobMetricsResponse()

    async def SendSinkData(self, request: pb.SendSinkDataRequest, context: Any) -> Any:
        self.c.publish(request)
        return pb.SendSinkDataResponse()

    async def SubscribeToOutput(
        self, request: pb.SubscribeToOutputRequest, context: Any
    ) -> AsyncIterator[pb.SubscribeToOutputResponse]:
        async for batch in self.c.subscribe(request.job_id):
            yield pb.SubscribeToOutputResponse(query=batch.query, rows=batch.rows, done=batch.done)

    async def GetJobStatus(self, request: pb.GetJobStatusRequest, context: Any) -> Any:
        return self.c.job_status(request.job_id)

    async def GetJobMetrics(self, request: pb.GetJobMetricsRequest, context: Any) -> Any:
        return self.c.job_metrics(request.job_id, request.operators)

    async def JobsChanged(self, request: pb.JobsChangedRequest, context: Any) -> Any:
        self.c.jobs_changed()
        return pb.JobsChangedResponse()

    async def ListNodes(self, request: pb.ListNodesRequest, context: Any) -> Any:
        return pb.ListNodesResponse(nodes=self.c.list_nodes())


def _offsets(offsets: Any) -> str:
    import json

    return json.dumps({o.source: o.offset_json for o in offsets}, sort_keys=True)
