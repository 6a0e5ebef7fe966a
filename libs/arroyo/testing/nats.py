"""A real NATS server for tests: Debian's ``nats-server``, on 127.0.0.1 at a free port, with
JetStream on and a user and password required. ``.ci/run`` installs the package."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from arroyo.testing.ports import free_port
from arroyo.testing.processes import ServerUnavailableError, stop, tail

START_TIMEOUT_S = 30.0


class NatsUnavailableError(ServerUnavailableError):
    """No nats-server here, or it would not start."""


@dataclass(frozen=True)
class NatsServer:
    host: str
    port: int
    username: str
    password: str

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def options(self) -> str:
        """The WITH options of a table on this server."""
        return (
            f"servers = '{self.host}:{self.port}', 'auth.type' = 'credentials', "
            f"'auth.username' = '{self.username}', 'auth.password' = '{self.password}'"
        )


def find_nats_server() -> str:
    for name in ("nats-server", "/usr/sbin/nats-server"):
        found = shutil.which(name)
        if found:
            return found
    raise NatsUnavailableError("nats-server is not installed: apt-get install nats-server")


@contextmanager
def running_nats(root: Path, again: NatsServer | None = None) -> Iterator[NatsServer]:
    """A server in ``root`` (its JetStream store there); ``again``: one that ran in ``root``
    before, started again where it was, with its login and streams (a server back after an
    outage)."""
    binary = find_nats_server()
    root.mkdir(parents=True, exist_ok=True)
    server = again or NatsServer("127.0.0.1", free_port(), "arroyo", secrets.token_hex(8))
    config = root / "nats.conf"
    config.write_text(
        f'listen: "{server.host}:{server.port}"\n'
        f'jetstream {{ store_dir: "{root / "jetstream"}" }}\n'
        f'authorization {{ user: "{server.username}", password: "{server.password}" }}\n'
    )
    log = root / "nats.log"
    process = subprocess.Popen(
        [binary, "-c", str(config), "-l", str(log)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise NatsUnavailableError(f"nats-server exited at start:\n{tail(log)}")
            try:
                with socket.create_connection((server.host, server.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise NatsUnavailableError(
                        f"nats-server did not listen:\n{tail(log)}"
                    ) from None
                time.sleep(0.05)
        yield server
    finally:
        stop(process, timeout=10)
