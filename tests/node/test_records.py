"""The node's worker records (``arroyo.node.records``) and adoption from them, on real
processes: a live worker is adopted, a dead pid, a zombie, a pid the kernel gave to another
process, a process that is not the worker or a record from another boot is not (and its record
goes), and an adopted worker is stopped by signal and its exit noticed, its record then
removed; records that cannot be written or read cost the node nothing."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arroyo.config import Config, NodeConfig
from arroyo.node import NodeRuntime
from arroyo.node.records import WorkerRecord, WorkerRecords, boot_id, process_start_time
from arroyo.rpc import ControllerClient
from tests.waiting import eventually, wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="adoption reads /proc")

ADDRESS = "127.0.0.1:5118"
# A process standing in for a worker: its command line names its worker id, as a worker's does.
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)", "--worker-id", "worker_1"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for a worker another node started (its own session, as a
    worker's is)."""
    process = subprocess.Popen(SLEEP, start_new_session=True)
    yield process
    process.kill()
    process.wait()


def record_of(process: subprocess.Popen[bytes], worker_id: str = "worker_1") -> WorkerRecord:
    start_time = process_start_time(process.pid)
    assert start_time is not None
    return WorkerRecord(worker_id, "job_1", 3, 2, process.pid, start_time, "/tmp/w.log", boot_id())


def test_a_live_worker_is_adoptable_and_a_dead_or_reused_pid_is_not(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    records = WorkerRecords(tmp_path, ADDRESS)
    live = record_of(sleeper)
    records.write(live)

    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: no such process any more
    records.write(WorkerRecord("worker_dead", "job_2", 1, 1, dead.pid, 1, "/tmp/d.log"))
    # The live process's pid with another start time: the pid of a worker that ended, which
    # the kernel has since given to another process.
    reused = WorkerRecord("worker_reused", "job_3", 1, 1, sleeper.pid, live.start_time + 1, "")
    records.write(reused)

    # The live process, recorded before a reboot (another boot id), or with no boot id.
    records.write(dataclasses.replace(live, worker_id="worker_rebooted", boot_id="another-boot"))
    records.write(dataclasses.replace(live, worker_id="worker_unbooted", boot_id=""))
    # The live process's pid and start time, but its command line names another worker.
    records.write(dataclasses.replace(live, worker_id="worker_other"))

    assert records.adoptable() == [live]
    assert [r.worker_id for r in records.load()] == ["worker_1"]  # the others' records went


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen(SLEEP)
    record = record_of(child)
    # Under load /proc may show the new command line a moment after Popen returns.
    wait_until("the child's command line", record.alive, 10, interval=0.05)
    child.send_signal(signal.SIGKILL)
    try:
        # Exited but not reaped (as an orphan whose new parent has not reaped it yet): its
        # pid still answers kill(pid, 0), and only its state says it is gone.
        wait_until("the child exited", lambda: not record.alive(), 10, interval=0.05)
    finally:
        child.wait()


def test_nodes_sharing_a_data_dir_keep_their_records_apart(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    WorkerRecords(tmp_path, ADDRESS).write(record_of(sleeper))
    assert WorkerRecords(tmp_path, "127.0.0.1:5119").adoptable() == []
    assert len(WorkerRecords(tmp_path, ADDRESS).adoptable()) == 1


async def test_a_node_adopts_a_live_worker_stops_it_and_notices_its_exit(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    config = Config(data_dir=tmp_path, node=NodeConfig(heartbeat_interval_s=0.1))
    WorkerRecords(tmp_path, ADDRESS).write(record_of(sleeper))
    # A controller that is never called: adoption happens before the node registers.
    controller = ControllerClient("127.0.0.1:1")
    runtime = NodeRuntime(config, controller, ADDRESS, None, ("unused",))
    try:
        [handle] = runtime.adopt()
        assert (handle.worker_id, handle.job_id, handle.generation, handle.slots) == (
            "worker_1",
            "job_1",
            3,
            2,
        )
        assert handle.adopted and handle.running
        assert runtime.free_slots == config.node.task_slots - 2
        assert [w.worker_id for w in runtime.job_workers()] == ["worker_1"]

        assert await runtime.stop_worker("worker_1", force=False)  # SIGTERM, by pid

        async def exited() -> bool:
            return not handle.running

        await eventually("the adopted worker's exit noticed", exited, 10)
        assert sleeper.wait(10) == -signal.SIGTERM
        assert runtime.job_workers() == []

        async def unrecorded() -> bool:
            return not WorkerRecords(tmp_path, ADDRESS).load()

        await eventually("its record removed", unrecorded, 10)
    finally:
        await controller.close()


async def test_records_that_cannot_be_written_or_read_cost_the_node_nothing(
    tmp_path: Path,
) -> None:
    # Where the records' directory would be, a file: nothing can be written or read there.
    (tmp_path / "workers").write_text("not a directory")
    config = Config(data_dir=tmp_path, node=NodeConfig(heartbeat_interval_s=0.1))
    controller = ControllerClient("127.0.0.1:1")
    program = (sys.executable, "-c", "import time; time.sleep(600)")
    runtime = NodeRuntime(config, controller, ADDRESS, None, program)
    try:
        assert runtime.adopt() == []
        handle = await runtime._spawn("job_1", 1, 1, {})  # its record is not written
        assert handle.running and handle.reaper is not None
        assert await runtime.stop_worker(handle.worker_id, force=True)

        async def exited() -> bool:
            return not handle.running

        await eventually("the worker's exit noticed", exited, 10)
        await handle.reaper  # its record's removal fails quietly
    finally:
        await controller.close()
