"""Typed facades over the generated stubs: the only way domain code calls another service.

One class per service, one method per rpc, taking and returning the generated messages. A
client is made on the event loop that uses it, from an address (``host:port``; the client opens
and, on ``close``, closes its own channel) or from a channel of ``arroyo.rpc.channel`` (shared;
its owner closes it). Unary methods carry a deadline, ``timeout_s`` of the client (10 s unless
given) or of the call; streams have none. A unary call fails at once when the peer cannot be
reached, unless made with ``wait_for_ready=True``: it then waits, within its deadline, for the
peer to come up (a service still starting). ``connected`` asks whether the peer can be reached
now, without a call. Every failure is an ``arroyo.rpc.RpcError`` with the remote error's code,
domain and retry hint (``arroyo.rpc.status``); an unreachable peer or a missed deadline is code
``unavailable``, domain external, retryable. ``tls`` (the process's ``arroyo.tls.load_identity``)
makes a client that opens its own channel use mutual TLS (``arroyo.rpc.channel``).

Replicas. An address may list several (``ip:port,ip:port``, ``arroyo.rpc.channel``).
``CompilerClient`` spreads its calls over the compilers and makes a call that failed
``UNAVAILABLE`` again on another (compiles are stateless, so a call may run twice): a compiler
killed mid-call costs its callers nothing but time. ``ControllerClient`` keeps to the one
controller that listens (the active one: a standby does not bind its port), and moves to the
other when it goes; its calls are not made again by the channel (callers retry, as they
always have for a controller that restarts).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Any, Self, TypeVar, cast

import grpc
import grpc.aio
from google.protobuf.message import Message

from arroyo.rpc.channel import channel, spread
from arroyo.rpc.status import call, translate
from arroyo.tls import TlsIdentity
from arroyo_rpc.v1 import (
    compiler_pb2,
    compiler_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    node_pb2,
    node_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)

R = TypeVar("R", bound=Message)

DEFAULT_TIMEOUT_S = 10.0

_COMPILERS = spread(compiler_pb2.DESCRIPTOR.services_by_name["CompilerService"].full_name)


class _Client:
    """Channel ownership, deadlines and error translation shared by the facades. A facade names
    its service's generated stub class (``_STUB``) and, for a replicated service, the channel's
    service config (``_SERVICE_CONFIG``)."""

    _STUB: Any
    _SERVICE_CONFIG: dict[str, Any] | None = None

    def __init__(
        self,
        target: str | Any,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        tls: TlsIdentity | None = None,
    ) -> None:
        self._owns_channel = isinstance(target, str)
        self._channel: Any = (
            channel(target, tls=tls, service_config=self._SERVICE_CONFIG)
            if isinstance(target, str)
            else target
        )
        self._stub = self._STUB(self._channel)
        self.timeout_s = timeout_s

    async def close(self) -> None:
        """Close the channel if this client opened it; calls in flight are cancelled."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def connected(self, timeout_s: float) -> bool:
        """Whether the channel is connected to the peer, dialling it if need be and waiting up
        to ``timeout_s`` for the connection. True means the peer's gRPC server accepts
        connections, not that any rpc will succeed; a peer that came up is noticed at the
        channel's next reconnection attempt (``arroyo.rpc.channel``: at most 5 s apart)."""
        if self._channel.get_state(try_to_connect=True) == grpc.ChannelConnectivity.READY:
            return True
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _unary(
        self,
        rpc: Any,
        request: Message,
        response: type[R],
        timeout_s: float | None,
        wait_for_ready: bool = False,
    ) -> R:
        # `response` is for the type checker: the stub's deserializer already makes one.
        timeout = self.timeout_s if timeout_s is None else timeout_s
        return cast(R, await call(rpc(request, timeout=timeout, wait_for_ready=wait_for_ready)))

    async def _stream(
        self, rpc: Any, request: Message, response: type[R]
    ) -> AsyncGenerator[R, None]:
        stream = rpc(request)
        try:
            async for item in stream:
                yield cast(R, item)
        except grpc.aio.AioRpcError as err:
            raise translate(err) from err
        finally:
            # A no-op when the stream ended; otherwise the server stops writing.
            stream.cancel()


class CompilerClient(_Client):
    """CompilerService, which the api calls: SQL, UDFs and the connection profiles tables may
    name in, a program or diagnostics out. A request's profiles hold secrets; never log it."""

    _STUB = compiler_pb2_grpc.CompilerServiceStub
    _SERVICE_CONFIG = _COMPILERS

    async def compile(
        self,
        request: compiler_pb2.CompileRequest,
        *,
        timeout_s: float | None = None,
        wait_for_ready: bool = False,
    ) -> compiler_pb2.CompileResponse:
        return await self._unary(
            self._stub.Compile, request, compiler_pb2.CompileResponse, timeout_s, wait_for_ready
        )

    async def validate_udfs(
        self,
        request: compiler_pb2.ValidateUdfsRequest,
        *,
        timeout_s: float | None = None,
        wait_for_ready: bool = False,
    ) -> compiler_pb2.ValidateUdfsResponse:
        return await self._unary(
            self._stub.ValidateUdfs,
            request,
            compiler_pb2.ValidateUdfsResponse,
            timeout_s,
            wait_for_ready,
        )


class ControllerClient(_Client):
    """ControllerService, which nodes, workers and the api call.

    Worker calls carry a ``JobRef``; one from a generation the controller gave up on fails with
    ``RpcError`` code ``stale_generation``.
    """

    _STUB = controller_pb2_grpc.ControllerServiceStub

    async def register_node(
        self, request: controller_pb2.RegisterNodeRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.RegisterNodeResponse:
        return await self._unary(
            self._stub.RegisterNode, request, controller_pb2.RegisterNodeResponse, timeout_s
        )

    async def heartbeat_node(
        self, request: controller_pb2.HeartbeatNodeRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.HeartbeatNodeResponse:
        return await self._unary(
            self._stub.HeartbeatNode, request, controller_pb2.HeartbeatNodeResponse, timeout_s
        )

    async def register_worker(
        self, request: controller_pb2.RegisterWorkerRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.RegisterWorkerResponse:
        return await self._unary(
            self._stub.RegisterWorker, request, controller_pb2.RegisterWorkerResponse, timeout_s
        )

    async def get_job_secrets(
        self, request: controller_pb2.GetJobSecretsRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.GetJobSecretsResponse:
        return await self._unary(
            self._stub.GetJobSecrets, request, controller_pb2.GetJobSecretsResponse, timeout_s
        )

    async def heartbeat(
        self, request: controller_pb2.HeartbeatRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.HeartbeatResponse:
        return await self._unary(
            self._stub.Heartbeat, request, controller_pb2.HeartbeatResponse, timeout_s
        )

    async def task_started(
        self, request: controller_pb2.TaskStartedRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.TaskStartedResponse:
        return await self._unary(
            self._stub.TaskStarted, request, controller_pb2.TaskStartedResponse, timeout_s
        )

    async def task_checkpoint_completed(
        self,
        request: controller_pb2.TaskCheckpointCompletedRequest,
        *,
        timeout_s: float | None = None,
    ) -> controller_pb2.TaskCheckpointCompletedResponse:
        return await self._unary(
            self._stub.TaskCheckpointCompleted,
            request,
            controller_pb2.TaskCheckpointCompletedResponse,
            timeout_s,
        )

    async def task_failed(
        self, request: controller_pb2.TaskFailedRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.TaskFailedResponse:
        return await self._unary(
            self._stub.TaskFailed, request, controller_pb2.TaskFailedResponse, timeout_s
        )

    async def nonfatal_error(
        self, request: controller_pb2.NonfatalErrorRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.NonfatalErrorResponse:
        return await self._unary(
            self._stub.NonfatalError, request, controller_pb2.NonfatalErrorResponse, timeout_s
        )

    async def task_finished(
        self, request: controller_pb2.TaskFinishedRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.TaskFinishedResponse:
        return await self._unary(
            self._stub.TaskFinished, request, controller_pb2.TaskFinishedResponse, timeout_s
        )

    async def worker_finished(
        self, request: controller_pb2.WorkerFinishedRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.WorkerFinishedResponse:
        return await self._unary(
            self._stub.WorkerFinished, request, controller_pb2.WorkerFinishedResponse, timeout_s
        )

    async def job_metrics(
        self, request: controller_pb2.JobMetricsRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.JobMetricsResponse:
        return await self._unary(
            self._stub.JobMetrics, request, controller_pb2.JobMetricsResponse, timeout_s
        )

    async def send_sink_data(
        self, request: controller_pb2.SendSinkDataRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.SendSinkDataResponse:
        return await self._unary(
            self._stub.SendSinkData, request, controller_pb2.SendSinkDataResponse, timeout_s
        )

    def subscribe_to_output(
        self, request: controller_pb2.SubscribeToOutputRequest
    ) -> AsyncGenerator[controller_pb2.SubscribeToOutputResponse, None]:
        """Responses as the server sends them, without a deadline. Breaking out of the loop
        cancels the call once the generator is collected; ``await it.aclose()`` cancels it now.
        """
        return self._stream(
            self._stub.SubscribeToOutput, request, controller_pb2.SubscribeToOutputResponse
        )

    async def get_job_status(
        self, request: controller_pb2.GetJobStatusRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.GetJobStatusResponse:
        return await self._unary(
            self._stub.GetJobStatus, request, controller_pb2.GetJobStatusResponse, timeout_s
        )

    async def get_job_metrics(
        self, request: controller_pb2.GetJobMetricsRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.GetJobMetricsResponse:
        return await self._unary(
            self._stub.GetJobMetrics, request, controller_pb2.GetJobMetricsResponse, timeout_s
        )

    async def jobs_changed(
        self, request: controller_pb2.JobsChangedRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.JobsChangedResponse:
        return await self._unary(
            self._stub.JobsChanged, request, controller_pb2.JobsChangedResponse, timeout_s
        )

    async def list_nodes(
        self, request: controller_pb2.ListNodesRequest, *, timeout_s: float | None = None
    ) -> controller_pb2.ListNodesResponse:
        return await self._unary(
            self._stub.ListNodes, request, controller_pb2.ListNodesResponse, timeout_s
        )


class NodeClient(_Client):
    """NodeService, which the controller calls: a machine's task slots and worker processes."""

    _STUB = node_pb2_grpc.NodeServiceStub

    async def start_worker(
        self, request: node_pb2.StartWorkerRequest, *, timeout_s: float | None = None
    ) -> node_pb2.StartWorkerResponse:
        return await self._unary(
            self._stub.StartWorker, request, node_pb2.StartWorkerResponse, timeout_s
        )

    async def stop_worker(
        self, request: node_pb2.StopWorkerRequest, *, timeout_s: float | None = None
    ) -> node_pb2.StopWorkerResponse:
        return await self._unary(
            self._stub.StopWorker, request, node_pb2.StopWorkerResponse, timeout_s
        )

    async def get_workers(
        self, request: node_pb2.GetWorkersRequest, *, timeout_s: float | None = None
    ) -> node_pb2.GetWorkersResponse:
        return await self._unary(
            self._stub.GetWorkers, request, node_pb2.GetWorkersResponse, timeout_s
        )


class WorkerClient(_Client):
    """WorkerService, which the controller calls: the one process of one running job."""

    _STUB = worker_pb2_grpc.WorkerServiceStub

    async def start_execution(
        self, request: worker_pb2.StartExecutionRequest, *, timeout_s: float | None = None
    ) -> worker_pb2.StartExecutionResponse:
        return await self._unary(
            self._stub.StartExecution, request, worker_pb2.StartExecutionResponse, timeout_s
        )

    async def stop_execution(
        self, request: worker_pb2.StopExecutionRequest, *, timeout_s: float | None = None
    ) -> worker_pb2.StopExecutionResponse:
        return await self._unary(
            self._stub.StopExecution, request, worker_pb2.StopExecutionResponse, timeout_s
        )

    async def get_worker_phase(
        self, request: worker_pb2.GetWorkerPhaseRequest, *, timeout_s: float | None = None
    ) -> worker_pb2.GetWorkerPhaseResponse:
        return await self._unary(
            self._stub.GetWorkerPhase, request, worker_pb2.GetWorkerPhaseResponse, timeout_s
        )
