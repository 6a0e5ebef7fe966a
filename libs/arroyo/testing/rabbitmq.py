"""A real RabbitMQ node for tests: Debian's ``rabbitmq-server`` with the stream plugin, on
127.0.0.1 at free ports (AMQP, streams, Erlang distribution, and an epmd of its own), a user and
password of its own. ``.ci/run`` installs the package."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from arroyo.testing.ports import free_port
from arroyo.testing.processes import ServerUnavailableError, stop, tail

START_TIMEOUT_S = 90.0
_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


class RabbitmqUnavailableError(ServerUnavailableError):
    """No rabbitmq-server here, or it would not start."""


@dataclass(frozen=True)
class RabbitmqNode:
    host: str
    stream_port: int
    username: str
    password: str

    def options(self) -> str:
        return (
            f"host = '{self.host}', port = '{self.stream_port}', username = '{self.username}', "
            f"password = '{self.password}'"
        )


def find_rabbitmq_server() -> Path:
    if not _SERVER.exists():
        raise RabbitmqUnavailableError(
            "rabbitmq-server is not installed: apt-get install rabbitmq-server (.ci/run does)"
        )
    return _SERVER


@contextmanager
def running_rabbitmq(root: Path) -> Iterator[RabbitmqNode]:
    server = find_rabbitmq_server()
    root.mkdir(parents=True, exist_ok=True)
    node = RabbitmqNode("127.0.0.1", free_port(), "arroyo", secrets.token_hex(8))
    epmd = free_port()
    (root / "enabled_plugins").write_text("[rabbitmq_stream].\n")
    (root / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{free_port()}\n"
        f"stream.listeners.tcp.1 = 127.0.0.1:{node.stream_port}\n"
        "stream.advertised_host = 127.0.0.1\n"
        f"stream.advertised_port = {node.stream_port}\n"
        f"default_user = {node.username}\ndefault_pass = {node.password}\n"
        "loopback_users = none\n"
    )
    env = {
        **os.environ,
        "HOME": str(root),
        "RABBITMQ_NODENAME": f"arroyo{epmd}@localhost",
        "RABBITMQ_DIST_PORT": str(free_port()),
        "ERL_EPMD_PORT": str(epmd),
        "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
        "RABBITMQ_LOG_BASE": str(root / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"),
        "RABBITMQ_PID_FILE": str(root / "pid"),
    }
    log = root / "server.log"
    process = subprocess.Popen(
        [str(server)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RabbitmqUnavailableError(f"rabbitmq-server exited at start:\n{tail(log)}")
            try:
                with socket.create_connection((node.host, node.stream_port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RabbitmqUnavailableError(
                        f"rabbitmq-server did not listen:\n{tail(log)}"
                    ) from None
                time.sleep(0.2)
        yield node
    finally:
        stop(process, timeout=20)
        # Its epmd daemonised on a port of its own: stop it too.
        subprocess.run(
            ["epmd", "-port", str(epmd), "-kill"], env=env, capture_output=True, check=False
        )
