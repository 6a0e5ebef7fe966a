"""``arroyo cluster``: api, controller, compiler and a node as separate processes on one machine.

Each service runs as ``arroyo <service>`` with the same configuration, so the cluster is exactly
what a deployment runs, only supervised from one terminal. A service that exits unexpectedly is
started again (after a pause that grows with repeated crashes); Ctrl-C or SIGTERM stops them all:
SIGTERM first, so the node checkpoints its workers, SIGKILL after a grace period.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from arroyo.config import Config

SERVICES = ("controller", "compiler", "node", "api")
_GRACE_S = 90.0
_MAX_BACKOFF_S = 30.0


@dataclass
class _Service:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    crashes: int = 0
    restart_at: float = 0.0
    started_at: float = field(default_factory=time.monotonic)

    def start(self) -> None:
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL)
        self.started_at = time.monotonic()


def run_cluster(config: Config, config_path: Path | None) -> int:
    base = [sys.executable, "-m", "arroyo.cli.main"]
    if config_path is not None:
        base += ["--config", str(config_path)]
    services = [_Service(name, [*base, name]) for name in SERVICES]
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    for service in services:
        service.start()
    api = config.api
    print(
        f"arroyo cluster: API and web UI at http://{api.bind_host}:{api.port}/ "
        f"(database {config.database_url()}); Ctrl-C stops everything",
        file=sys.stderr,
        flush=True,
    )
    while not stop.wait(0.5):
        now = time.monotonic()
        for service in services:
            process = service.process
            if process is not None and process.poll() is not None:
                # A service that ran for a while before it died is not crash-looping.
                healthy = now - service.started_at > _MAX_BACKOFF_S
                service.crashes = 1 if healthy else service.crashes + 1
                backoff = min(2.0 ** (service.crashes - 1), _MAX_BACKOFF_S)
                print(
                    f"arroyo cluster: {service.name} exited with {process.returncode}; "
                    f"starting it again in {backoff:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
                service.process = None
                service.restart_at = now + backoff
            elif process is None and now >= service.restart_at:
                service.start()
    return _stop_all(services)


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
    print("arroyo cluster: stopped", file=sys.stderr, flush=True)
    return 0
