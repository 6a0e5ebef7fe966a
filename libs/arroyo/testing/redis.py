"""A real Redis server for tests: Debian's ``redis-server``, on 127.0.0.1 at a free port.

``running_redis(root)`` starts one in ``root`` (no persistence, a password required, as a
production server would have), waits until it answers, yields its address and password, and
stops it. ``.ci/run`` installs the package (``apt-get install redis-server``).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from arroyo.testing.ports import free_port
from arroyo.testing.processes import ServerUnavailableError, stop, tail

START_TIMEOUT_S = 30.0


class RedisUnavailableError(ServerUnavailableError):
    """No redis-server here, or it would not start."""


@dataclass(frozen=True)
class RedisServer:
    host: str
    port: int
    password: str
    pid: int = 0  # the redis-server process (a test may pause it: SIGSTOP)

    @property
    def address(self) -> str:
        return f"redis://{self.host}:{self.port}"

    def options(self) -> str:
        """The WITH options of a table on this server."""
        return f"address = '{self.address}', password = '{self.password}'"


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None:
        raise RedisUnavailableError(
            "redis-server is not installed: apt-get install redis-server (.ci/run does)"
        )
    return found


@contextmanager
def running_redis(root: Path) -> Iterator[RedisServer]:
    binary = find_redis_server()
    root.mkdir(parents=True, exist_ok=True)
    server = RedisServer("127.0.0.1", free_port(), secrets.token_hex(8))
    log = root / "redis.log"
    command = [binary, "--bind", server.host, "--port", str(server.port)]
    command += ["--requirepass", server.password, "--save", "", "--appendonly", "no"]
    command += ["--dir", str(root), "--logfile", str(log)]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    server = dataclasses.replace(server, pid=process.pid)
    try:
        _wait_until_ready(server, process, log)
        yield server
    finally:
        stop(process, timeout=10)


def _wait_until_ready(server: RedisServer, process: subprocess.Popen[bytes], log: Path) -> None:
    import redis

    client = redis.Redis(server.host, server.port, password=server.password, socket_timeout=2)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                raise RedisUnavailableError(f"redis-server exited at start:\n{tail(log)}")
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RedisUnavailableError(f"redis-server did not answer:\n{tail(log)}")
            time.sleep(0.05)
    finally:
        client.close()
