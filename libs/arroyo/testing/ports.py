"""Free TCP ports for servers that tests and benchmarks start: one place hands them out.

A server started by a test (a Kafka broker, a schema registry, PostgreSQL, an Arroyo service)
binds its port only seconds after the port was chosen, once its JVM or process is up. Two
things could take the port in between, and ``free_port`` rules out both:

- Any socket bound to port 0, or any outgoing connection, gets a port from the kernel's
  ephemeral range (a Spark driver, a gRPC client, a browser): ports are picked *below* that
  range, where the kernel never hands one out by itself. (So a port is never picked by binding
  port 0 and closing the socket: that port is the next outgoing connection's to take.)
- Another ``free_port`` call, in this process, another pytest-xdist worker, a benchmark or
  another checkout's test run on the same machine: every port handed out is recorded, under a
  file lock, in one registry per user (``registry_path()``), and is not handed out again while
  the process it went to is alive; a picked port must also bind now (no server holds it).

Why a registry rather than a port range per xdist worker: a range keyed by the worker id
(``gw0``, ``gw1``) keeps this session's workers apart, but not two sessions run side by side
(two checkouts, a benchmark beside the tests), whose ``gw0`` would share a range; the registry
serialises every process of the user on the machine. An entry outlives a server that stopped,
so a port stays reserved for a restart on the same port (``KafkaBroker.restart``), and goes
when its process exits.
"""

from __future__ import annotations

import json
import os
import random
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.filelock import file_lock

# How far below the ephemeral range ports are picked (from 1024 at least).
PORT_SPAN = 12_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Linux's default start of the ephemeral range, where /proc does not say.
_DEFAULT_EPHEMERAL_LOW = 32768
_ATTEMPTS = 1000


class NoFreePortError(ArroyoError):
    """No port below the ephemeral range could be handed out."""

    code = "no_free_port"
    domain = ErrorDomain.EXTERNAL


def registry_path() -> Path:
    """The file recording the ports handed out (port -> pid), one per user of the machine."""
    return Path(tempfile.gettempdir()) / f"arroyo-test-ports-{os.getuid()}.json"


def port_range() -> range:
    """The ports ``free_port`` picks from: the ``PORT_SPAN`` ports below the ephemeral range."""
    try:
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = _DEFAULT_EPHEMERAL_LOW
    return range(max(1024, low - PORT_SPAN), low)


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing listens on and no live process was handed by this
    function, now reserved for this process (see the module's docstring). Raises
    ``NoFreePortError`` when none is found."""
    candidates = port_range()
    rng = random.Random()
    registry = registry_path()
    with file_lock(registry.with_suffix(".lock")):
        handed_out = _live(_read(registry))
        for _ in range(_ATTEMPTS):
            port = rng.choice(candidates)
            if port in handed_out or not _bindable(host, port):
                continue
            handed_out[port] = os.getpid()
            _write(registry, handed_out)
            return port
    raise NoFreePortError(
        f"no free port in {candidates.start}-{candidates.stop - 1} on {host} after "
        f"{_ATTEMPTS} tries ({len(handed_out)} handed out to live processes)"
    )


def service_ports(services: Iterable[str]) -> dict[str, str]:
    """``ARROYO__<SERVICE>__PORT`` and ``ARROYO__<SERVICE>__ADMIN_PORT`` environment variables
    giving each of ``services`` (``api``, ``controller``, ...) its own free ports."""
    env: dict[str, str] = {}
    for name in services:
        env[f"ARROYO__{name.upper()}__PORT"] = str(free_port())
        env[f"ARROYO__{name.upper()}__ADMIN_PORT"] = str(free_port())
    return env


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _read(registry: Path) -> dict[int, int]:
    try:
        entries = json.loads(registry.read_text())
        return {int(port): int(pid) for port, pid in entries.items()}
    except (OSError, ValueError, AttributeError):
        # Missing (the first call) or torn by a crash mid-write: start again.
        return {}


def _write(registry: Path, handed_out: dict[int, int]) -> None:
    staging = registry.with_suffix(f".tmp-{os.getpid()}")
    staging.write_text(json.dumps({str(port): pid for port, pid in sorted(handed_out.items())}))
    staging.replace(registry)


def _live(handed_out: dict[int, int]) -> dict[int, int]:
    return {port: pid for port, pid in handed_out.items() if _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
