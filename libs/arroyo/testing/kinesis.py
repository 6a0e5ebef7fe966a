"""A Kinesis-compatible server for tests: kinesalite, on 127.0.0.1 at a free port.

Why kinesalite: it was written to answer as Kinesis does, and it does where our connector
looks. Its sequence numbers have Kinesis's form (128-bit decimals that carry the shard and the
time); a shard closed by SplitShard or MergeShards gets an ending sequence number, its
children list their parents, and GetRecords on its end gives no next iterator; a bad iterator
is an ``InvalidArgumentException`` and a missing stream a ``ResourceNotFoundException``, as
from AWS. moto's server, the other candidate (tried here, 5.2), gave a closed shard's readers
a next iterator forever, an ending sequence number of ``0``, and an HTTP 500 for a bad
iterator. Neither checks signatures, so wrong credentials cannot be tested against either.

kinesalite is installed from the npm registry into ``~/.cache/arroyo/kinesalite/<version>``
with ``npm ci`` from the lock file beside this module (``kinesalite/package-lock.json``), once.
It keeps its streams in memory. ``running_kinesis(root)`` starts one, yields it, and stops it.
kinesalite throws, and so exits, when a client abandons a request mid-body; the server here is
started with a guard (``kinesalite/survive-aborts.js``) that logs such an error and goes on.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arroyo.testing.ports import free_port
from arroyo.testing.processes import ServerUnavailableError, stop, tail

VERSION = "3.3.3"
START_TIMEOUT_S = 30.0
REGION = "us-east-1"
_PACKAGE = Path(__file__).with_name("kinesalite")


class KinesisUnavailableError(ServerUnavailableError):
    """No Node or npm here, or kinesalite would not install or start."""


@dataclass(frozen=True)
class KinesisServer:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def options(self) -> str:
        """The WITH options of a table on this server (any key will do: none is checked)."""
        return (
            f"aws_endpoint = '{self.endpoint}', aws_region = '{REGION}', "
            "aws_access_key_id = 'arroyo', aws_secret_access_key = 'arroyo-test'"
        )

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "kinesis",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="arroyo",
            aws_secret_access_key="arroyo-test",
        )

    def create_stream(self, name: str, shards: int = 1) -> None:
        kinesis = self.client()
        kinesis.create_stream(StreamName=name, ShardCount=shards)
        kinesis.get_waiter("stream_exists").wait(
            StreamName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 100}
        )


def cache_dir() -> Path:
    return Path.home() / ".cache" / "arroyo" / "kinesalite" / VERSION


def fetch_kinesalite() -> Path:
    """kinesalite's command, installed with ``npm ci`` on first use (under a file lock, so
    processes starting together install it once)."""
    command = cache_dir() / "node_modules" / ".bin" / "kinesalite"
    if command.exists():
        return command
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise KinesisUnavailableError("kinesalite runs on Node: install nodejs and npm")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir().parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if command.exists():
            return command
        for name in ("package.json", "package-lock.json"):
            shutil.copy(_PACKAGE / name, cache_dir() / name)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=cache_dir(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not command.exists():
            raise KinesisUnavailableError(
                f"npm ci of kinesalite {VERSION} failed:\n{done.stderr[-3000:]}"
            )
    return command


@contextmanager
def running_kinesis(root: Path) -> Iterator[KinesisServer]:
    command = fetch_kinesalite()
    root.mkdir(parents=True, exist_ok=True)
    server = KinesisServer("127.0.0.1", free_port())
    log = root / "kinesalite.log"
    # kinesalite's own script, run by node with a guard that keeps one client's abandoned request
    # from ending the server (see kinesalite/survive-aborts.js).
    node = shutil.which("node") or "node"
    args = [node, "--require", str(_PACKAGE / "survive-aborts.js"), str(command.resolve())]
    # Streams are created, resharded and deleted at once, not after AWS's half a second.
    args += ["--host", server.host, "--port", str(server.port)]
    args += ["--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0"]
    args += ["--shardLimit", "100"]
    with open(log, "ab") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NODE_ENV": "production"},
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(server):
            if process.poll() is not None:
                raise KinesisUnavailableError(f"kinesalite exited at start:\n{tail(log)}")
            if time.monotonic() > deadline:
                raise KinesisUnavailableError(f"kinesalite did not answer:\n{tail(log)}")
            time.sleep(0.05)
        yield server
    finally:
        stop(process, timeout=10)


def _answers(server: KinesisServer) -> bool:
    try:
        with socket.create_connection((server.host, server.port), timeout=1):
            return True
    except OSError:
        return False
