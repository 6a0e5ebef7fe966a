"""Everything a job's states work with: its records, its queue of events, and the clients."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from arroyo.config import ControllerConfig
from arroyo.controller.events import JobEvent
from arroyo.controller.nodes import NodeRegistry
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.rpc import NodeClient, RpcError, WorkerClient
from arroyo.store import Job, JobConfig, JobId, JobStatus, Lease, PipelineId, StopMode, Store
from arroyo.tls import TlsIdentity
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import node_pb2

if TYPE_CHECKING:
    pass

log = structlog.get_logger(__name__)

# A worker asked directly to stop answers at once, or is gone (or hung: fencing stops it).
_DIRECT_STOP_TIMEOUT_S = 3.0


class StateError(ArroyoError):
    """A state could not do its work; the driver decides between recovering and failing."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "state_error",
        domain: ErrorDomain = ErrorDomain.INTERNAL,
        retryable: bool = True,
    ) -> None:
        super().__init__(message, code=code)
        self.domain = domain
        self.retryable = retryable


def task_error(message: str, domain: str, retryable: bool, details: str) -> StateError:
    """A failure a worker reported, as the driver's error."""
    return StateError(
        message,
        code=details or "task_failed",
        domain=ErrorDomain(domain) if domain in set(ErrorDomain) else ErrorDomain.INTERNAL,
        retryable=retryable,
    )


def now_micros() -> int:
    return time.time_ns() // 1000


@dataclass
class JobContext:
    """One job's working set, owned by its driver task. States read and change ``status``;
    the driver persists it at every transition."""

    job_id: JobId
    pipeline_id: PipelineId
    config: JobConfig
    status: JobStatus
    store: Store
    nodes: NodeRegistry
    settings: ControllerConfig
    state_root: str  # a local directory, or an object store's URL (checkpoint_url)
    program_json: str = ""
    events: asyncio.Queue[JobEvent] = field(default_factory=asyncio.Queue)
    last_heartbeat: float = field(default_factory=time.monotonic)
    # Set by a state that gives up, read by Failing.
    failure: StateError | None = None
    # What channels to nodes and workers show (mutual TLS); None: plaintext.
    tls: TlsIdentity | None = None
    # The controller's lease: every status write is fenced by it (Store.update_job_status).
    fence: Lease | None = None
    # Saves one at a time, each writing the status as it is at its turn: the driver and the
    # controller (a worker moved to the node that adopted it) both save, and the last write
    # must be the latest status.
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Scheduling awaits the node's StartWorker reply: the worker it names may register first.
    starting_worker: bool = False

    @classmethod
    def of(
        cls,
        job: Job,
        store: Store,
        nodes: NodeRegistry,
        settings: ControllerConfig,
        state_root: str,
        *,
        tls: TlsIdentity | None = None,
        fence: Lease | None = None,
    ) -> JobContext:
        return cls(
            job.id,
            job.pipeline_id,
            job.config,
            job.status,
            store,
            nodes,
            settings,
            state_root,
            tls=tls,
            fence=fence,
        )

    # status

    def update(self, **changes: object) -> None:
        self.status = dataclasses.replace(self.status, updated_at=now_micros(), **changes)  # type: ignore[arg-type]

    async def save(self) -> None:
        async with self._saving:
            await self.store.update_job_status(self.job_id, self.status, fence=self.fence)

    def state_dir(self) -> str:
        """Where this job's checkpoints live for its current run (``ignore_state`` bumps it)."""
        return f"{self.state_root.rstrip('/')}/{self.job_id}/run-{self.status.run_id}"

    def wants_running(self) -> bool:
        return self.config.stop is StopMode.NONE

    def restart_requested(self) -> bool:
        return self.config.restart_nonce != self.status.restart_nonce

    # events

    async def next_event(self, timeout: float | None) -> JobEvent | None:
        try:
            return await asyncio.wait_for(self.events.get(), timeout)
        except TimeoutError:
            return None

    def drain(self) -> None:
        """Forget queued events of an earlier generation's worker."""
        while not self.events.empty():
            self.events.get_nowait()

    async def record_error(self, message: str, domain: str, retryable: bool, details: str) -> None:
        await self.store.add_job_error(
            self.job_id,
            generation=self.status.generation,
            domain=domain,
            retryable=retryable,
            message=message,
            details=details,
        )

    # the worker, through its node or directly

    async def stop_worker(self, mode: int) -> None:
        """Ask the worker to stop (graceful/immediate), or have its node kill it (force).
        A worker that cannot be reached is killed through its node (``kill_worker``)."""
        if self.status.worker_id is None:
            return
        if mode != common.STOP_MODE_FORCE and self.status.worker_address:
            try:
                client = WorkerClient(self.status.worker_address, tls=self.tls)
                try:
                    from arroyo_rpc.v1 import worker_pb2

                    await client.stop_execution(
                        worker_pb2.StopExecutionRequest(job=self.ref(), mode=mode)  # type: ignore[arg-type]
                    )
                finally:
                    await client.close()
                return
            except RpcError as err:
                log.warning("worker_unreachable", job_id=self.job_id, error=err.message)
        await self.kill_worker()

    async def kill_worker(self) -> None:
        """Have the worker's node kill it. A worker outlives its node, so one whose node is gone
        (and not yet adopted by a node restarted in its place), or whose node no longer knows
        it, is asked directly to stop at once, if it has registered; one that does not answer
        either is left to fencing: the controller refuses it once the job forgot it
        (``Controller.context``), and it stops on the refusal, or on its own when it hears
        nothing (the worker's self-fencing)."""
        worker_id, node_id = self.status.worker_id, self.status.node_id
        if worker_id is None:
            return
        node = None
        if node_id is not None:
            # A node missing from the registry may be registering again (after a controller
            # restart): wait for it, unless it was dropped as gone.
            node = self.nodes.nodes.get(node_id)
            if node is None and node_id not in self.nodes.lost:
                node = await self.nodes.wait_for(node_id, self.settings.heartbeat_timeout_s)
        self.nodes.release(worker_id)
        killed = False
        if node is not None:
            client = NodeClient(node.address, tls=self.tls)
            try:
                response = await client.stop_worker(
                    node_pb2.StopWorkerRequest(
                        job_id=self.job_id, worker_id=worker_id, mode=common.STOP_MODE_FORCE
                    )
                )
                killed = response.found
            except RpcError as err:
                log.warning("node_unreachable", node_id=node_id, error=err.message)
            finally:
                await client.close()
        if not killed and self.status.worker_address:
            await self._stop_directly(self.status.worker_address)

    async def _stop_directly(self, address: str) -> None:
        from arroyo_rpc.v1 import worker_pb2

        client = WorkerClient(address, tls=self.tls, timeout_s=_DIRECT_STOP_TIMEOUT_S)
        try:
            await client.stop_execution(
                worker_pb2.StopExecutionRequest(job=self.ref(), mode=common.STOP_MODE_IMMEDIATE)
            )
            log.info("worker_stopped_directly", job_id=self.job_id, address=address)
        except RpcError as err:
            log.info("worker_unreachable", job_id=self.job_id, error=err.message)
        finally:
            await client.close()

    def forget_worker(self) -> None:
        if self.status.worker_id is not None:
            self.nodes.release(self.status.worker_id)
        self.update(worker_id=None, worker_address=None, node_id=None)

    def ref(self) -> common.JobRef:
        return common.JobRef(
            job_id=self.job_id,
            generation=self.status.generation,
            worker_id=self.status.worker_id or "",
        )
