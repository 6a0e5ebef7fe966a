"""The worker process's control side: registration, heartbeats, and reports to the controller.

A node starts one worker per job run (a *generation*). The worker starts its SparkSession,
registers with the controller, waits for ``StartExecution``, runs the program, reports each
committed micro-batch as a checkpoint, and exits once its run has ended and been reported.
Reports travel in order through one queue; if the controller is unreachable (it restarts) they
are retried until it answers, so a restarted controller adopts the worker instead of losing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from arroyo.config import Config
from arroyo.connectors import secrets
from arroyo.connectors.runtime.remote_state import RemoteState, is_remote
from arroyo.connectors.stdout.sink import route_stdout
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.program.spec import PipelineProgram
from arroyo.rpc import ControllerClient, RpcError
from arroyo.worker.execution import Execution, Phase
from arroyo.worker.operator_metrics import OperatorMetrics
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.engine.runner import BatchReport

log = structlog.get_logger(__name__)

_DOMAINS = {
    ErrorDomain.USER: common.ERROR_DOMAIN_USER,
    ErrorDomain.INTERNAL: common.ERROR_DOMAIN_INTERNAL,
    ErrorDomain.EXTERNAL: common.ERROR_DOMAIN_EXTERNAL,
}
_RETRY_SECONDS = 0.5
_CLOSE_TIMEOUT_S = 60.0
_REPORT_TIMEOUT_S = 10.0
# The controller's refusals that mean this worker's run is over: its job moved on to another
# generation or worker, or no longer has one, or is deleted.
_FENCING_CODES = frozenset(("stale_generation", "not_found"))


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    job_id: str
    generation: int
    worker_id: str
    node_id: str
    slots: int

    def ref(self) -> common.JobRef:
        return common.JobRef(
            job_id=self.job_id, generation=self.generation, worker_id=self.worker_id
        )


def micros(watermark: str | None) -> int:
    if not watermark:
        return 0
    return int(datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp() * 1_000_000)


class WorkerRuntime:
    """Owns the worker's execution and its conversation with the controller.

    Created on the event loop; ``start_execution`` and ``stop_execution`` are the gRPC handlers'
    entry points. ``done`` is set once the run ended and the controller heard of it.
    """

    def __init__(
        self,
        config: Config,
        identity: WorkerIdentity,
        controller: ControllerClient,
        address: str,
        spark: SparkSession,
    ) -> None:
        self.spark = spark
        self.config = config
        self.identity = identity
        self.controller = controller
        self.address = address
        self.execution: Execution | None = None
        self.done = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._outbox: asyncio.Queue[Callable[[], Coroutine[Any, Any, Any]]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        # The process's exit code once the run is over: non-zero when it fenced itself.
        self.exit_code = 0
        self._fenced = False
        # monotonic: the controller's last answer to a heartbeat (or to the registration).
        self._last_ack = time.monotonic()

    @property
    def phase(self) -> Phase:
        return self.execution.phase if self.execution else Phase.IDLE

    async def run(self) -> None:
        """Register, then heartbeat and deliver reports until the run is over."""
        ref = self.identity.ref()
        await self._deliver(
            lambda: self.controller.register_worker(
                pb.RegisterWorkerRequest(
                    job=ref,
                    node_id=self.identity.node_id,
                    address=self.address,
                    slots=self.identity.slots,
                )
            )
        )
        self._last_ack = time.monotonic()
        log.info("worker_registered", job_id=ref.job_id, generation=ref.generation)
        self._tasks = [
            asyncio.create_task(self._heartbeats()),
            asyncio.create_task(self._sender()),
            asyncio.create_task(self._watchdog()),
        ]

    def fence_after_s(self) -> float:
        """How long this worker runs on without an answer to its heartbeats: two of its
        heartbeat intervals less than the controller's worker heartbeat timeout, so it has
        stopped before the controller takes it for dead and starts a new generation."""
        interval = self.config.worker.heartbeat_interval_s
        return max(interval, self.config.controller.heartbeat_timeout_s - 2 * interval)

    def fence(self, reason: str, *, exit_code: int) -> None:
        """Stop the execution at once (its queries stopped, no further commit) and exit: the
        controller refused this worker (its job moved on, stopped or is gone), or has not
        answered for too long to be sure it has not."""
        if self._fenced:
            return
        self._fenced = True
        self.exit_code = exit_code
        log.warning("worker_fenced", job_id=self.identity.job_id, reason=reason)
        if self.execution is not None:
            self.execution.stop(graceful=False)
        self.done.set()

    async def _watchdog(self) -> None:
        interval = self.config.worker.heartbeat_interval_s
        limit = self.fence_after_s()
        while True:
            await asyncio.sleep(interval / 2)
            silent = time.monotonic() - self._last_ack
            if silent > limit:
                log.error(
                    "worker_self_fenced",
                    job_id=self.identity.job_id,
                    generation=self.identity.generation,
                    silent_s=round(silent, 1),
                    limit_s=limit,
                    reason="the controller has not answered a heartbeat: stopping before it "
                    "can fail the job over",
                )
                self.fence("controller silent", exit_code=3)
                return

    async def close(self) -> None:
        """On SIGTERM: stop after the batch in flight commits, and tell the controller (for a
        while: a controller that is gone too learns it from the missing heartbeats)."""
        if self._fenced:
            if self.execution is not None:
                self.execution.stop(graceful=False)  # one started as it was fenced, too
                await asyncio.to_thread(self.execution.join, _CLOSE_TIMEOUT_S)
        elif self.execution is not None and self.phase in (Phase.RUNNING, Phase.STOPPING):
            self.execution.stop(graceful=True)
            await asyncio.to_thread(self.execution.join, _CLOSE_TIMEOUT_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), _REPORT_TIMEOUT_S)
        for task in self._tasks:
            task.cancel()

    async def start_execution(
        self, program_json: str, state_dir: str, restore: bool, interval_micros: int
    ) -> None:
        if self.execution is not None:
            raise ArroyoError("this worker already runs its program", code="already_running")
        program = await self._with_secrets(PipelineProgram.from_json(program_json))
        if self._fenced:
            raise ArroyoError("this worker has stopped: its run is over", code="stale_generation")
        route_stdout(self._live_output)
        # A warm worker's session was made before its job was known.
        from arroyo.engine.session import DELTA_SNAPSHOT_PARTITIONS

        self.spark.conf.set("spark.sql.shuffle.partitions", str(program.parallelism))
        self.spark.conf.set(DELTA_SNAPSHOT_PARTITIONS, str(program.parallelism))
        if is_remote(state_dir):
            # The job's state in an object store (checkpoint_url), worked on in a directory
            # of this worker's own.
            local = Path(tempfile.mkdtemp(prefix=f"arroyo-{self.identity.job_id}-"))
            try:
                remote: RemoteState | None = RemoteState(state_dir, local)
            except ArroyoError:
                shutil.rmtree(local, ignore_errors=True)  # the execution never owned it
                raise
        else:
            local, remote = Path(state_dir), None
        self.execution = Execution(
            self.spark,
            program,
            local,
            _Reports(self),
            remote=remote,
            restore=restore,
            trigger_interval_ms=interval_micros // 1000,
        )
        self.execution.start()
        log.info("execution_started", job_id=self.identity.job_id, restore=restore)

    async def _with_secrets(self, program: PipelineProgram) -> PipelineProgram:
        """The program with its secret options' values, asked of the controller: the program a
        worker is sent refers to them only (``arroyo.connectors.secrets``)."""
        wanted = sorted(secrets.wanted(program))
        if not wanted:
            return program
        request = pb.GetJobSecretsRequest(job=self.identity.ref(), keys=wanted)
        response = await self.controller.get_job_secrets(request)
        return secrets.put(program, dict(response.values))

    def _live_output(self, sink: str, rows: list[str]) -> None:
        request = pb.SendSinkDataRequest(job=self.identity.ref(), query=sink, rows=rows)
        self.queue(lambda: self.controller.send_sink_data(request))

    def stop_execution(self, *, graceful: bool) -> None:
        if self.execution is None:
            self.end_run()
            return
        self.execution.stop(graceful=graceful)

    # reports, queued in order from the execution thread

    def queue(self, call: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self._loop.call_soon_threadsafe(self._outbox.put_nowait, call)

    def end_run(self) -> None:
        """Tell the controller this worker is done (after every report queued before it),
        then let the process exit."""
        request = pb.WorkerFinishedRequest(job=self.identity.ref())
        self.queue(lambda: self.controller.worker_finished(request))
        self.queue(self._finish)

    async def _finish(self) -> None:
        self.done.set()

    async def _sender(self) -> None:
        while True:
            call = await self._outbox.get()
            await self._deliver(call)

    async def _deliver(self, call: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Retry while the controller is unreachable; give up on a refusal, and stop at once on
        one that says this worker is not its job's any more (a stale generation, or a job that
        is gone)."""
        while True:
            try:
                await call()
                return
            except RpcError as err:
                if err.retryable:
                    await asyncio.sleep(_RETRY_SECONDS)
                    continue
                log.warning("report_refused", code=err.code, error=err.message)
                if err.code in _FENCING_CODES:
                    self.fence(err.code, exit_code=0)
                return

    async def _heartbeats(self) -> None:
        interval = self.config.worker.heartbeat_interval_s
        while True:
            request = pb.HeartbeatRequest(
                job=self.identity.ref(),
                time_micros=time.time_ns() // 1000,
                address=self.address,
                phase=str(self.phase),
            )
            try:
                await self.controller.heartbeat(request)
                self._last_ack = time.monotonic()
            except RpcError as err:
                if not err.retryable:
                    log.warning("heartbeat_refused", code=err.code, error=err.message)
                    if err.code in _FENCING_CODES:
                        # The controller gave this run up, or the job is gone: stop at once
                        # and exit.
                        self.fence(err.code, exit_code=0)
            await asyncio.sleep(interval)


class _Reports:
    """The execution's Reporter: turns each event into a queued controller call."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.runtime = runtime
        self.ref = runtime.identity.ref()
        self.operators = OperatorMetrics(runtime.identity.job_id)

    def started(self) -> None:
        request = pb.TaskStartedRequest(job=self.ref)
        self.runtime.queue(lambda: self.runtime.controller.task_started(request))

    def batch(self, report: BatchReport) -> None:
        now = time.time_ns() // 1000
        checkpoint = pb.TaskCheckpointCompletedRequest(
            job=self.ref,
            query=report.query,
            epoch=report.batch_id,
            offsets=[pb.SourceOffset(source=s, offset_json=o) for s, o in report.offsets.items()],
            watermark_micros=micros(report.watermark),
            state_rows=report.state_rows,
            state_bytes=report.state_bytes,
            duration_micros=report.duration_ms * 1000,
            rows_in=report.rows_in,
            finished_micros=now,
        )
        metrics = pb.JobMetricsRequest(
            job=self.ref,
            time_micros=now,
            operators=[
                pb.OperatorMetrics(
                    query=report.query,
                    rows_in=report.rows_in,
                    rows_in_per_second=report.input_rows_per_second,
                    rows_processed_per_second=report.processed_rows_per_second,
                    batch_duration_micros=report.duration_ms * 1000,
                    state_rows=report.state_rows,
                    state_bytes=report.state_bytes,
                    dropped_bad_records=report.dropped_bad_records,
                    dropped_overflow_messages=report.dropped_overflow_messages,
                    watermark_micros=micros(report.watermark),
                )
            ],
            nodes=self.operators.nodes(report),
        )
        controller = self.runtime.controller
        self.runtime.queue(lambda: controller.task_checkpoint_completed(checkpoint))
        self.runtime.queue(lambda: controller.job_metrics(metrics))

    def finished(self) -> None:
        # Whoever watches the live output learns that there is no more.
        done = pb.SendSinkDataRequest(job=self.ref, done=True)
        self.runtime.queue(lambda: self.runtime.controller.send_sink_data(done))
        request = pb.TaskFinishedRequest(job=self.ref)
        self.runtime.queue(lambda: self.runtime.controller.task_finished(request))
        self.runtime.end_run()

    def stopped(self) -> None:
        self.runtime.end_run()

    def failed(self, error: ArroyoError) -> None:
        request = pb.TaskFailedRequest(
            job=self.ref,
            error=common.TaskError(
                message=error.message,
                domain=_DOMAINS[error.domain],
                retryable=error.retryable,
                details=error.code,
            ),
        )
        self.runtime.queue(lambda: self.runtime.controller.task_failed(request))
        self.runtime.queue(self.runtime._finish)
