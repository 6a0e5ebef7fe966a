"""The one bootstrap every service's ``main`` runs: logging, tracing, gRPC, admin HTTP, shutdown.

A service's ``main`` loads its ``Config``, builds its servicers and calls
``asyncio.run(serve(...))``. ``serve`` owns the process: it configures structured logging and the
global OpenTelemetry tracer provider, starts the servers (``start``), then waits for SIGTERM or
SIGINT (or ``RunningService.request_stop``) and shuts down gracefully, returning normally so
that the process exits 0. ``start`` is the in-process half (servers and hooks, no process-wide
state), which tests use directly.

Ports. A port of 0 picks a free one. The bound ports are on ``RunningService`` (the startup hook
receives it, e.g. to register its address with the controller), in the ``service_started`` log
event (``grpc_port``, ``admin_port``), and, when ``serve`` is given ``ports_file``, in a JSON file
``{"service", "pid", "bind_host", "grpc_port", "admin_port"}`` written atomically once the
service is ready and removed when it stops: a parent process (``arroyo cluster``, a test) polls
for the file instead of parsing logs.

Security. With ``config.tls`` set, the gRPC server is mutual TLS (``add_secure_port``): it
shows the service's certificate and refuses, during the handshake, a client that shows none or
one its CA did not sign; ``start`` checks the files first (``arroyo.tls.load_identity``) and
raises ``arroyo.tls.TlsError`` naming the bad one. Without it the server is plaintext, as
before. The admin HTTP server stays plain HTTP whatever ``tls`` says: ``/metrics`` and
``/status`` are meant to be readable by probes and scrapers that hold no certificate, and they
carry no secret.

Admin HTTP, open to anyone who can reach the admin port (no API key: it says nothing a
key guards, and probes have none):

- ``/metrics``: Prometheus text of the default registry (RPC counts and latencies from
  ``arroyo.rpc.server``, process metrics, and whatever the service registers).
- ``/status``: the readiness probe. JSON ``{"service", "pid", "uptime_s", "state", "ready",
  "checks", "grpc_port", "admin_port"}`` plus the status hook's keys. ``state`` is
  ``starting`` (the startup hook runs), ``standby`` (a replica waiting its turn, its gRPC
  port not bound: the controller without the lease), ``serving``, or ``draining`` (a stop
  was asked for: no new calls, in-flight ones finish). ``checks`` are the readiness hook's,
  each ``"ok"`` or what is wrong (the store does not answer, the node is not registered, the
  controller does not hold the lease). It answers 200 when ready (serving, every check ok)
  and 503 otherwise, so a load balancer or compose's health check sends nothing to a service
  that cannot serve it.
- ``/health``: the liveness probe: 200 while the process answers at all.

Shutdown. SIGTERM (or SIGINT) drains: ``/status`` turns 503 at once, the gRPC server refuses
new calls and gives in-flight ones ``grace_s`` to finish, then the shutdown hook runs (the api
stops its HTTP server there, with the same grace for its in-flight requests).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import structlog
from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from arroyo.config import Config, ServiceAddress, TracingConfig
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.logging import configure_logging
from arroyo.rpc.channel import MAX_MESSAGE_BYTES, server_credentials
from arroyo.rpc.server import ServerInterceptor
from arroyo.tls import TlsIdentity, load_identity

log = structlog.get_logger(__name__)

# Time in-flight RPCs get to finish after a stop is requested; later ones are cancelled.
DEFAULT_GRACE_S = 5.0
# Time the admin server gives an in-flight /metrics or /status request when it stops.
_ADMIN_SHUTDOWN_S = 1.0

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    # A second process on a taken port must fail to start, not silently share the port.
    ("grpc.so_reuseport", 0),
    # Accept the clients' keepalive pings (arroyo.rpc.channel pings every 30 s); the default
    # minimum of 5 min would answer them with GOAWAY and drop long-lived streams.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 20_000),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

# Adds servicers to the grpc.aio.Server (add_XServiceServicer_to_server) before it starts.
Register = Callable[[Any], None]
Startup = Callable[["RunningService"], Awaitable[None]]
Shutdown = Callable[[], Awaitable[None]]
Status = Callable[[], Mapping[str, object]]
# Readiness checks: each name to None when it holds, or to what is wrong.
Readiness = Callable[[], Awaitable[Mapping[str, str | None]]]
# Time a readiness hook gets per /status request; past it, the service is not ready.
READINESS_TIMEOUT_S = 2.0


class ServiceError(ArroyoError):
    """A service could not start: a port is taken, or a hook refused."""

    code = "service_start_failed"
    domain = ErrorDomain.EXTERNAL


@dataclass(frozen=True, slots=True)
class Listen:
    """Where a service listens. ``grpc_port`` None: no gRPC server (admin HTTP only); 0: free."""

    bind_host: str = "127.0.0.1"
    grpc_port: int | None = 0
    admin_port: int = 0

    @classmethod
    def of(cls, section: ServiceAddress) -> Listen:
        """The ports a config section (``config.controller``, ``config.node``...) names."""
        return cls(section.bind_host, section.port, section.admin_port)


class RunningService:
    """A started service: its bound ports, and the handle that stops it.

    Made by ``start``; the startup hook receives it. ``stop`` is idempotent and safe to call
    from any task on the service's loop; ``request_stop`` only asks (``serve`` then stops).
    """

    def __init__(
        self,
        name: str,
        *,
        bind_host: str,
        tracer_provider: TracerProvider,
        owns_tracer_provider: bool,
        shutdown: Shutdown | None,
        tls: TlsIdentity | None = None,
    ) -> None:
        self.name = name
        self.bind_host = bind_host
        # The service's identity when its gRPC server is mutual TLS; its clients use it too.
        self.tls = tls
        self.tracer_provider = tracer_provider
        self.grpc_port: int | None = None
        self.admin_port: int = 0
        self.server: Any = None
        self.pid = os.getpid()
        self._owns_tracer_provider = owns_tracer_provider
        self._shutdown = shutdown
        self._admin: web.AppRunner | None = None
        self._started = time.monotonic()
        self._stop_requested = asyncio.Event()
        self._started_up = False
        self._standby = False
        self._stopping = False
        self._stopped = asyncio.Event()

    @property
    def grpc_address(self) -> str | None:
        """``host:port`` a process on this machine dials to reach the gRPC server."""
        if self.grpc_port is None:
            return None
        host = "127.0.0.1" if self.bind_host in ("0.0.0.0", "", "::") else self.bind_host
        return f"{host}:{self.grpc_port}"

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self._started

    def request_stop(self, reason: str = "requested") -> None:
        """Ask ``serve`` to shut the service down (domain code: a worker whose job ended)."""
        if not self._stop_requested.is_set():
            log.info("service_stop_requested", service=self.name, reason=reason)
            self._stop_requested.set()

    async def wait_stop_requested(self) -> None:
        await self._stop_requested.wait()

    async def stop(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Shut down, in order: refuse new RPCs and give in-flight ones ``grace_s`` (then cancel
        them), run the shutdown hook, stop the admin server, flush spans, log
        ``service_stopped``. A second call waits for the first. A failing shutdown hook is
        logged (``shutdown_hook_failed``), the rest still runs, and its error is raised last.
        """
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._stop_requested.set()
        log.info("service_stopping", service=self.name, grace_s=grace_s)
        hook_error: BaseException | None = None
        try:
            if self.server is not None:
                await self.server.stop(grace_s)
            if self._shutdown is not None:
                try:
                    await self._shutdown()
                except Exception as err:
                    log.exception("shutdown_hook_failed", service=self.name)
                    hook_error = err
            if self._admin is not None:
                await self._admin.cleanup()
            if self._owns_tracer_provider:
                self.tracer_provider.shutdown()
            else:
                self.tracer_provider.force_flush()
            log.info("service_stopped", service=self.name, uptime_s=round(self.uptime_s, 3))
        finally:
            self._stopped.set()
        if hook_error is not None:
            raise hook_error

    async def _abandon(self) -> None:
        """Undo a partial ``start``: no grace, no shutdown hook, no log."""
        if self.server is not None:
            await self.server.stop(None)
        if self._admin is not None:
            await self._admin.cleanup()
        if self._owns_tracer_provider:
            self.tracer_provider.shutdown()

    @property
    def state(self) -> str:
        if self._stop_requested.is_set():
            return "draining"
        if self._standby:
            return "standby"
        return "serving" if self._started_up else "starting"

    def status(self) -> dict[str, object]:
        return {
            "service": self.name,
            "pid": self.pid,
            "uptime_s": round(self.uptime_s, 3),
            "state": self.state,
            "grpc_port": self.grpc_port,
            "admin_port": self.admin_port,
        }


def tracer_provider_for(name: str, tracing: TracingConfig) -> TracerProvider:
    """A provider whose spans carry ``service.name``; "console" prints them (JSON, stdout)."""
    # Resource(...) rather than Resource.create(...): the latter reads OTEL_* variables, and a
    # service's settings come from its Config alone.
    provider = TracerProvider(resource=Resource({SERVICE_NAME: name}))
    if tracing.exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    return provider


async def start(
    name: str,
    config: Config,
    *,
    listen: Listen,
    register: Register | None = None,
    standby: Startup | None = None,
    startup: Startup | None = None,
    shutdown: Shutdown | None = None,
    status: Status | None = None,
    readiness: Readiness | None = None,
    tracer_provider: TracerProvider | None = None,
) -> RunningService:
    """Start the admin server, wait out ``standby``, start the gRPC server (if
    ``listen.grpc_port`` is not None), then run ``startup``; returns once all are done and
    logs ``service_started``.

    ``standby`` is awaited before the gRPC port is bound, with ``/status`` answering state
    ``standby`` (503): a replica that must wait its turn (the controller, for its lease)
    waits there, and its peers, which dial every replica, reach only the one that listens.

    ``register`` is called once, before the server starts. ``startup`` runs with both servers
    already answering (so it may hand out its own address); if it raises, both servers are
    stopped, ``shutdown`` is not run and the error propagates, so startup cleans up after
    itself. ``shutdown`` runs in ``RunningService.stop`` after the last RPC finished.
    ``status`` is called per ``/status`` request on the loop; it must not block.
    ``readiness`` too, with ``READINESS_TIMEOUT_S`` to answer (see the module docstring).
    ``tracer_provider``: where the server's spans go; by default a new one from
    ``config.tracing``, owned (shut down at stop) by the service. No process-wide state is
    touched: no logging setup, no signal handlers (``serve`` does those). ``config.tls``: see
    the module; a bad file raises ``TlsError`` before anything listens.
    """
    if register is not None and listen.grpc_port is None:
        raise ValueError(f"{name}: servicers to register but no gRPC port")
    tls = load_identity(config)
    owned = tracer_provider is None
    provider = tracer_provider or tracer_provider_for(name, config.tracing)
    running = RunningService(
        name,
        bind_host=listen.bind_host,
        tracer_provider=provider,
        owns_tracer_provider=owned,
        shutdown=shutdown,
        tls=tls,
    )
    try:
        running._admin, running.admin_port = await _start_admin(
            listen.bind_host, listen.admin_port, running, status, readiness
        )
        if standby is not None:
            running._standby = True
            log.info("service_standby", service=name, admin_port=running.admin_port)
            await standby(running)
            running._standby = False
        if listen.grpc_port is not None:
            running.server, running.grpc_port = await _start_grpc(
                listen.bind_host, listen.grpc_port, register, provider, tls
            )
        if startup is not None:
            await startup(running)
        running._started_up = True
    except BaseException:
        await running._abandon()
        raise
    log.info(
        "service_started",
        service=name,
        pid=running.pid,
        bind_host=listen.bind_host,
        grpc_port=running.grpc_port,
        admin_port=running.admin_port,
        tls=tls is not None,
    )
    return running


async def serve(
    name: str,
    config: Config,
    *,
    listen: Listen,
    register: Register | None = None,
    standby: Startup | None = None,
    startup: Startup | None = None,
    shutdown: Shutdown | None = None,
    status: Status | None = None,
    readiness: Readiness | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    ports_file: Path | None = None,
) -> None:
    """Run one service as this process until SIGTERM/SIGINT or ``request_stop``; see ``start``.

    Called once per process, from its ``main`` via ``asyncio.run``. Configures logging from
    ``config.logging`` (every event carries ``service=name``) and installs the service's tracer
    provider as the global one (so ``arroyo.rpc.channel`` clients and domain spans share it).
    Returns after a graceful ``RunningService.stop(grace_s)``; raises what ``start`` or the
    shutdown hook raised. A signal while ``start`` runs (a standby waiting its turn, a startup
    hook waiting for a peer) abandons the start and returns. ``ports_file``: see the module
    docstring.
    """
    configure_logging(config.logging.level, config.logging.json_logs)
    structlog.contextvars.bind_contextvars(service=name)
    provider = tracer_provider_for(name, config.tracing)
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    loop = asyncio.get_running_loop()
    starting = asyncio.create_task(
        start(
            name,
            config,
            listen=listen,
            register=register,
            standby=standby,
            startup=startup,
            shutdown=shutdown,
            status=status,
            readiness=readiness,
            tracer_provider=provider,
        )
    )

    def on_signal(reason: str) -> None:
        if not starting.done():
            log.info("service_start_abandoned", service=name, reason=reason)
            starting.cancel()
        elif not starting.cancelled() and starting.exception() is None:
            starting.result().request_stop(reason)

    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        try:
            running = await starting
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if starting.cancelled() and (current is None or not current.cancelling()):
                return  # a signal during start: nothing is left running
            raise
        try:
            if ports_file is not None:
                _write_ports_file(ports_file, running)
            await running.wait_stop_requested()
        finally:
            try:
                await running.stop(grace_s)
            finally:
                if ports_file is not None:
                    ports_file.unlink(missing_ok=True)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        provider.shutdown()


async def _start_grpc(
    host: str,
    port: int,
    register: Register | None,
    provider: TracerProvider,
    tls: TlsIdentity | None,
) -> tuple[Any, int]:
    server = grpc.aio.server(
        interceptors=[ServerInterceptor(provider)], options=list(SERVER_OPTIONS)
    )
    if register is not None:
        register(server)
    try:
        if tls is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", server_credentials(tls))
    except RuntimeError as err:
        raise ServiceError(f"cannot listen for gRPC on {host}:{port}: {err}") from err
    # Older grpc releases report a failed bind as port 0 rather than raising.
    if bound == 0:
        raise ServiceError(f"cannot listen for gRPC on {host}:{port}")
    await server.start()
    return server, int(bound)


async def _start_admin(
    host: str,
    port: int,
    running: RunningService,
    status: Status | None,
    readiness: Readiness | None,
) -> tuple[web.AppRunner, int]:
    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def status_page(_request: web.Request) -> web.Response:
        body = running.status()
        checks = await _checks(running, readiness)
        ready = running.state == "serving" and all(v is None for v in checks.values())
        body.update(ready=ready, checks={k: v or "ok" for k, v in checks.items()})
        if status is not None:
            try:
                body.update(status())
            except Exception as err:
                log.exception("status_hook_failed", service=running.name)
                body["error"] = f"{type(err).__name__}: {err}"
                return _json(body, status=500)
        return _json(body, status=200 if ready else 503)

    async def health(_request: web.Request) -> web.Response:
        return _json({"service": running.name, "pid": running.pid, "state": running.state})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status_page)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=_ADMIN_SHUTDOWN_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as err:
        await runner.cleanup()
        raise ServiceError(f"cannot listen for admin HTTP on {host}:{port}: {err}") from err
    return runner, int(runner.addresses[0][1])


async def _checks(running: RunningService, readiness: Readiness | None) -> dict[str, str | None]:
    if readiness is None or running.state != "serving":
        return {}
    try:
        async with asyncio.timeout(READINESS_TIMEOUT_S):
            return dict(await readiness())
    except TimeoutError:
        return {"readiness": f"no answer in {READINESS_TIMEOUT_S:g} s"}
    except Exception as err:
        log.warning("readiness_hook_failed", service=running.name, error=repr(err))
        return {"readiness": f"{type(err).__name__}: {err}"}


def _json(body: Mapping[str, object], *, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=partial(json.dumps, default=str))


def _write_ports_file(path: Path, running: RunningService) -> None:
    content = {
        "service": running.name,
        "pid": running.pid,
        "bind_host": running.bind_host,
        "grpc_port": running.grpc_port,
        "admin_port": running.admin_port,
    }
    # Written whole then renamed: a reader polling for the file never sees half of it.
    partial_path = path.with_name(f".{path.name}.{running.pid}.tmp")
    partial_path.write_text(json.dumps(content))
    partial_path.replace(path)
