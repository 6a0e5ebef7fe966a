"""Services in-process for tests, on the real servicers.

``serving`` starts a real service (``arroyo.service``: a gRPC server and its admin server) in
this process (on ports it binds itself, no signal handlers, no global logging or tracing setup)
and stops it however the test ends. What it hosts is always the servicer a deployment runs
(``services/<name>/servicer.py``, imported as ``arroyo_services.<name>.servicer``): every rpc a
test makes goes through the code a deployment runs, and only what stands behind it may be
scripted:

- ``compiler_service``: the compiler's servicer over a real ``arroyo.compiler.Compiler``.
- ``controller_service``: the controller's servicer over a ``Controller``: a real one, or a
  ``ScriptedController`` (a real controller that is never started, with the output a running job
  would stream scripted by the test).
- ``worker_service``: the worker's servicer over a ``ScriptedWorkerRuntime`` (what it reports, and
  what StartExecution does, scripted by the test: no Spark, no controller).
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from opentelemetry.sdk.trace import TracerProvider

from arroyo.config import Config
from arroyo.controller import Controller
from arroyo.controller.controller import OutputBatch
from arroyo.service import Listen, RunningService, start
from arroyo.worker import Phase, WorkerIdentity, WorkerRuntime
from arroyo_rpc.v1 import (
    common_pb2,
    compiler_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    worker_pb2_grpc,
)

# services/ installs as arroyo_services through the editable install's finder, which mypy does
# not follow.
from arroyo_services.compiler.servicer import (  # type: ignore[import-not-found, unused-ignore]
    CompilerServicer,
)
from arroyo_services.controller.servicer import (  # type: ignore[import-not-found, unused-ignore]
    ControllerServicer,
)
from arroyo_services.worker.servicer import (  # type: ignore[import-not-found, unused-ignore]
    WorkerServicer,
)

if TYPE_CHECKING:
    from arroyo.compiler import Compiler
    from arroyo.store import Store

# (add_XServicer_to_server, servicer): what ``serving`` hosts.
Hosted = tuple[Callable[[Any, Any], None], Any]


@asynccontextmanager
async def serving(
    *servicers: Hosted,
    status: Callable[[], Mapping[str, object]] | None = None,
    tracer_provider: TracerProvider | None = None,
    name: str = "test-service",
    port: int = 0,
    config: Config | None = None,
) -> AsyncIterator[RunningService]:
    """A running service hosting ``servicers``, on ``port`` (0: a free one), started with
    ``config`` (default: the defaults; one with a ``tls`` section serves mutual TLS)."""

    def register(server: Any) -> None:
        for add, servicer in servicers:
            add(servicer, server)

    running = await start(
        name,
        config or Config(),
        listen=Listen(grpc_port=port),
        register=register,
        status=status,
        tracer_provider=tracer_provider,
    )
    try:
        yield running
    finally:
        await running.stop(grace_s=0)


def compiler_service(compiler: Compiler) -> Hosted:
    """The compiler service as deployed, over ``compiler``."""
    return (compiler_pb2_grpc.add_CompilerServiceServicer_to_server, CompilerServicer(compiler))


def controller_service(controller: Controller) -> Hosted:
    """The controller service as deployed, over ``controller`` (a ``ScriptedController``
    where the test runs no nodes and workers)."""
    add = controller_pb2_grpc.add_ControllerServiceServicer_to_server
    return (add, ControllerServicer(controller))


def worker_service(runtime: ScriptedWorkerRuntime) -> Hosted:
    """The worker service as deployed, over a scripted runtime."""
    servicer = WorkerServicer()
    # The servicer takes any runtime; a scripted one has the methods it calls.
    servicer.runtime = cast(WorkerRuntime, runtime)
    return (worker_pb2_grpc.add_WorkerServiceServicer_to_server, servicer)


class ScriptedController(Controller):
    """An ``arroyo.controller.Controller`` that is never started: it adopts no job and schedules
    nothing, so jobs stay as the store has them. What it answers is the real controller's: its
    nodes (register them with ``register_node``, take slots with ``nodes.assign``), the metrics
    recorded for a job (``report_metrics``, as a running job's worker would), not_found for the
    status of a job it does not run. A test scripts what only a running job would produce:

    - ``output``: what a job's output stream yields, by job id (``any_job_output`` for any other
      job): batches until one is ``done``, or an exception in the list, raised when reached,
      or an ``asyncio.Event``, awaited when reached (the stream open and quiet until it is set);
    - ``endless``: jobs whose stream yields a row per batch until the subscriber leaves;
    - ``stream_closed`` is set when an output stream ends, however it ends;
    - ``nudges`` counts the JobsChanged it was sent.
    """

    def __init__(self, store: Store | None = None) -> None:
        # Only start() reads the store (a double is never started): the rpc layer's tests,
        # which have none, pass none.
        super().__init__(Config(), cast("Store", store))
        # It has no jobs to read: it answers as a controller that has read them.
        self.synced = True
        self.nudges = 0
        self.output: dict[str, list[OutputBatch | Exception | asyncio.Event]] = {}
        self.any_job_output: list[OutputBatch | Exception | asyncio.Event] = []
        self.endless: set[str] = set()
        self.stream_closed = asyncio.Event()

    def jobs_changed(self) -> None:
        self.nudges += 1
        super().jobs_changed()

    def report_nodes(
        self, job_id: str, time_micros: int, *nodes: controller_pb2.NodeMetrics
    ) -> None:
        """Keep a report of operators, as ``record_metrics`` keeps a running job's."""
        job = common_pb2.JobRef(job_id=job_id)
        request = controller_pb2.JobMetricsRequest(job=job, time_micros=time_micros, nodes=nodes)
        self.keep_metrics(request)

    def report_metrics(self, job_id: str, *samples: controller_pb2.MetricsSample) -> None:
        """What ``record_metrics`` keeps of a running job's reports (which this controller
        refuses: it runs no job)."""
        window = self.metrics.setdefault(
            job_id, collections.deque(maxlen=self.settings.metrics_window)
        )
        window.extend(samples)

    async def subscribe(self, job_id: str) -> AsyncIterator[OutputBatch]:
        try:
            if job_id in self.endless:
                batch = 0
                while True:
                    yield OutputBatch("out", [json.dumps({"batch": batch})], done=False)
                    batch += 1
                    await asyncio.sleep(0)
            for item in self.output.get(job_id, self.any_job_output):
                if isinstance(item, asyncio.Event):
                    await item.wait()  # the stream stays open, with nothing to say, until set
                    continue
                if isinstance(item, Exception):
                    raise item
                yield item
                if item.done:
                    return
        finally:
            self.stream_closed.set()


class ScriptedWorkerRuntime:
    """What the worker's servicer calls of ``arroyo.worker.WorkerRuntime``, with no Spark and no
    controller behind it. ``identity`` and ``phase`` are what GetWorkerPhase reports;
    StartExecution awaits ``on_start(program_json)`` (which raises to fail the call, or waits to
    keep it in flight) and then the phase is Running; StopExecution makes it Stopped."""

    def __init__(
        self,
        identity: WorkerIdentity | None = None,
        phase: Phase = Phase.IDLE,
        on_start: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.identity = identity or WorkerIdentity("job-1", 1, "worker-1", "node-1", 1)
        self.phase = phase
        self.on_start = on_start

    async def start_execution(
        self, program_json: str, state_dir: str, restore: bool, interval_micros: int
    ) -> None:
        if self.on_start is not None:
            await self.on_start(program_json)
        self.phase = Phase.RUNNING

    def stop_execution(self, *, graceful: bool) -> None:
        self.phase = Phase.STOPPED
