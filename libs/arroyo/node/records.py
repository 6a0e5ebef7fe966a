"""What a node knows of the workers it started, kept on disk so that a node started after it
(at the same address: killed -9 and restarted by its supervisor) can adopt them.

A node is a supervisor, not its workers' lifeline: a worker with a job runs on when its node is
killed, as a pod runs on when its kubelet restarts. The node writes one small JSON file per job
worker (``<data_dir>/workers/<node address>/<worker id>.json``) when it hands the worker its job,
and removes it when the worker ends. A node that starts reads them: a record whose process is
still alive, and is the same process, becomes an ``AdoptedProcess``; any other record is
removed. The same process: the machine has not rebooted since (``/proc/sys/kernel/random/boot_id``
matches), the process's start time in ``/proc/<pid>/stat`` matches, and its command line
(``/proc/<pid>/cmdline``) names the worker id; so a pid the kernel gave to another process is
not mistaken for it. Signals to an adopted worker go through a pidfd (``os.pidfd_open``) where
there is one, so they cannot reach a process that took its pid after it exited.

Records are best-effort: a node that cannot write or remove one (a full or read-only disk)
logs it and runs on; it only loses the adoption of that worker after a crash.

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


def boot_id() -> str:
    """This boot's id ("" where ``/proc`` cannot say): a record from before a reboot names
    no live process, whatever its pid."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_cmdline(pid: int) -> str | None:
    """The process's command line, its arguments joined by spaces (None: no such process)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace")


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    worker_id: str
    job_id: str
    generation: int
    slots: int
    pid: int
    start_time: int  # process_start_time(pid) when it was recorded
    log_path: str
    boot_id: str = ""  # boot_id() when it was recorded

    def alive(self) -> bool:
        """The recorded process is running, and is the one recorded (not a reused pid: same
        boot, same start time, and its command line names the worker)."""
        if not self.boot_id or self.boot_id != boot_id():
            return False
        if process_start_time(self.pid) != self.start_time:
            return False
        cmdline = process_cmdline(self.pid)
        return cmdline is not None and self.worker_id in cmdline.split()


class WorkerRecords:
    """One node's records: a directory of its own under ``data_dir/workers``, named after the
    node's address, so that nodes sharing a data directory (replicas on one machine) never
    adopt each other's workers, and a node restarted at the same address finds its own."""

    def __init__(self, data_dir: Path, address: str) -> None:
        self.directory = data_dir / "workers" / (_UNSAFE.sub("_", address) or "node")

    def write(self, record: WorkerRecord) -> None:
        """Raises OSError when the record cannot be written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{record.worker_id}.json"
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(asdict(record)))
        staged.replace(path)  # a node killed mid-write leaves the old record or the new

    def remove(self, worker_id: str) -> None:
        """Best-effort: a record that cannot be removed is logged (the next node drops it, its
        process gone)."""
        _unlink(self.directory / f"{worker_id}.json")

    def load(self) -> list[WorkerRecord]:
        """Every readable record; an unreadable one is removed. A directory that cannot be
        read holds none."""
        try:
            if not self.directory.is_dir():
                return []
            for staged in self.directory.glob("*.tmp"):
                _unlink(staged)
            paths = sorted(self.directory.glob("*.json"))
        except OSError as err:
            log.warning("worker_records_unreadable", path=str(self.directory), error=str(err))
            return []
        records = []
        for path in paths:
            try:
                records.append(WorkerRecord(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError) as err:
                log.warning("worker_record_unreadable", path=str(path), error=str(err))
                _unlink(path)
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


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.warning("worker_record_not_removed", path=str(path), error=str(err))


class AdoptedProcess:
    """A worker process this node did not start (not its child): signalled through a pidfd
    opened once it was known to be the recorded process (by pid, where there is no pidfd, once
    its start time says it is still the same process), and watched by polling, its exit code
    unknown."""

    def __init__(self, pid: int, start_time: int, poll_s: float) -> None:
        self.pid = pid
        self.start_time = start_time
        self.poll_s = poll_s
        # None while it runs; an adopted process's exit code is its new parent's to read.
        self.returncode: int | None = None
        self._pidfd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                self.returncode = 0
            except OSError as err:  # no pidfds here (an old kernel): by pid, then
                log.info("pidfd_unavailable", pid=pid, error=str(err))
        # Opened before this check: the pidfd is the recorded process's, or it is closed.
        self._alive()

    def _alive(self) -> bool:
        if self.returncode is None and process_start_time(self.pid) != self.start_time:
            self.returncode = 0
        if self.returncode is not None and self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode is None

    def send_signal(self, sig: int) -> None:
        if not self._alive():
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            self._exited()
        except PermissionError as err:  # not this node's user's process: not the worker
            log.warning("adopted_worker_not_signalled", pid=self.pid, error=str(err))
            self._exited()

    def _exited(self) -> None:
        self.returncode = 0
        self._alive()

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        while self._alive():
            await asyncio.sleep(self.poll_s)
        assert self.returncode is not None
        return self.returncode
