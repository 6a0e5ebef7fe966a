"""A control plane of real processes for end-to-end tests: ``arroyo controller``, ``compiler``,
``node`` and ``api``, each started with the environment a deployment would give it, on ports
this test picks on 127.0.0.1, against a database of the test's choosing.

Waiting is always on a condition with a deadline (``Cluster.until``), polling the REST API as a
user would.

With ``tls`` (the session's cluster), the services talk mutual TLS with certificates of their
own CA, made as ``arroyo cluster`` makes them, and the api serves HTTPS, which the calls here
make trusting that CA (``Cluster.ssl_context``).
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from arroyo.engine.session import QUICK_JIT_OPTIONS
from arroyo.testing.ports import free_port, service_ports
from arroyo.testing.postgres import create_database
from arroyo.testing.processes import stop as stop_processes
from arroyo.tls import client_context
from arroyo.tls.authority import ensure_certificates
from tests import aio
from tests.waiting import wait_until

T = TypeVar("T")

SERVICES = ("controller", "compiler", "node", "api")


def fresh_postgres_database(server_url: str) -> str:
    """A new, empty database on the test session's PostgreSQL server."""
    return aio.run(create_database(server_url, f"cluster_{uuid.uuid4().hex[:10]}"))


@dataclass
class ApiError(Exception):
    status: int
    body: dict[str, Any]


TEST_WORKER_JVM_OPTIONS = f"{QUICK_JIT_OPTIONS} -XX:+UseSerialGC"
# A node keeping a warm worker, as deployments' nodes do (the test clusters' keep none).
WARM_WORKER = {"ARROYO__NODE__WARM_WORKER": "true"}


@dataclass
class Cluster:
    root: Path
    database_url: str
    env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # How each service was started (its command and environment), for ``restore``.
    launched: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)
    # The bucket of its checkpoints, where they are in an object store.
    bucket: str | None = None
    # The API key its calls send, where the api requires one.
    api_key: str | None = None
    # Each kind of service's own environment (its certificate), by its command.
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # What HTTPS calls to the api trust (its CA), when it serves HTTPS.
    ssl_context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        self.env = {
            **os.environ,
            "ARROYO__DATA_DIR": str(self.root / "data"),
            "ARROYO__DATABASE__URL": self.database_url,
            "ARROYO__LOGGING__LEVEL": "info",
            # Failure detection and recovery on a test's time scale.
            # Well above a controller's restart or take-over under load plus the worker channel's
            # 5 s reconnect backoff: a worker that hears nothing from the controller for this
            # less two heartbeats stops itself (docs/operations.md).
            "ARROYO__CONTROLLER__HEARTBEAT_TIMEOUT_S": "15",
            "ARROYO__CONTROLLER__POLL_INTERVAL_S": "0.2",
            "ARROYO__CONTROLLER__RESTART_BACKOFF_S": "0.5",
            "ARROYO__NODE__HEARTBEAT_INTERVAL_S": "0.5",
            "ARROYO__NODE__TASK_SLOTS": "4",
            "ARROYO__WORKER__HEARTBEAT_INTERVAL_S": "0.5",
            "ARROYO__WORKER__DRIVER_MEMORY": "1g",
            # Test jobs are short and small, and the suite keeps both cores busy: C1 alone and
            # the serial collector (C2 compiling was most of a new worker's first-minute CPU).
            # bench/chaos.py measures with the default instead.
            "ARROYO__WORKER__JVM_OPTIONS": TEST_WORKER_JVM_OPTIONS,
            # No warm worker (a JVM kept started, its SparkSession up and its warm-up pipeline
            # run, for the next job): a test's cluster starts a pipeline or two at a time, and each
            # one taken started the next, on cores the suite already keeps busy (test_cluster.py:
            # 461 CPU-s with one, 325 without; 267 s of wall time against 287). The node starts
            # a worker for each job instead. WARM_WORKER turns it back on where a test is about
            # it (test_node_restart), or about recovery as a deployment runs (test_chaos).
            "ARROYO__NODE__WARM_WORKER": "false",
            **service_ports(SERVICES),
        }
        self.api_url = f"http://127.0.0.1:{self.env['ARROYO__API__PORT']}/api/v1"
        (self.root / "logs").mkdir(parents=True, exist_ok=True)

    def use_tls(self) -> None:
        """Mutual TLS between the services and HTTPS on the api, with certificates made (as
        ``arroyo cluster`` makes them) under the data directory; call before ``start``."""
        made = ensure_certificates(self.root / "data" / "tls", SERVICES)
        self.service_env = {name: files.environment() for name, files in made.services.items()}
        self.service_env["api"]["ARROYO__API__HTTPS"] = "true"
        self.api_url = self.api_url.replace("http://", "https://", 1)
        self.ssl_context = client_context(made.ca_file)

    def start(
        self, name: str, command: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        """``arroyo <command>`` (default: ``arroyo <name>``) as the service ``name``, with
        ``env`` over the cluster's environment; ``restore`` starts it the same way again."""
        command = command or [name]
        self.launched[name] = (command, env or {})
        log = (self.root / "logs" / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "arroyo_cli.main", *command],
            env={**self.env, **self.service_env.get(command[0], {}), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )

    def start_replica(self, name: str, kind: str, port: int | None = None) -> None:
        """Start ``name``, a replica of ``kind``, with an admin port of its own and, given one, a
        gRPC port (apis sharing the cluster's one port with ``api.reuse_port`` take none)."""
        env = {f"ARROYO__{kind.upper()}__ADMIN_PORT": str(free_port())}
        if port is not None:
            env[f"ARROYO__{kind.upper()}__PORT"] = str(port)
        self.start(name, [kind], env=env)

    def replicas(self, kind: str) -> list[str]:
        """The names of the services started as ``kind``, in the order they were first started."""
        return [name for name, (command, _) in self.launched.items() if command[0] == kind]

    def port(self, name: str, which: str = "PORT") -> int:
        """The service's gRPC port (``which="ADMIN_PORT"``: its admin port), as it was started."""
        command, env = self.launched.get(name, ([name], {}))
        return int({**self.env, **env}[f"ARROYO__{command[0].upper()}__{which}"])

    def admin_status(self, name: str) -> dict[str, Any]:
        port = self.port(name, "ADMIN_PORT")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as err:
            if err.code != 503:  # not ready: the same body, saying why
                raise
            return dict(json.loads(err.read()))

    def nodes(self) -> list[str]:
        """The running services that are nodes."""
        return [n for n in self.processes if self.launched.get(n, ([n], {}))[0][0] == "node"]

    def wait_ready(self, name: str) -> None:
        """Until the service's /status says it is ready (its startup done, after Spark for the
        compiler, and its checks hold: the store answers, the node is registered)."""
        self.until(f"{name} to serve", lambda: self.admin_status(name)["ready"], timeout=120)

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        process = self.processes.pop(name)
        process.send_signal(sig)
        return process.wait(timeout)

    def restore(self) -> None:
        """Starts again any service that is not running (a test that stops or kills one, or
        failed part-way, leaves it so)."""
        down = [
            name
            for name in self.launched
            if (process := self.processes.get(name)) is None or process.poll() is not None
        ]
        for name in down:  # all of them before waiting: a wait fails while one is down
            self.start(name, *self.launched[name])
        for name in down:
            self.wait_ready(name)

    def stop_pipelines(self) -> None:
        """Stops at once every pipeline whose job is not stopped or ended (a test that failed
        before stopping its own leaves it running, holding a slot)."""
        ended = ("Stopped", "Finished", "Failed")
        for pipeline in self.call("GET", "/pipelines?limit=1000")["data"]:
            jobs = self.call("GET", f"/pipelines/{pipeline['id']}/jobs")["data"]
            if jobs and jobs[0]["state"] not in ended:
                self.call("PATCH", f"/pipelines/{pipeline['id']}", {"stop": "immediate"})
                self.wait_state(pipeline["id"], *ended)

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}")
        for path in sorted((self.root / "data" / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def shutdown(self) -> None:
        """SIGTERM every service, SIGKILL what does not stop, and any worker left behind."""
        stop_processes(*self.processes.values(), timeout=60)
        self.processes.clear()
        _kill_leftover_workers(self.root)

    # the REST API, as a user calls it

    def call(self, method: str, path: str, body: Any = None, *, timeout: float = 60) -> Any:
        """The JSON body of a successful call; ``ApiError`` for an error status."""
        return self.request(method, path, body, timeout=timeout)[1]

    def request(
        self, method: str, path: str, body: Any = None, *, timeout: float = 60
    ) -> tuple[int, Any]:
        """``call``, with the success status too."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"}
        if self.api_key is not None:
            headers["authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            self.api_url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(
                request, timeout=timeout, context=self.ssl_context
            ) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as err:
            raise ApiError(err.code, json.loads(err.read() or b"{}")) from None
        return status, json.loads(text) if text else None

    def until(self, what: str, probe: Callable[[], T | None], timeout: float = 180) -> T:
        """Poll ``probe`` until it returns something truthy; fail with the services' logs."""
        last: object = None

        def attempt() -> T | None:
            nonlocal last
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited ({process.returncode})\n{self.logs()}")
            try:
                return probe()
            except (ApiError, urllib.error.URLError, ConnectionError) as err:
                last = err
                return None

        found = wait_until(what, attempt, timeout, detail=lambda: f" (last: {last})\n{self.logs()}")
        assert found is not None
        return found

    def job(self, pipeline_id: str) -> dict[str, Any]:
        jobs = self.call("GET", f"/pipelines/{pipeline_id}/jobs")["data"]
        assert len(jobs) == 1
        return dict(jobs[0])

    def wait_state(self, pipeline_id: str, *states: str, timeout: float = 180) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            job = self.job(pipeline_id)
            return job if job["state"] in states else None

        return self.until(f"{pipeline_id} in {states}", probe, timeout)

    def wait_generation_after(
        self, pipeline_id: str, generation: int, timeout: float = 180
    ) -> dict[str, Any]:
        """The job once it runs a generation later than ``generation`` (it recovered)."""

        def probe() -> dict[str, Any] | None:
            job = self.job(pipeline_id)
            return job if job["state"] == "Running" and job["generation"] > generation else None

        return self.until(f"{pipeline_id} running after generation {generation}", probe, timeout)

    def checkpoints(self, pipeline_id: str) -> list[dict[str, Any]]:
        job = self.job(pipeline_id)
        path = f"/pipelines/{pipeline_id}/jobs/{job['id']}/checkpoints"
        return list(self.call("GET", path)["data"])


@contextmanager
def running_cluster(
    root: Path,
    database_url: str,
    env: dict[str, str] | None = None,
    *,
    tls: bool = False,
    compilers: int = 1,
) -> Iterator[Cluster]:
    """One service of each kind, but ``compilers`` compilers when more than one (named
    ``compiler-a``, ``compiler-b``, ...; the api given every one's address, as a deployment
    that replicates its compiler gives it them)."""
    cluster = Cluster(root, database_url)
    cluster.env.update(env or {})
    compiler_ports: dict[str, int] = {}
    if compilers > 1:
        compiler_ports = {f"compiler-{chr(ord('a') + n)}": free_port() for n in range(compilers)}
        addresses = ",".join(f"127.0.0.1:{port}" for port in compiler_ports.values())
        cluster.env["ARROYO__COMPILER__ADDRESS"] = addresses
    if tls:
        cluster.use_tls()
    try:
        for name in SERVICES:
            if name == "compiler" and compiler_ports:
                for replica, port in compiler_ports.items():
                    cluster.start_replica(replica, "compiler", port)
            else:
                cluster.start(name)
        for name in list(cluster.launched):
            cluster.wait_ready(name)
        yield cluster
    finally:
        cluster.shutdown()


def _kill_leftover_workers(root: Path) -> None:
    """Workers run in their own sessions; one a test left behind is killed by its data dir."""
    out = subprocess.run(
        ["pgrep", "-f", "arroyo_cli.main.*worker"], capture_output=True, text=True, check=False
    )
    for pid in out.stdout.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if str(root).encode() in environ:
            os.kill(int(pid), signal.SIGKILL)
