"""Starting, stopping and watching worker processes, and keeping the controller informed.

Workers are separate processes (``arroyo worker ...``) so that a worker's JVM dying, or being
killed, takes nothing else with it. With ``node.warm_worker`` the node keeps one worker started
ahead of need (``arroyo worker --warm``: its SparkSession up, waiting on its standard input for
the job it will run); a job that fits its slots gets it, and the next warm one starts behind it.

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
from arroyo.rpc import ControllerClient, RpcError
from arroyo_rpc.v1 import controller_pb2 as pb

log = structlog.get_logger(__name__)


@dataclass
class WorkerHandle:
    worker_id: str
    job_id: str
    generation: int
    slots: int
    process: asyncio.subprocess.Process
    log_path: Path
    reaper: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process.returncode is None


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
        await self._register()
        self._heartbeat = asyncio.create_task(self._heartbeats())
        await self._keep_warm()

    async def _keep_warm(self) -> None:
        if self.config.node.warm_worker and (self._warm is None or not self._warm.running):
            self._warm = await self._spawn("", 0, self.config.node.warm_worker_slots, {})

    async def close(self) -> None:
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
            assert warm.process.stdin is not None
            assignment = {"job_id": job_id, "generation": generation}
            warm.process.stdin.write(json.dumps(assignment).encode() + b"\n")
            await warm.process.stdin.drain()
            warm.job_id, warm.generation, warm.slots = job_id, generation, slots
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
        handle.reaper = asyncio.create_task(self._reap(handle))
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

    async def _reap(self, handle: WorkerHandle) -> None:
        code = await handle.process.wait()
        log.info("worker_exited", worker_id=handle.worker_id, job_id=handle.job_id, code=code)

    async def _register(self) -> None:
        request = pb.RegisterNodeRequest(
            node_id=self.node_id, address=self.address, task_slots=self.config.node.task_slots
        )
        while True:
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
