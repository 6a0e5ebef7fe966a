"""arroyo.service: admin HTTP, hooks, graceful stop, and a real service process under signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from arroyo.config import Config, load_config
from arroyo.errors import ArroyoError
from arroyo.rpc import RpcError, WorkerClient
from arroyo.service import Listen, RunningService, ServiceError, start
from arroyo_rpc.v1 import worker_pb2
from tests import aio
from tests.services import Hosted, ScriptedWorkerRuntime, serving, worker_service
from tests.waiting import eventually, wait_until

# Deadline for anything a test waits on (a process starting, a shutdown): generous, never slept.
WAIT_S = 30.0


def idle_worker() -> Hosted:
    """The worker service of a worker with no job yet: GetWorkerPhase answers Idle at once."""
    return worker_service(ScriptedWorkerRuntime())


def registering(hosted: Hosted) -> Callable[[Any], None]:
    """``start``'s ``register`` hook, adding ``hosted`` to the server."""
    add, servicer = hosted
    return lambda server: add(servicer, server)


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


async def test_status_answers_with_the_service_and_its_hook() -> None:
    async with serving(idle_worker(), status=lambda: {"jobs_running": 2}) as running:
        code, content_type, text = await get(f"http://127.0.0.1:{running.admin_port}/status")
        assert content_type.startswith("application/json")
    body = json.loads(text)
    assert code == 200
    assert body == {
        "service": "test-service",
        "pid": os.getpid(),
        "uptime_s": body["uptime_s"],
        "state": "serving",
        "ready": True,
        "checks": {},
        "grpc_port": running.grpc_port,
        "admin_port": running.admin_port,
        "jobs_running": 2,
    }
    assert body["uptime_s"] >= 0


async def test_status_is_503_until_every_readiness_check_holds_and_health_stays_200() -> None:
    problems: dict[str, str | None] = {"store": "the database does not answer", "cache": None}
    slow = asyncio.Event()

    async def readiness() -> dict[str, str | None]:
        if slow.is_set():
            await asyncio.sleep(60)
        return dict(problems)

    running = await start("probe", Config(), listen=Listen(grpc_port=None), readiness=readiness)
    url = f"http://127.0.0.1:{running.admin_port}"
    try:
        code, _, text = await get(f"{url}/status")
        body = json.loads(text)
        assert (code, body["ready"], body["state"]) == (503, False, "serving")
        assert body["checks"] == {"store": "the database does not answer", "cache": "ok"}
        problems["store"] = None
        code, _, text = await get(f"{url}/status")
        assert (code, json.loads(text)["ready"]) == (200, True)
        slow.set()
        code, _, text = await get(f"{url}/status")
        assert code == 503
        assert json.loads(text)["checks"] == {"readiness": "no answer in 2 s"}
        slow.clear()
        running.request_stop("test")
        code, _, text = await get(f"{url}/status")
        assert (code, json.loads(text)["state"]) == (503, "draining")
        code, _, text = await get(f"{url}/health")
        assert (code, json.loads(text)["state"]) == (200, "draining")
    finally:
        await running.stop(grace_s=0)


async def test_a_failing_status_hook_answers_500() -> None:
    def broken() -> dict[str, object]:
        raise RuntimeError("database gone")

    async with serving(status=broken) as running:
        code, _, text = await get(f"http://127.0.0.1:{running.admin_port}/status")
    body = json.loads(text)
    assert code == 500
    assert body["error"] == "RuntimeError: database gone"
    assert body["service"] == "test-service"


async def test_metrics_count_the_rpcs_served() -> None:
    before = _handled("GetWorkerPhase")
    async with serving(idle_worker()) as running:
        async with WorkerClient(running.grpc_address) as client:
            for _ in range(3):
                await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
        code, content_type, text = await get(f"http://127.0.0.1:{running.admin_port}/metrics")
        assert code == 200
    assert content_type.startswith("text/plain")
    # The default registry is per process: count what this test added.
    assert _handled("GetWorkerPhase", text) == before + 3
    assert "arroyo_rpc_server_handling_seconds_bucket" in text


def _handled(method: str, text: str | None = None) -> float:
    if text is None:
        from prometheus_client import REGISTRY, generate_latest

        text = generate_latest(REGISTRY).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "arroyo_rpc_server_handled_total"
                and sample.labels["grpc_method"] == method
                and sample.labels["grpc_code"] == "OK"
            ):
                return sample.value
    return 0.0


async def test_startup_runs_with_both_servers_answering() -> None:
    seen: dict[str, object] = {}

    async def startup(running: RunningService) -> None:
        # A node registers its own address with the controller here: it must already answer.
        async with WorkerClient(running.grpc_address) as client:
            phase = await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
        status, _, _ = await get(f"http://127.0.0.1:{running.admin_port}/status")
        seen.update(phase=phase.phase, status=status, grpc_port=running.grpc_port)

    running = await start(
        "startup-probe",
        Config(),
        listen=Listen(),
        register=registering(idle_worker()),
        startup=startup,
    )
    await running.stop(grace_s=0)
    assert seen == {
        "phase": worker_pb2.WORKER_PHASE_IDLE,
        "status": 503,  # not ready until its startup is done
        "grpc_port": running.grpc_port,
    }
    assert running.grpc_port not in (None, 0)


async def test_a_failing_startup_releases_the_ports_and_skips_shutdown() -> None:
    class NoDatabaseError(ArroyoError):
        code = "no_database"

    shut_down: list[str] = []
    bound: dict[str, int | None] = {}

    async def startup(running: RunningService) -> None:
        bound.update(grpc=running.grpc_port, admin=running.admin_port)
        raise NoDatabaseError("cannot reach the database")

    async def shutdown() -> None:
        shut_down.append("ran")

    with pytest.raises(NoDatabaseError):
        await start("doomed", Config(), listen=Listen(), startup=startup, shutdown=shutdown)
    # Both ports are free again: a new service binds them.
    again = await start(
        "successor",
        Config(),
        listen=Listen(grpc_port=bound["grpc"], admin_port=bound["admin"] or 0),
    )
    await again.stop(grace_s=0)
    assert shut_down == []


async def test_stop_refuses_new_rpcs_finishes_in_flight_ones_then_runs_shutdown() -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def held(program_json: str) -> None:
        """StartExecution, kept in flight until the test releases it."""
        entered.set()
        await release.wait()
        events.append("in-flight rpc finished")

    async def shutdown() -> None:
        events.append("shutdown hook")

    running = await start(
        "graceful",
        Config(),
        listen=Listen(),
        register=registering(worker_service(ScriptedWorkerRuntime(on_start=held))),
        shutdown=shutdown,
    )
    async with WorkerClient(running.grpc_address) as client:
        in_flight = asyncio.create_task(
            client.start_execution(worker_pb2.StartExecutionRequest(), timeout_s=WAIT_S)
        )
        await asyncio.wait_for(entered.wait(), WAIT_S)
        stopping = asyncio.create_task(running.stop(grace_s=WAIT_S))
        await _until_refused(client)
        assert not stopping.done()
        release.set()
        await in_flight
        await asyncio.wait_for(stopping, WAIT_S)
        # A second stop returns at once.
        await running.stop()
    assert events == ["in-flight rpc finished", "shutdown hook"]


async def _until_refused(client: WorkerClient) -> None:
    async def refused() -> bool:
        try:
            await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest(), timeout_s=1)
        except RpcError as err:
            # Depending on how far the stop has got, gRPC refuses a new call as UNAVAILABLE or
            # CANCELLED; either way the caller is told to retry (elsewhere, or later).
            assert err.code in ("unavailable", "cancelled"), err.code
            assert err.retryable
            return True
        return False

    await eventually("the stopping server to refuse new RPCs", refused, WAIT_S, interval=0.01)


async def test_a_failing_shutdown_hook_still_stops_the_admin_server_then_raises() -> None:
    class FlushError(ArroyoError):
        code = "flush_failed"

    async def shutdown() -> None:
        raise FlushError("could not flush")

    running = await start("leaky", Config(), listen=Listen(grpc_port=None), shutdown=shutdown)
    with pytest.raises(FlushError):
        await running.stop(grace_s=0)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{running.admin_port}/status", timeout=5)


async def test_a_taken_port_is_refused() -> None:
    async with serving() as first:
        with pytest.raises(ServiceError) as grpc_taken:
            await start("second", Config(), listen=Listen(grpc_port=first.grpc_port))
        with pytest.raises(ServiceError) as admin_taken:
            await start("second", Config(), listen=Listen(admin_port=first.admin_port))
    assert grpc_taken.value.code == admin_taken.value.code == "service_start_failed"


async def test_servicers_need_a_grpc_port() -> None:
    with pytest.raises(ValueError, match="no gRPC port"):
        await start("confused", Config(), listen=Listen(grpc_port=None), register=lambda _: None)


def test_listen_of_a_config_section() -> None:
    config = load_config(
        environ={"ARROYO__CONTROLLER__BIND_HOST": "0.0.0.0", "ARROYO__CONTROLLER__PORT": "7000"},
        cwd=Path("/nonexistent"),
    )
    assert Listen.of(config.controller) == Listen("0.0.0.0", 7000, 5126)


# A service process with no servicers: the smallest main there is. argv: ports file, then
# "self-stop" to have the service end itself (as a worker does when its job ends).
SERVICE_SCRIPT = """
import asyncio, sys
from pathlib import Path
from arroyo.config import load_config
from arroyo.service import Listen, serve

async def startup(running):
    if sys.argv[2:] == ["self-stop"]:
        running.request_stop("job finished")

asyncio.run(serve("probe", load_config(), listen=Listen(), startup=startup,
                  ports_file=Path(sys.argv[1])))
"""


def run_service(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    ports_file = tmp_path / "probe.ports.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARROYO__")}
    env |= {"ARROYO__LOGGING__JSON": "true", "ARROYO__LOGGING__LEVEL": "info"}
    process = subprocess.Popen(
        [sys.executable, "-c", SERVICE_SCRIPT, str(ports_file), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, ports_file


def wait_for_ports(process: subprocess.Popen[str], ports_file: Path) -> dict[str, Any]:
    def written() -> bool:
        if process.poll() is not None:
            _, stderr = process.communicate()
            raise AssertionError(f"service exited {process.returncode}:\n{stderr}")
        return ports_file.exists()

    try:
        wait_until("the service's ports file", written, WAIT_S, interval=0.02)
    except AssertionError:
        process.kill()
        raise
    ports: dict[str, Any] = json.loads(ports_file.read_text())
    return ports


def log_events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_service_process_exits_0_after_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    process, ports_file = run_service(tmp_path)
    try:
        ports = wait_for_ports(process, ports_file)
        assert ports["service"] == "probe" and ports["pid"] == process.pid
        with urllib.request.urlopen(
            f"http://127.0.0.1:{ports['admin_port']}/status", timeout=5
        ) as response:
            assert json.load(response)["pid"] == process.pid
        # The gRPC server is up and hosts nothing: an unknown method, translated.
        err = aio.run(_call_unimplemented(f"127.0.0.1:{ports['grpc_port']}"))
        assert (err.code, err.status) == ("unimplemented", grpc.StatusCode.UNIMPLEMENTED)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    events = log_events(stderr)
    names = [e["event"] for e in events]
    assert names.index("service_started") < names.index("service_stopped")
    started = next(e for e in events if e["event"] == "service_started")
    assert (started["grpc_port"], started["admin_port"]) == (
        ports["grpc_port"],
        ports["admin_port"],
    )
    requested = next(e for e in events if e["event"] == "service_stop_requested")
    assert requested["reason"] == sig.name
    assert all(e["service"] == "probe" for e in events)
    assert not ports_file.exists()


def test_a_service_process_that_stops_itself_exits_0(tmp_path: Path) -> None:
    process, ports_file = run_service(tmp_path, "self-stop")
    try:
        _, stderr = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    events = log_events(stderr)
    assert [e["reason"] for e in events if e["event"] == "service_stop_requested"] == [
        "job finished"
    ]
    assert "service_stopped" in [e["event"] for e in events]
    assert not ports_file.exists()


async def _call_unimplemented(address: str) -> RpcError:
    async with WorkerClient(address, timeout_s=WAIT_S) as client:
        with pytest.raises(RpcError) as caught:
            await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
        return caught.value


async def test_a_standby_answers_503_and_binds_no_grpc_port_until_its_turn() -> None:
    turn = asyncio.Event()
    seen: dict[str, object] = {}

    async def standby(running: RunningService) -> None:
        status, _, text = await get(f"http://127.0.0.1:{running.admin_port}/status")
        seen.update(status=status, state=json.loads(text)["state"], grpc=running.grpc_port)
        await turn.wait()

    starting = asyncio.create_task(
        start(
            "standby-probe",
            Config(),
            listen=Listen(),
            register=registering(idle_worker()),
            standby=standby,
        )
    )

    async def looked() -> bool:
        return bool(seen)

    await eventually("the standby's status", looked, WAIT_S)
    assert seen == {"status": 503, "state": "standby", "grpc": None}
    turn.set()
    running = await starting
    try:
        assert running.state == "serving" and running.grpc_port
        async with WorkerClient(running.grpc_address) as client:
            await client.get_worker_phase(worker_pb2.GetWorkerPhaseRequest())
    finally:
        await running.stop(grace_s=0)
