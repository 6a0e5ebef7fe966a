"""The controller: a driver per job, the node registry, and the monitors that notice failure.

The api writes what users want into the database; the controller reads it (every
``poll_interval_s``, and at once when the api sends ``JobsChanged``), starts a driver for each
job, and hands changed configs to the drivers as events. Workers' reports arrive through the
gRPC servicer and are routed here; a report from any worker but the job's current one (another
generation, another worker id, or a job in a state that has no worker) is refused, and the
worker stops on the refusal, so a worker the controller gave up on cannot move its job.

A controller restart loses nothing: job states are in the database, a running worker keeps
heartbeating (retrying until the new controller answers) and is adopted by the driver that
resumes in Running, and nodes re-register when their heartbeat is not recognised (their slots
that adopted jobs hold are counted taken again then). A standby that takes over the lease
(``arroyo.controller.lease``) is a restarted controller in this sense: it starts from the
database alone.

A node is not its workers' lifeline: a worker runs on when its node is killed, and the node
restarted at its address adopts it and lists it when it registers; the job stays Running in its
generation, moved onto the new node. So a node that goes silent fails over only the jobs whose
workers had not registered yet; a registered worker is lost when its own heartbeats stop (a
machine that is really gone), or when the node that replaced its own does not list it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import structlog

from arroyo.config import Config
from arroyo.controller import events
from arroyo.controller.context import JobContext
from arroyo.controller.driver import JobDriver
from arroyo.controller.history import MetricsHistory
from arroyo.controller.nodes import NodeRegistry
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.program.spec import PipelineProgram
from arroyo.rpc import NodeClient, RpcError
from arroyo.store import JobId, JobState, Lease, Store
from arroyo.tls import TlsIdentity
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import controller_pb2 as pb
from arroyo_rpc.v1 import node_pb2

log = structlog.get_logger(__name__)

# The monitor looks at nodes and heartbeats this often.
MONITOR_INTERVAL_S = 0.5
_RECENT_OUTPUT_BATCHES = 100


class StaleGenerationError(ArroyoError):
    """A worker of a generation the controller has moved on from."""

    code = "stale_generation"
    domain = ErrorDomain.USER


class UnknownJobError(ArroyoError):
    code = "not_found"
    domain = ErrorDomain.USER


class NotSyncedError(ArroyoError):
    """The controller has not read the jobs yet (it just started, or took over the lease): a
    worker's call or a node's registration is answered with this retryable error, never with
    a refusal, so that no live job's worker stops and no adopted worker's move is lost."""

    code = "unavailable"
    domain = ErrorDomain.EXTERNAL
    retryable = True


# The states in which a job has a worker that may call: any other (terminal, Created,
# Compiling, Recovering, Failing) has none, and a worker that calls is refused and stops.
_WORKER_STATES = frozenset(
    (
        JobState.SCHEDULING,
        JobState.RUNNING,
        JobState.CHECKPOINT_STOPPING,
        JobState.FINISHING,
        JobState.STOPPING,
        JobState.RESTARTING,
    )
)


@dataclass(frozen=True, slots=True)
class OutputBatch:
    query: str
    rows: list[str]
    done: bool


class Controller:
    """``tls``: the identity the controller's channels to nodes and workers show (mutual TLS,
    ``arroyo.tls``); None for plaintext."""

    def __init__(self, config: Config, store: Store, *, tls: TlsIdentity | None = None) -> None:
        self.config = config
        self.tls = tls
        self.settings = config.controller
        self.store = store
        self.nodes = NodeRegistry(self.settings.heartbeat_timeout_s)
        self.drivers: dict[JobId, JobDriver] = {}
        self.metrics: dict[str, collections.deque[pb.MetricsSample]] = {}
        self.histories: dict[str, MetricsHistory] = {}
        self.subscribers: dict[str, list[asyncio.Queue[OutputBatch]]] = {}
        # Recent output per job, replayed to a subscriber that arrives late (a short preview
        # may be over before the user's browser connects).
        self.recent_output: dict[str, collections.deque[OutputBatch]] = {}
        self._poke = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.state_root = config.checkpoint_url or str(config.data_dir / "checkpoints")
        # The lease this controller acts under, set before ``start``: its drivers' status
        # writes are fenced by it (None: unfenced, as in tests that run no lease).
        self.fence: Lease | None = None
        # Set once the first sync has read the jobs: until then workers and nodes are asked to
        # try again (NotSyncedError).
        self.synced = False
        # Stops of listed workers that are not their job's current one (register_node).
        self._stops: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self.sync()
        self.synced = True
        self._tasks = [
            asyncio.create_task(self._poll(), name="poll"),
            asyncio.create_task(self._monitor(), name="monitor"),
        ]

    async def close(self) -> None:
        for task in [*self._tasks, *self._stops]:
            task.cancel()
        for driver in self.drivers.values():
            await driver.stop()

    # the database

    async def sync(self) -> None:
        """Start drivers for new jobs, hand changed configs to running ones, stop drivers of
        deleted jobs."""
        jobs = await self.store.list_jobs()
        seen = set()
        for job in jobs:
            seen.add(job.id)
            driver = self.drivers.get(job.id)
            if driver is None:
                ctx = JobContext.of(
                    job,
                    self.store,
                    self.nodes,
                    self.settings,
                    self.state_root,
                    tls=self.tls,
                    fence=self.fence,
                )
                driver = JobDriver(ctx)
                self.drivers[job.id] = driver
                status = job.status
                if status.node_id and status.worker_id and not status.state.terminal:
                    # A worker this controller did not start (it took over, or restarted)
                    # holds slots on its node.
                    self.nodes.held(status.node_id, status.worker_id, job.config.parallelism)
                driver.start()
                log.info("job_adopted", job_id=job.id, state=str(job.status.state))
            elif driver.ctx.config != job.config:
                driver.ctx.config = job.config
                driver.ctx.events.put_nowait(events.ConfigChanged())
        for job_id in set(self.drivers) - seen:
            driver = self.drivers.pop(job_id)
            self.metrics.pop(job_id, None)
            self.histories.pop(job_id, None)
            self.recent_output.pop(job_id, None)
            await driver.ctx.kill_worker()
            await driver.stop()
            log.info("job_deleted", job_id=job_id)

    def jobs_changed(self) -> None:
        self._poke.set()

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), self.settings.poll_interval_s)
            self._poke.clear()
            try:
                await self.sync()
            except Exception:
                log.exception("sync_failed")

    async def _monitor(self) -> None:
        """Workers whose heartbeats stopped, and nodes that died, become WorkerLost events."""
        while True:
            await asyncio.sleep(MONITOR_INTERVAL_S)
            now = time.monotonic()
            expired = self.nodes.expired()
            replaced = {n.node_id for n in expired if n.replaced_by}
            silent = {n.node_id for n in expired if not n.replaced_by}
            for driver in self.drivers.values():
                ctx = driver.ctx
                if ctx.status.worker_id is None or ctx.status.state not in (
                    JobState.RUNNING,
                    JobState.SCHEDULING,
                    JobState.CHECKPOINT_STOPPING,
                    JobState.FINISHING,
                ):
                    continue
                if ctx.status.node_id in replaced:
                    # The new node at its address listed the workers it adopted: not this one.
                    self._lose(ctx, f"node {ctx.status.node_id} was replaced without its worker")
                elif ctx.status.node_id in silent and not ctx.status.worker_address:
                    self._lose(ctx, f"node {ctx.status.node_id} is gone")
                elif (
                    ctx.status.worker_address
                    and now - ctx.last_heartbeat > self.settings.heartbeat_timeout_s
                ):
                    self._lose(ctx, "heartbeats stopped")

    def _lose(self, ctx: JobContext, reason: str) -> None:
        ctx.last_heartbeat = time.monotonic()
        ctx.events.put_nowait(events.WorkerLost(reason))

    # nodes

    async def register_node(self, request: pb.RegisterNodeRequest) -> None:
        """A node (re)registers. A job whose current worker it lists (one it adopted from the
        node before it at its address) moves onto it. Its slots that jobs' workers hold are
        counted taken again: a controller that took over, or restarted, learns of them only
        from the jobs' records, and would otherwise place new work on slots that are busy.
        A listed worker that is not its job's current one (a job deleted, stopped or moved on
        to a new generation while the node was down) is killed through the registering node.
        Refused (retryable; the node retries) until the first sync has read the jobs."""
        if not self.synced:
            raise NotSyncedError("the controller has not read its jobs yet")
        stale = []
        for listed in request.workers:
            if self._being_started(listed.job_id, listed.generation):
                continue  # the worker Scheduling awaits the StartWorker reply of: its own
            if self._is_current(listed.job_id, listed.generation, listed.worker_id):
                await self._move_worker(listed, request.node_id)
            else:
                stale.append(listed)
        if stale:
            task = asyncio.create_task(self._stop_listed(request.node_id, request.address, stale))
            self._stops.add(task)
            task.add_done_callback(self._stops.discard)
        for driver in self.drivers.values():
            status = driver.ctx.status
            if status.node_id == request.node_id and status.worker_id and not status.state.terminal:
                self.nodes.held(request.node_id, status.worker_id, driver.ctx.config.parallelism)
        await self.nodes.register(request.node_id, request.address, request.task_slots)

    async def _stop_listed(self, node_id: str, address: str, workers: list[pb.NodeWorker]) -> None:
        """Have the node kill the workers it listed that no job runs on any more (their own
        heartbeats' refusal would stop them too, but only if they reach this controller)."""
        client = NodeClient(address, tls=self.tls)
        try:
            for listed in workers:
                log.info(
                    "stale_worker_stopped",
                    node_id=node_id,
                    worker_id=listed.worker_id,
                    job_id=listed.job_id,
                    generation=listed.generation,
                )
                try:
                    await client.stop_worker(
                        node_pb2.StopWorkerRequest(
                            job_id=listed.job_id,
                            worker_id=listed.worker_id,
                            mode=common.STOP_MODE_FORCE,
                        )
                    )
                except RpcError as err:
                    log.warning("stale_worker_not_stopped", node_id=node_id, error=err.message)
        finally:
            await client.close()

    def _being_started(self, job_id: str, generation: int) -> bool:
        driver = self.drivers.get(JobId(job_id))
        if driver is None:
            return False
        ctx = driver.ctx
        return (
            ctx.starting_worker
            and ctx.status.state is JobState.SCHEDULING
            and ctx.status.worker_id is None
            and ctx.status.generation == generation
        )

    def _is_current(self, job_id: str, generation: int, worker_id: str) -> bool:
        """Whether ``worker_id`` of ``generation`` is the worker the job runs on now."""
        driver = self.drivers.get(JobId(job_id))
        if driver is None:
            return False
        status = driver.ctx.status
        return (
            status.generation == generation
            and status.state in _WORKER_STATES
            and status.worker_id is not None
            and status.worker_id == worker_id
        )

    async def _move_worker(self, listed: pb.NodeWorker, node_id: str) -> None:
        """The job's worker (its current one: ``_is_current``) now runs under ``node_id``: its
        slots move there."""
        ctx = self.drivers[JobId(listed.job_id)].ctx
        status = ctx.status
        if status.node_id == node_id:
            return
        log.info(
            "job_worker_adopted",
            job_id=ctx.job_id,
            worker_id=listed.worker_id,
            generation=listed.generation,
            node_id=node_id,
            previous_node_id=status.node_id,
        )
        self.nodes.release(listed.worker_id)
        ctx.update(node_id=node_id)
        try:
            await ctx.save()
        except Exception as err:  # the next save writes it; the move holds in memory
            log.warning("job_worker_move_unsaved", job_id=ctx.job_id, error=str(err))

    def heartbeat_node(self, request: pb.HeartbeatNodeRequest) -> bool:
        node = self.nodes.heartbeat(request.node_id, list(request.worker_ids))
        if node is None:
            return False
        alive = set(request.worker_ids)
        for driver in self.drivers.values():
            ctx = driver.ctx
            # Only registered workers: one just started may not be in this heartbeat yet.
            if (
                ctx.status.node_id == node.node_id
                and ctx.status.worker_id
                and ctx.status.worker_address
                and ctx.status.worker_id not in alive
                and not ctx.status.state.terminal
            ):
                self._lose(ctx, f"worker {ctx.status.worker_id} exited")
        return True

    def list_nodes(self) -> list[pb.NodeInfo]:
        """The live nodes, most free slots first."""
        nodes = sorted(self.nodes.nodes.values(), key=lambda n: (-n.free_slots, n.node_id))
        return [
            pb.NodeInfo(
                node_id=n.node_id,
                address=n.address,
                task_slots=n.task_slots,
                free_slots=max(0, n.free_slots),
            )
            for n in nodes
        ]

    # workers

    def context(self, ref: common.JobRef) -> JobContext:
        """The job's context, if ``ref`` is its current worker; else the refusal, on which the
        worker stops.

        Fencing is by worker id as well as by generation: only Scheduling starts a new
        generation, while stopping, failing, finishing, restarting or recovering a job forgets
        its worker (``worker_id`` None, saved with the state) without one. So a worker is
        refused when its generation is not the job's, when the job is in a state that has no
        worker, or when its id is not the job's worker's. The one exception: in Scheduling,
        while the node's StartWorker reply (which names the worker) is awaited, a warm worker
        handed the job may register first. (Bumping the generation whenever the worker is
        forgotten would fence as well, but it would need a write of its own on every stop
        path, and a worker-id check also keeps a heartbeat from naming a worker the job
        forgot.)"""
        if not self.synced:
            raise NotSyncedError("the controller has not read its jobs yet")
        driver = self.drivers.get(JobId(ref.job_id))
        if driver is None:
            raise UnknownJobError(f"no job {ref.job_id}")
        ctx = driver.ctx
        status = ctx.status
        if ref.generation != status.generation:
            raise StaleGenerationError(
                f"job {ref.job_id} is at generation {status.generation}, not {ref.generation}"
            )
        if status.state not in _WORKER_STATES:
            raise StaleGenerationError(f"job {ref.job_id} is {status.state}: it has no worker")
        if status.worker_id is None:
            if not (status.state is JobState.SCHEDULING and ctx.starting_worker):
                raise StaleGenerationError(f"job {ref.job_id} has no worker")
        elif ref.worker_id != status.worker_id:
            raise StaleGenerationError(
                f"worker {ref.worker_id or '(none)'} is not job {ref.job_id}'s worker"
            )
        return ctx

    async def job_secrets(self, ref: common.JobRef, keys: Iterable[str]) -> dict[str, str]:
        """The values of the secrets ``keys`` for the job's current generation (its worker
        asks, before it runs): read from the job's pipeline, where the store keeps them sealed,
        never from the program the worker was sent."""
        ctx = self.context(ref)
        if not ref.worker_id or ref.worker_id != ctx.status.worker_id:
            # Only the worker the job runs on now, which a node started for it and which has
            # registered: the job id and generation alone are no credential.
            raise StaleGenerationError(
                f"worker {ref.worker_id or '(none)'} is not job {ref.job_id}'s worker"
            )
        if not ctx.status.worker_address:
            raise StaleGenerationError(f"job {ref.job_id}'s worker has not registered")
        pipeline = await self.store.get_pipeline(ctx.pipeline_id)
        if pipeline is None:
            raise UnknownJobError(f"job {ref.job_id}'s pipeline is gone")
        held = PipelineProgram.from_json(pipeline.program_json).secrets
        return {key: held[key] for key in keys if key in held}

    def report(self, ref: common.JobRef, event: events.JobEvent) -> None:
        self.context(ref).events.put_nowait(event)

    def heartbeat(self, request: pb.HeartbeatRequest) -> None:
        ctx = self.context(request.job)
        ctx.last_heartbeat = time.monotonic()
        if (
            request.address
            and ctx.status.worker_id is not None
            and ctx.status.state is not JobState.SCHEDULING
            and ctx.status.worker_address != request.address
        ):
            # The job's own worker (``context``) tells where it is. Never names a worker: a job
            # that forgot its worker, or has not registered one yet, keeps it so.
            ctx.update(worker_address=request.address)

    def record_metrics(self, request: pb.JobMetricsRequest) -> None:
        self.context(request.job)
        self.keep_metrics(request)

    def keep_metrics(self, request: pb.JobMetricsRequest) -> None:
        """Keep a job's report: the query's sample among the job's recent ones, and its
        operators' counts in the job's history."""
        window = self.metrics.setdefault(
            request.job.job_id, collections.deque(maxlen=self.settings.metrics_window)
        )
        window.append(
            pb.MetricsSample(time_micros=request.time_micros, operators=request.operators)
        )
        history = self.histories.get(request.job.job_id)
        if history is None:
            history = MetricsHistory(
                self.settings.metrics_retention_s, self.settings.metrics_bucket_s
            )
            self.histories[request.job.job_id] = history
        history.record(request.time_micros, request.nodes)

    def job_metrics(self, job_id: str, operators: bool = False) -> pb.GetJobMetricsResponse:
        """The job's recent samples; with ``operators``, each operator's history instead."""
        if not operators:
            return pb.GetJobMetricsResponse(samples=list(self.metrics.get(job_id, ())))
        history = self.histories.get(job_id)
        return pb.GetJobMetricsResponse(operators=history.series() if history else [])

    def job_status(self, job_id: str) -> pb.GetJobStatusResponse:
        driver = self.drivers.get(JobId(job_id))
        if driver is None:
            raise UnknownJobError(f"no job {job_id}")
        status = driver.ctx.status
        return pb.GetJobStatusResponse(
            job_id=job_id,
            state=str(status.state),
            generation=status.generation,
            worker_id=status.worker_id or "",
            node_id=status.node_id or "",
        )

    # live output

    def publish(self, request: pb.SendSinkDataRequest) -> None:
        self.context(request.job)
        batch = OutputBatch(request.query, list(request.rows), request.done)
        recent = self.recent_output.setdefault(
            request.job.job_id, collections.deque(maxlen=_RECENT_OUTPUT_BATCHES)
        )
        if recent and recent[-1].done:
            recent.clear()  # a new run's output
        recent.append(batch)
        for queue in self.subscribers.get(request.job.job_id, []):
            queue.put_nowait(batch)

    async def subscribe(self, job_id: str) -> AsyncIterator[OutputBatch]:
        queue: asyncio.Queue[OutputBatch] = asyncio.Queue()
        for batch in self.recent_output.get(job_id, ()):
            queue.put_nowait(batch)
        self.subscribers.setdefault(job_id, []).append(queue)
        try:
            while True:
                batch = await queue.get()
                yield batch
                if batch.done:
                    return
        finally:
            self.subscribers[job_id].remove(queue)
