"""What a node knows of the workers it started, kept on disk so that a node started after it
(at the same address: killed -9 and restarted by its supervisor) can adopt them.

A node is a supervisor, not its workers' lifeline: a worker with a job runs on when its node is
killed, as a pod runs on when its kubelet restarts. The node writes one small JSON file per job
worker (``<data_dir>/workers/<node address>/<worker id>.json``) when it hands the worker its job,
and removes it when the worker ends. A node that starts reads them: a record whose process is
still alive, and is the same process (its start time in ``/proc/<pid>/stat`` matches, so a pid
the kernel gave to another process is not mistaken for it), becomes an ``AdoptedProcess``; any
other record is removed.

Adoption needs Linux's ``/proc``: elsewhere no record is ever adopted (a node killed there
leaves its workers to the controller's worker heartbeat timeout).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def process_start_time(pid: int) -> int | None:
    """The start time of a live process (clock ticks since boot, field 22 of
    ``/proc/<pid>/stat``); None when there is no such process, it has exited (a zombie not yet
    reaped by its new parent) or ``/proc`` cannot say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X", "x"):
        return None
    return int(fields[19])


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    worker_id: str
    job_id: str
    generation: int
    slots: int
    pid: int
    start_time: int  # process_start_time(pid) when it was recorded
    log_path: str

    def alive(self) -> bool:
        """The recorded process is running, and is the one recorded (not a reused pid)."""
        return process_start_time(self.pid) == self.start_time


class WorkerRecords:
    """One node's records: a directory of its own under ``data_dir/workers``, named after the
    node's address, so that nodes sharing a data directory (replicas on one machine) never
    adopt each other's workers, and a node restarted at the same address finds its own."""

    def __init__(self, data_dir: Path, address: str) -> None:
        self.directory = data_dir / "workers" / (_UNSAFE.sub("_", address) or "node")

    def write(self, record: WorkerRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{record.worker_id}.json"
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(asdict(record)))
        staged.replace(path)  # a node killed mid-write leaves the old record or the new

    def remove(self, worker_id: str) -> None:
        (self.directory / f"{worker_id}.json").unlink(missing_ok=True)

    def load(self) -> list[WorkerRecord]:
        """Every readable record; an unreadable one is removed."""
        if not self.directory.is_dir():
            return []
        for staged in self.directory.glob("*.tmp"):
            staged.unlink(missing_ok=True)
        records = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                records.append(WorkerRecord(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError) as err:
                log.warning("worker_record_unreadable", path=str(path), error=str(err))
                path.unlink(missing_ok=True)
        return records

    def adoptable(self) -> list[WorkerRecord]:
        """The records of live workers; the records of the others are removed."""
        live = []
        for record in self.load():
            if record.alive():
                live.append(record)
            else:
                self.remove(record.worker_id)
        return live


class AdoptedProcess:
    """A worker process this node did not start (not its child): signalled by pid once its start
    time says it is still the same process, and watched by polling, its exit code unknown."""

    def __init__(self, pid: int, start_time: int, poll_s: float) -> None:
        self.pid = pid
        self.start_time = start_time
        self.poll_s = poll_s
        # None while it runs; an adopted process's exit code is its new parent's to read.
        self.returncode: int | None = None

    def _alive(self) -> bool:
        if self.returncode is None and process_start_time(self.pid) != self.start_time:
            self.returncode = 0
        return self.returncode is None

    def send_signal(self, sig: int) -> None:
        if self._alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                self.returncode = 0

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        while self._alive():
            await asyncio.sleep(self.poll_s)
        assert self.returncode is not None
        return self.returncode
