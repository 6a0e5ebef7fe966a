"""A real MQTT broker for tests: Debian's ``mosquitto``, on 127.0.0.1, at free ports.

``running_mosquitto(root)`` writes a local CA and a server certificate
(``arroyo.testing.certificates``), a password file (``mosquitto_passwd``) and a configuration
with three listeners, a plain one, a TLS one and a WebSocket one, none anonymous; starts the
broker, waits until it takes a login, yields where it is, and stops it. ``.ci/run`` installs
the package.
"""

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

from arroyo.testing.certificates import write_certificates
from arroyo.testing.ports import free_port
from arroyo.testing.processes import ServerUnavailableError, stop, tail

START_TIMEOUT_S = 30.0


class MosquittoUnavailableError(ServerUnavailableError):
    """No mosquitto here, or it would not start."""


@dataclass(frozen=True)
class Mosquitto:
    host: str
    port: int
    tls_port: int
    ws_port: int
    username: str
    password: str
    ca_file: Path

    def options(self, scheme: str = "tcp") -> str:
        """The WITH options of a table on this broker, over ``scheme``."""
        port = {"tcp": self.port, "ssl": self.tls_port, "ws": self.ws_port}[scheme]
        tls = f", 'tls.ca' = '{self.ca_file}'" if scheme == "ssl" else ""
        return (
            f"url = '{scheme}://{self.host}:{port}', username = '{self.username}', "
            f"password = '{self.password}'{tls}"
        )


def find_mosquitto() -> str:
    for name in ("mosquitto", "/usr/sbin/mosquitto"):
        found = shutil.which(name)
        if found:
            return found
    raise MosquittoUnavailableError(
        "mosquitto is not installed: apt-get install mosquitto (.ci/run does)"
    )


@contextmanager
def running_mosquitto(root: Path) -> Iterator[Mosquitto]:
    binary = find_mosquitto()
    root.mkdir(parents=True, exist_ok=True)
    host = "127.0.0.1"
    broker = Mosquitto(
        host, free_port(), free_port(), free_port(), "arroyo", secrets.token_hex(8), root / "ca.pem"
    )
    ca, cert, key = write_certificates(root, host)
    passwords = root / "passwords"
    subprocess.run(
        ["mosquitto_passwd", "-c", "-b", str(passwords), broker.username, broker.password],
        check=True,
        capture_output=True,
    )
    log = root / "mosquitto.log"
    (root / "mosquitto.conf").write_text(
        "user root\nper_listener_settings false\nallow_anonymous false\n"
        f"password_file {passwords}\nlog_dest file {log}\npersistence false\n"
        "max_queued_messages 100000\nmax_inflight_messages 0\n"
        f"listener {broker.port} {host}\n"
        f"listener {broker.tls_port} {host}\ncafile {ca}\ncertfile {cert}\nkeyfile {key}\n"
        f"listener {broker.ws_port} {host}\nprotocol websockets\n"
    )
    process = subprocess.Popen(
        [binary, "-c", str(root / "mosquitto.conf")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(root / "stderr.log").open("wb"),
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise MosquittoUnavailableError(
                    f"mosquitto exited at start:\n{tail(log)}\n{tail(root / 'stderr.log')}"
                )
            try:
                with (
                    socket.create_connection((host, broker.ws_port), timeout=1),
                    socket.create_connection((host, broker.port), timeout=1),
                ):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise MosquittoUnavailableError(
                        f"mosquitto did not listen:\n{tail(log)}"
                    ) from None
                time.sleep(0.05)
        yield broker
    finally:
        stop(process, timeout=10)
