"""arroyo.rpc over real gRPC servers: error translation both ways, deadlines, streams, tracing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from arroyo.compiler import Compiler
from arroyo.controller.controller import OutputBatch, UnknownJobError
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.rpc import (
    CompilerClient,
    ControllerClient,
    RpcError,
    WorkerClient,
    channel,
    status_for,
)
from arroyo.testing.ports import free_port
from arroyo.worker import Phase, WorkerIdentity
from arroyo_rpc.v1 import (
    common_pb2,
    compiler_pb2,
    controller_pb2,
    worker_pb2,
)
from tests.services import (
    Hosted,
    ScriptedController,
    ScriptedWorkerRuntime,
    compiler_service,
    controller_service,
    serving,
    worker_service,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class JobNotFoundError(ArroyoError):
    code = "not_found"
    domain = ErrorDomain.USER


class BadQueryError(ArroyoError):
    code = "bad_query"
    domain = ErrorDomain.USER


class StaleGenerationError(ArroyoError):
    code = "stale_generation"


class KafkaDownError(ArroyoError):
    code = "kafka_down"
    domain = ErrorDomain.EXTERNAL
    retryable = True


async def fail_as_the_program_says(program_json: str) -> None:
    """StartExecution of the worker of these tests: its program is the name of a case, which
    says how it fails (or that it never returns)."""
    match program_json:
        case "missing":
            raise JobNotFoundError("no job missing")
        case "bad":
            raise BadQueryError("no such table")
        case "stale":
            raise StaleGenerationError("generation 2 is not current")
        case "flaky":
            raise KafkaDownError("broker unreachable")
        case "broken":
            raise ArroyoError("invariant violated")
        case "bug":
            raise RuntimeError("servicer bug")
        case "relay":
            # A call to a peer that is down: its RpcError travels on unchanged.
            async with WorkerClient(f"127.0.0.1:{free_port()}") as peer:
                await peer.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
        case "hang":
            await asyncio.Event().wait()


def worker() -> Hosted:
    """The worker service, reporting job-1 at generation 3 Running; StartExecution fails as its
    program says."""
    identity = WorkerIdentity("job-1", 3, "worker-1", "node-1", 1)
    return worker_service(
        ScriptedWorkerRuntime(identity, Phase.RUNNING, on_start=fail_as_the_program_says)
    )


def controller_with_output() -> ScriptedController:
    """A controller whose output streams are: job-1's three batches then done, vanishing's one
    then not_found, and endless."""
    controller = ScriptedController()
    controller.output["job-1"] = [
        OutputBatch("q", ['{"a":1}'], done=False),
        OutputBatch("q", ['{"a":2}'], done=False),
        OutputBatch("q", [], done=True),
    ]
    controller.output["vanishing"] = [
        OutputBatch("q", ['{"a":1}'], done=False),
        UnknownJobError("job vanishing was deleted"),
    ]
    controller.endless.add("endless")
    return controller


def start_request(case: str) -> worker_pb2.StartExecutionRequest:
    return worker_pb2.StartExecutionRequest(
        job=common_pb2.JobRef(job_id=case, generation=1), program_json=case
    )


@pytest.mark.parametrize(
    ("job_id", "code", "domain", "retryable", "status"),
    [
        ("missing", "not_found", ErrorDomain.USER, False, grpc.StatusCode.NOT_FOUND),
        ("bad", "bad_query", ErrorDomain.USER, False, grpc.StatusCode.INVALID_ARGUMENT),
        (
            "stale",
            "stale_generation",
            ErrorDomain.INTERNAL,
            False,
            grpc.StatusCode.FAILED_PRECONDITION,
        ),
        ("flaky", "kafka_down", ErrorDomain.EXTERNAL, True, grpc.StatusCode.UNAVAILABLE),
        ("broken", "internal", ErrorDomain.INTERNAL, False, grpc.StatusCode.INTERNAL),
        ("bug", "internal", ErrorDomain.INTERNAL, False, grpc.StatusCode.INTERNAL),
        ("relay", "unavailable", ErrorDomain.EXTERNAL, True, grpc.StatusCode.UNAVAILABLE),
    ],
)
async def test_servicer_errors_reach_the_caller_as_rpc_errors(
    job_id: str, code: str, domain: ErrorDomain, retryable: bool, status: Any
) -> None:
    async with (
        serving(worker()) as running,
        WorkerClient(running.grpc_address) as client,
    ):
        with pytest.raises(RpcError) as caught:
            await client.start_execution(start_request(job_id))
        # The service keeps answering after a failed call.
        phase = await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
        assert phase.phase == worker_pb2.WORKER_PHASE_RUNNING
    err = caught.value
    assert (err.code, err.domain, err.retryable, err.status) == (code, domain, retryable, status)
    assert isinstance(err.__cause__, grpc.aio.AioRpcError)


async def test_a_successful_call_returns_the_generated_message() -> None:
    async with (
        serving(worker()) as running,
        WorkerClient(running.grpc_address) as client,
    ):
        response = await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
    assert isinstance(response, worker_pb2.GetWorkerPhaseResponse)
    assert (response.job.job_id, response.job.generation) == ("job-1", 3)


async def test_a_stop_for_another_job_or_generation_is_refused() -> None:
    """A worker outlives its node, and the controller may ask it to stop directly; a stop
    meant for the worker that had this address before (its port reused) stops nothing."""
    identity = WorkerIdentity("job-1", 3, "worker-1", "node-1", 1)
    runtime = ScriptedWorkerRuntime(identity, Phase.RUNNING)
    async with (
        serving(worker_service(runtime)) as running,
        WorkerClient(running.grpc_address) as client,
    ):
        for job_id, generation in (("job-1", 2), ("job-2", 3)):
            stale = common_pb2.JobRef(job_id=job_id, generation=generation)
            with pytest.raises(RpcError) as refused:
                await client.stop_execution(
                    worker_pb2.StopExecutionRequest(job=stale, mode=common_pb2.STOP_MODE_IMMEDIATE)
                )
            assert refused.value.code == "stale_generation"
        assert runtime.phase is Phase.RUNNING
        current = common_pb2.JobRef(job_id="job-1", generation=3)
        await client.stop_execution(
            worker_pb2.StopExecutionRequest(job=current, mode=common_pb2.STOP_MODE_IMMEDIATE)
        )
    assert runtime.phase is Phase.STOPPED


async def test_an_unreachable_peer_is_unavailable_and_retryable() -> None:
    async with WorkerClient(f"127.0.0.1:{free_port()}", timeout_s=5) as client:
        with pytest.raises(RpcError) as caught:
            await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
    err = caught.value
    assert (err.code, err.domain, err.retryable) == ("unavailable", ErrorDomain.EXTERNAL, True)
    assert err.status == grpc.StatusCode.UNAVAILABLE


async def test_connected_says_whether_the_peer_can_be_reached() -> None:
    async with (
        serving(worker()) as up,
        WorkerClient(str(up.grpc_address)) as reachable,
        WorkerClient(f"127.0.0.1:{free_port()}") as unreachable,
    ):
        assert (await reachable.connected(5), await unreachable.connected(0.2)) == (True, False)


UDFS = "from arroyo_udf import udf\n\n@udf\ndef f(x: int) -> int:\n    return x\n"


async def test_wait_for_ready_waits_for_a_peer_that_comes_up_within_the_deadline() -> None:
    port = free_port()
    async with CompilerClient(f"127.0.0.1:{port}") as client:
        call = asyncio.create_task(
            client.validate_udfs(
                compiler_pb2.ValidateUdfsRequest(udfs=UDFS), timeout_s=30, wait_for_ready=True
            )
        )
        # Without wait_for_ready the call fails at once (the test above); this one waits.
        done, _ = await asyncio.wait({call}, timeout=0.5)
        assert not done
        # Validating UDFs needs no Spark.
        compiler = Compiler(cast("SparkSession", None))
        async with serving(compiler_service(compiler), port=port):
            response = await call
    assert [udf.name for udf in response.udfs] == ["f"]


async def test_a_missed_deadline_is_unavailable_and_retryable() -> None:
    async with (
        serving(worker()) as running,
        WorkerClient(running.grpc_address) as client,
    ):
        with pytest.raises(RpcError) as caught:
            # The program "hang" never starts.
            await client.start_execution(start_request("hang"), timeout_s=0.2)
    err = caught.value
    assert (err.code, err.domain, err.retryable) == ("unavailable", ErrorDomain.EXTERNAL, True)
    assert err.status == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_stream_yields_every_response_in_order() -> None:
    async with (
        serving(controller_service(controller_with_output())) as running,
        ControllerClient(running.grpc_address) as client,
    ):
        request = controller_pb2.SubscribeToOutputRequest(job_id="job-1")
        responses = [response async for response in client.subscribe_to_output(request)]
    assert [list(r.rows) for r in responses] == [['{"a":1}'], ['{"a":2}'], []]
    assert [r.done for r in responses] == [False, False, True]


async def test_a_stream_that_fails_raises_after_what_it_sent() -> None:
    received: list[str] = []
    async with (
        serving(controller_service(controller_with_output())) as running,
        ControllerClient(running.grpc_address) as client,
    ):
        request = controller_pb2.SubscribeToOutputRequest(job_id="vanishing")
        with pytest.raises(RpcError) as caught:
            async for response in client.subscribe_to_output(request):
                received.extend(response.rows)
    err = caught.value
    assert received == ['{"a":1}']
    assert (err.code, err.domain, err.status) == (
        "not_found",
        ErrorDomain.USER,
        grpc.StatusCode.NOT_FOUND,
    )


async def test_leaving_a_stream_early_cancels_it_on_the_server() -> None:
    controller = controller_with_output()
    async with (
        serving(controller_service(controller)) as running,
        ControllerClient(running.grpc_address) as client,
    ):
        stream = client.subscribe_to_output(
            controller_pb2.SubscribeToOutputRequest(job_id="endless")
        )
        first = await anext(stream)
        assert list(first.rows) == ['{"batch": 0}']
        await stream.aclose()
        # The servicer's generator is closed by the cancellation, not by the server's stop.
        await asyncio.wait_for(controller.stream_closed.wait(), timeout=10)


async def test_client_and_server_spans_share_the_trace() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with serving(worker(), tracer_provider=provider) as running:
        shared = channel(running.grpc_address or "", tracer_provider=provider)
        try:
            client = WorkerClient(shared)
            with provider.get_tracer("test").start_as_current_span("controller_tick"):
                await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
                with pytest.raises(RpcError):
                    await client.start_execution(start_request("missing"))
        finally:
            await shared.close()
    spans = exporter.get_finished_spans()
    (outer,) = [s for s in spans if s.name == "controller_tick"]
    for method, status_code in [("GetWorkerPhase", 0), ("StartExecution", 5)]:
        name = f"arroyo_rpc.v1.WorkerService/{method}"
        client = _one(spans, name, SpanKind.CLIENT)
        server = _one(spans, name, SpanKind.SERVER)
        assert client.context is not None and server.context is not None
        assert server.context.trace_id == client.context.trace_id == _trace_id(outer)
        assert server.parent is not None and server.parent.span_id == client.context.span_id
        assert client.parent is not None and client.parent.span_id == _span_id(outer)
        for span in (client, server):
            assert span.attributes is not None
            assert span.attributes["rpc.grpc.status_code"] == status_code
            expected = StatusCode.UNSET if status_code == 0 else StatusCode.ERROR
            assert span.status.status_code == expected


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (JobNotFoundError("x"), grpc.StatusCode.NOT_FOUND),
        # Code before domain: a stale generation is refused as a precondition, whatever its domain.
        (StaleGenerationError("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (BadQueryError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (KafkaDownError("x"), grpc.StatusCode.UNAVAILABLE),
        (ArroyoError("x"), grpc.StatusCode.INTERNAL),
    ],
)
def test_status_for_an_arroyo_error(error: ArroyoError, status: Any) -> None:
    assert status_for(error) == status


def test_an_external_error_that_is_not_retryable_is_internal_on_the_wire() -> None:
    class SchemaMismatchError(ArroyoError):
        code = "schema_mismatch"
        domain = ErrorDomain.EXTERNAL

    assert status_for(SchemaMismatchError("x")) == grpc.StatusCode.INTERNAL


def _one(spans: tuple[ReadableSpan, ...], name: str, kind: SpanKind) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name and s.kind == kind]
    return span


def _trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def _span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id
