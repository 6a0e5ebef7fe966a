"""Starting, stopping and watching worker processes, and keeping the controller informed.

Workers are separate processes (``arroyo worker ...``) so that a worker's JVM dying, or being
killed, takes nothing else with it. With ``node.warm_worker`` the node keeps one worker started
ahead of need (``arroyo worker --warm``: its SparkSession up, waiting on its standard input for
the job it will run); a job that fits its slots gets it, and the next warm one starts behind it.

A node is its workers' supervisor, not their lifeline: a worker with a job runs on when its
node is killed -9 (its own session and process group; no parent-death signal), and the node
started in its place adopts it from the record it left (``arroyo.node.records``): lists it in
its registration and heartbeats, counts its slots, stops it by signal and notices its exit by
polling. Only the warm worker, which has no job yet, ends with its node: it reads EOF on the
standard input the node held. A node that shuts down cleanly (SIGTERM) stops every worker it
runs, adopted ones included: an operator who stops a node means its work to stop.

The node's heartbeat lists the workers still alive: the
controller learns of a dead worker at the next heartbeat instead of waiting out the worker's own
heartbeat timeout. Each worker's output goes to ``<data_dir>/logs/worker-<id>.log``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from arroyo.config import Config
from arroyo.node.records import (
    AdoptedProcess,
    WorkerRecord,
    WorkerRecords,
    boot_id,
    process_start_time,
)
from arroyo.rpc import ControllerClient, RpcError
from arroyo_rpc.v1 import controller_pb2 as pb

log = structlog.get_logger(__name__)


@dataclass
class WorkerHandle:
    worker_id: str
    job_id: str
    generation: int
    slots: int
    # Its child, or a worker a node before it started and it adopted.
    process: asyncio.subprocess.Process | AdoptedProcess
    log_path: Path
    reaper: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    @property
    def adopted(self) -> bool:
        return isinstance(self.process, AdoptedProcess)

    def record(self) -> WorkerRecord | None:
        """What a node after this one needs to adopt it (None: it has exited already)."""
        start_time = process_start_time(self.process.pid)
        if start_time is None:
            return None
        return WorkerRecord(
            self.worker_id,
            self.job_id,
            self.generation,
            self.slots,
            self.process.pid,
            start_time,
            str(self.log_path),
            boot_id(),
        )


class NodeRuntime:
    """Owned by the node service; its gRPC handlers call ``start_worker``/``stop_worker``."""

    def __init__(
        self,
        config: Config,
        controller: ControllerClient,
        address: str,
        config_path: Path | None,
        worker_program: Sequence[str],
    ) -> None:
        """``worker_program`` is the command line that runs a service by name (``arroyo``, as
        ``[python, -m, arroyo_cli.main]``): the node appends ``worker`` and its arguments. It comes
        from the node service's wiring, so that this library names no program above it."""
        self.config = config
        self.worker_program = tuple(worker_program)
        self.controller = controller
        self.address = address
        self.config_path = config_path
        self.node_id = config.node.node_id or f"node_{uuid.uuid4().hex[:12]}"
        self.workers: dict[str, WorkerHandle] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        self._warm: WorkerHandle | None = None
        self._last_contact: float | None = None  # monotonic: the controller's last answer
        self._records: WorkerRecords | None = None  # once the address is known (``run``)

    @property
    def records(self) -> WorkerRecords:
        if self._records is None:
            self._records = WorkerRecords(self.config.data_dir, self.address)
        return self._records

    @property
    def free_slots(self) -> int:
        used = sum(w.slots for w in self.workers.values() if w.running and w.job_id)
        return self.config.node.task_slots - used

    def readiness(self) -> dict[str, str | None]:
        """The node is ready while the controller answers its heartbeats: a node it has not
        heard from for three of them gets no new work."""
        if self._last_contact is None:
            return {"controller": "not registered with the controller yet"}
        silent = time.monotonic() - self._last_contact
        limit = 3 * self.config.node.heartbeat_interval_s
        if silent > limit:
            return {"controller": f"no answer from the controller for {silent:.0f} s"}
        return {"controller": None}

    async def run(self) -> None:
        """Adopt the workers a node before this one left running, register, heartbeat, and
        start the warm worker. Called once the address the node serves at is known."""
        self.adopt()
        await self._register()
        self._heartbeat = asyncio.create_task(self._heartbeats())
        await self._keep_warm()

    async def _keep_warm(self) -> None:
        if self.config.node.warm_worker and (self._warm is None or not self._warm.running):
            self._warm = await self._spawn("", 0, self.config.node.warm_worker_slots, {})

    def adopt(self) -> list[WorkerHandle]:
        """The live workers recorded at this node's address, as this node's own."""
        adopted = []
        for record in self.records.adoptable():
            if record.worker_id in self.workers:
                continue
            poll_s = self.config.node.heartbeat_interval_s
            process = AdoptedProcess(record.pid, record.start_time, poll_s)
            handle = WorkerHandle(
                record.worker_id,
                record.job_id,
                record.generation,
                record.slots,
                process,
                Path(record.log_path),
            )
            self.workers[record.worker_id] = handle
            handle.reaper = asyncio.create_task(self._reap(handle))
            adopted.append(handle)
            log.info(
                "worker_adopted",
                worker_id=record.worker_id,
                job_id=record.job_id,
                generation=record.generation,
                pid=record.pid,
            )
        return adopted

    async def close(self) -> None:
        """A clean shutdown stops every worker, adopted ones too (SIGTERM: each stops at a
        checkpoint; SIGKILL after 60 s)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        for handle in list(self.workers.values()):
            if handle.running:
                handle.process.send_signal(signal.SIGTERM)
        for handle in list(self.workers.values()):
            try:
                await asyncio.wait_for(handle.process.wait(), 60)
            except TimeoutError:
                handle.process.kill()

    async def start_worker(
        self, job_id: str, generation: int, slots: int, env: dict[str, str]
    ) -> WorkerHandle:
        warm = self._warm
        if warm is not None and warm.running and slots <= warm.slots and not env:
            self._warm = None
            assert isinstance(warm.process, asyncio.subprocess.Process)
            assert warm.process.stdin is not None
            warm.job_id, warm.generation, warm.slots = job_id, generation, slots
            # Recorded before it learns of its job: a node killed in between leaves a record
            # of a worker that reads EOF and exits, never a job worker without a record.
            self._record(warm)
            assignment = {"job_id": job_id, "generation": generation}
            warm.process.stdin.write(json.dumps(assignment).encode() + b"\n")
            await warm.process.stdin.drain()
            log.info("warm_worker_assigned", worker_id=warm.worker_id, job_id=job_id)
            await self._keep_warm()
            return warm
        return await self._spawn(job_id, generation, slots, env)

    async def _spawn(
        self, job_id: str, generation: int, slots: int, env: dict[str, str]
    ) -> WorkerHandle:
        """A worker process for the job, or a warm one (no job yet) when ``job_id`` is empty."""
        worker_id = f"worker_{uuid.uuid4().hex[:12]}"
        logs = self.config.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{worker_id}.log"
        args = [
            *self.worker_program,
            *(["--config", str(self.config_path)] if self.config_path else []),
            "worker",
            *(["--job-id", job_id, "--generation", str(generation)] if job_id else ["--warm"]),
            "--worker-id",
            worker_id,
            "--node-id",
            self.node_id,
            "--slots",
            str(slots),
            "--controller",
            self.config.controller.dial(),
        ]
        with log_path.open("ab") as out:
            process = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.DEVNULL if job_id else asyncio.subprocess.PIPE,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **env},
                # Its own process group: a signal to the node is not a signal to its workers.
                start_new_session=True,
            )
        handle = WorkerHandle(worker_id, job_id, generation, slots, process, log_path)
        self.workers[worker_id] = handle
        # Reaped whatever happens to its record.
        handle.reaper = asyncio.create_task(self._reap(handle))
        if job_id:
            self._record(handle)
        log.info(
            "worker_started",
            worker_id=worker_id,
            job_id=job_id,
            generation=generation,
            pid=process.pid,
        )
        return handle

    async def stop_worker(self, worker_id: str, force: bool) -> bool:
        handle = self.workers.get(worker_id)
        if handle is None or not handle.running:
            return False
        handle.process.send_signal(signal.SIGKILL if force else signal.SIGTERM)
        log.info("worker_stopping", worker_id=worker_id, force=force)
        return True

    def _record(self, handle: WorkerHandle) -> None:
        """Best-effort: a worker whose record cannot be written runs as well; only a node
        started after this one crashed would not adopt it (its job then recovers)."""
        record = handle.record()
        if record is None:
            return
        try:
            self.records.write(record)
        except OSError as err:
            log.warning("worker_record_not_written", worker_id=handle.worker_id, error=str(err))

    async def _reap(self, handle: WorkerHandle) -> None:
        code = await handle.process.wait()
        self.records.remove(handle.worker_id)
        log.info(
            "worker_exited",
            worker_id=handle.worker_id,
            job_id=handle.job_id,
            code=code,
            adopted=handle.adopted,
        )

    def job_workers(self) -> list[pb.NodeWorker]:
        """The live workers that run a job (not the warm one), adopted ones included."""
        return [
            pb.NodeWorker(
                worker_id=w.worker_id, job_id=w.job_id, generation=w.generation, slots=w.slots
            )
            for w in self.workers.values()
            if w.running and w.job_id
        ]

    async def _register(self) -> None:
        while True:
            request = pb.RegisterNodeRequest(
                node_id=self.node_id,
                address=self.address,
                task_slots=self.config.node.task_slots,
                workers=self.job_workers(),
            )
            try:
                await self.controller.register_node(request)
                self._last_contact = time.monotonic()
                log.info("node_registered", node_id=self.node_id)
                return
            except RpcError as err:
                log.warning("node_register_failed", error=err.message)
                await asyncio.sleep(self.config.node.heartbeat_interval_s)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.config.node.heartbeat_interval_s)
            request = pb.HeartbeatNodeRequest(
                node_id=self.node_id,
                address=self.address,
                task_slots=self.config.node.task_slots,
                worker_ids=[w.worker_id for w in self.workers.values() if w.running],
            )
            try:
                response = await self.controller.heartbeat_node(request)
            except RpcError as err:
                log.warning("node_heartbeat_failed", error=err.message)
                continue
            self._last_contact = time.monotonic()
            if not response.known:
                await self._register()
            # A worker that had exited when this heartbeat was built is now reported gone.
            reported_alive = set(request.worker_ids)
            for worker_id, handle in list(self.workers.items()):
                if worker_id not in reported_alive and not handle.running:
                    del self.workers[worker_id]
