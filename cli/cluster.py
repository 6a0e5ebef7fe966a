"""``arroyo cluster``: api, controller, compiler and a node as separate processes on one machine.

Each service runs as ``arroyo <service>`` with the same configuration, so the cluster is exactly
what a deployment runs, only supervised from one terminal. A service that exits unexpectedly is
started again (after a pause that grows with repeated crashes); Ctrl-C or SIGTERM stops them all:
SIGTERM first, so the node checkpoints its workers, SIGKILL after a grace period.

Security. The services talk mutual TLS (``arroyo.tls``). Without a ``tls`` section in the
config, the cluster makes a local CA and a certificate per service in ``data_dir/tls`` at first
start (``arroyo.tls.authority``; keys mode 0600), keeps them for later starts, and hands each
service its own through ``ARROYO__TLS__*`` variables (a node's workers inherit the node's); with
one, every service uses the configured files. Plaintext between the cluster's services is not
offered: anything on the machine could otherwise drive a node to start processes. The api
serves HTTPS with ``--https`` (or ``api.https``), and by default when it listens beyond
loopback (``arroyo.api.https``); on loopback it stays plain HTTP, which a browser opens
without a warning about the local CA. The readiness check trusts that CA.

Readiness. The cluster says "starting" at once, and its "ready" line (the API's URL) only once
the api's ``GET /api/v1/status`` says ready: the compiler has started Spark, the controller
answers and a node has registered, so a pipeline can be created and scheduled. Until then it
says every half minute which services are not ready and why, while it goes on
supervising them (a service that crash-loops never makes the cluster ready, and says so).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arroyo.config import Config, TlsConfig

SERVICES = ("controller", "compiler", "node", "api")
_GRACE_S = 90.0
_MAX_BACKOFF_S = 30.0
_STATUS_POLL_S = 0.5
_NOT_READY_REPORT_S = 30.0


@dataclass
class _Service:
    name: str
    args: list[str]
    # Over the cluster's own environment: the service's certificate.
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    crashes: int = 0
    restart_at: float = 0.0
    started_at: float = field(default_factory=time.monotonic)

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, env={**os.environ, **self.env}
        )
        self.started_at = time.monotonic()


def run_cluster(
    config: Config, config_path: Path | None, *, s3: bool = False, https: bool = False
) -> int:
    """Raises ``ConfigError`` (``TlsError``) when configured TLS files cannot serve."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    environments = _certificates(config)
    if https:
        environments["api"]["ARROYO__API__HTTPS"] = "true"
    with contextlib.ExitStack() as stack:
        if s3:
            stack.enter_context(_s3_checkpoints(config))
        return _supervise(config, config_path, environments)


def _certificates(config: Config) -> dict[str, dict[str, str]]:
    """Each service's environment for mutual TLS: nothing when the config names the files
    (checked here), else those of the cluster's own CA, made now or kept from before."""
    from arroyo.tls import load_identity
    from arroyo.tls.authority import ensure_certificates

    if load_identity(config) is not None:
        return {name: {} for name in SERVICES}
    sections = (config.api, config.controller, config.compiler, config.node)
    hosts = [h for s in sections for h in (s.bind_host, s.dial().rpartition(":")[0])]
    # And this machine's name: what a browser elsewhere dials, when the api listens beyond it.
    hosts += [config.worker.bind_host, config.worker.advertise_host or "", socket.gethostname()]
    made = ensure_certificates(config.data_dir / "tls", SERVICES, hosts=hosts)
    if made.written:
        _say(f"made certificates for mutual TLS between the services in {made.ca_file.parent}")
    return {name: files.environment() for name, files in made.services.items()}


def _api_config(config: Config, env: dict[str, str]) -> Config:
    """The config the api runs with: the cluster's, with its certificate and HTTPS setting."""
    tls = config.tls
    if "ARROYO__TLS__CERT_FILE" in env:
        tls = TlsConfig(
            cert_file=Path(env["ARROYO__TLS__CERT_FILE"]),
            key_file=Path(env["ARROYO__TLS__KEY_FILE"]),
            ca_file=Path(env["ARROYO__TLS__CA_FILE"]),
        )
    api = config.api
    if "ARROYO__API__HTTPS" in env:
        api = api.model_copy(update={"https": env["ARROYO__API__HTTPS"] == "true"})
    return config.model_copy(update={"tls": tls, "api": api})


@contextlib.contextmanager
def _s3_checkpoints(config: Config) -> Iterator[None]:
    """An S3 server for the cluster's checkpoints: the services (and their workers) reach it
    through the environment they inherit, as they would reach a real one."""
    from arroyo.testing.s3 import REGION, S3Server

    with S3Server.start(config.data_dir / "s3") as server:
        bucket = "arroyo"
        if not (config.data_dir / "s3" / bucket).is_dir():
            server.create_bucket(bucket)
        url = f"s3://{bucket}/checkpoints"
        os.environ.update(
            {
                "ARROYO__CHECKPOINT_URL": url,
                "AWS_ACCESS_KEY_ID": server.access_key,
                "AWS_SECRET_ACCESS_KEY": server.secret_key,
                "AWS_ENDPOINT": server.endpoint,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_ALLOW_HTTP": "true",
            }
        )
        _say(f"S3 server at {server.endpoint} (data in {server.data_dir}); checkpoints in {url}")
        yield


def _supervise(
    config: Config, config_path: Path | None, environments: dict[str, dict[str, str]]
) -> int:
    from arroyo.api.https import https_context
    from arroyo.tls import client_context

    api_config = _api_config(config, environments["api"])
    https = https_context(api_config)
    trust = None
    if https is not None:
        ca = api_config.tls.ca_file
        # A certificate of the api's own (api.https_cert_file) is judged by the system's CAs.
        custom = api_config.api.https_cert_file is not None
        trust = client_context(None if custom or ca is None else api_config.resolve(ca))
    base = [sys.executable, "-m", "arroyo_cli.main"]
    if config_path is not None:
        base += ["--config", str(config_path)]
    services = [_Service(name, [*base, name], environments[name]) for name in SERVICES]
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    for service in services:
        service.start()
    _say(
        f"starting {', '.join(SERVICES)} (database {config.database_url()}); "
        "Ctrl-C stops everything"
    )
    api = config.api
    local_host = "127.0.0.1" if api.bind_host in ("0.0.0.0", "", "::") else api.bind_host
    scheme = "http" if https is None else "https"
    watch = threading.Thread(
        target=watch_readiness,
        args=(f"{scheme}://{local_host}:{api.port}/api/v1/status", stop),
        kwargs={
            "ready_line": f"API and web UI at {scheme}://{api.bind_host}:{api.port}/",
            "context": trust,
        },
        name="readiness",
        daemon=True,
    )
    watch.start()
    while not stop.wait(0.5):
        now = time.monotonic()
        for service in services:
            process = service.process
            if process is not None and process.poll() is not None:
                # A service that ran for a while before it died is not crash-looping.
                healthy = now - service.started_at > _MAX_BACKOFF_S
                service.crashes = 1 if healthy else service.crashes + 1
                backoff = min(2.0 ** (service.crashes - 1), _MAX_BACKOFF_S)
                _say(
                    f"{service.name} exited with {process.returncode}; "
                    f"starting it again in {backoff:.0f}s"
                )
                service.process = None
                service.restart_at = now + backoff
            elif process is None and now >= service.restart_at:
                service.start()
    return _stop_all(services)


def watch_readiness(
    status_url: str,
    stop: threading.Event,
    *,
    ready_line: str,
    poll_s: float = _STATUS_POLL_S,
    report_s: float = _NOT_READY_REPORT_S,
    context: ssl.SSLContext | None = None,
) -> None:
    """Poll the api's ``/api/v1/status`` at ``status_url`` every ``poll_s`` until it says ready,
    then print (to stderr) ``ready_line``; until then, every ``report_s``, what is not ready and
    why. Returns once ready, or when ``stop`` is set; ``run_cluster`` runs it on a thread.
    ``context``: the TLS context of an ``https`` URL (the CA it trusts)."""
    started = time.monotonic()
    next_report = started + report_s
    while not stop.wait(poll_s):
        ready, why_not = _status(status_url, context)
        waited = time.monotonic() - started
        if ready:
            _say(f"ready after {waited:.0f}s: {ready_line}")
            return
        if time.monotonic() >= next_report:
            _say(f"not ready after {waited:.0f}s: {why_not}; still waiting")
            next_report += report_s


def _status(url: str, context: ssl.SSLContext | None = None) -> tuple[bool, str]:
    """Whether the cluster is ready and, if not, why: the services' states, or the api's."""
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            body: dict[str, Any] = json.loads(response.read())
    except (OSError, ValueError) as err:
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        return False, f"the api is not answering ({reason})"
    services: dict[str, dict[str, Any]] = body.get("services", {})
    why_not = [
        f"{name} {s.get('state')}" + (f" ({s['detail']})" if s.get("detail") else "")
        for name, s in services.items()
        if s.get("state") != "ready"
    ]
    return bool(body.get("ready")), "; ".join(why_not)


def _say(message: str) -> None:
    print(f"arroyo cluster: {message}", file=sys.stderr, flush=True)


def _stop_all(services: list[_Service]) -> int:
    running = [s.process for s in services if s.process and s.process.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    for process in running:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _say("stopped")
    return 0
