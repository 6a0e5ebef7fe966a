"""A real S3 server for tests and the local cluster: Versity's S3 gateway (versitygw).

Why this one: it is an S3 server written in Go, under the Apache 2.0 licence, built from the Go
module proxy (``go install``), and it implements the S3 API over a plain directory (its
``posix`` backend): buckets, listings (v1 and v2, delimiters), ranged reads, server-side
copies, multipart uploads (unfinished ones invisible to listings), conditional requests and
SigV4 signatures checked against its root credentials. It answers as S3 does, XML error codes
included (``NoSuchBucket``, ``InvalidAccessKeyId``, ``SignatureDoesNotMatch``), which is what a
test of wrong credentials and missing buckets needs. moto's server was the other candidate: a
mock written for unit tests, slower and looser about signatures; MinIO is AGPL-licensed.

``fetch_s3_server()`` builds the binary once into ``~/.cache/arroyo/versitygw/<version>``.
``S3Server.start(data_dir)`` runs it on 127.0.0.1, on a free port, with fresh credentials;
``create_bucket`` makes a bucket; ``storage_options`` are the table options that reach it.

From a shell, ``python -m arroyo.testing.s3 DATA_DIR`` runs one in the foreground and prints its
endpoint and credentials, until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Self

from arroyo.errors import ArroyoError
from arroyo.testing.ports import free_port
from arroyo.testing.processes import stop, tail

if TYPE_CHECKING:
    import pyarrow.fs as pafs

VERSION = "v1.8.0"
MODULE = "github.com/versity/versitygw/cmd/versitygw"
REGION = "us-east-1"


class S3ServerError(ArroyoError):
    pass


def cache_dir() -> Path:
    return Path.home() / ".cache" / "arroyo" / "versitygw" / VERSION


def fetch_s3_server() -> Path:
    """The versitygw binary, built with ``go install`` on first use (under a file lock, so
    processes starting together build it once)."""
    binary = cache_dir() / "versitygw"
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        raise S3ServerError("the S3 server is built with Go: install Go 1.22 or later")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir().parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        staging = cache_dir() / "bin.partial"
        shutil.rmtree(staging, ignore_errors=True)
        env = {**os.environ, "GOBIN": str(staging), "CGO_ENABLED": "0"}
        done = subprocess.run(
            [go, "install", f"{MODULE}@{VERSION}"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise S3ServerError(f"go install {MODULE}@{VERSION} failed:\n{done.stderr[-3000:]}")
        os.replace(staging / "versitygw", binary)
        shutil.rmtree(staging, ignore_errors=True)
    return binary


class S3Server:
    """One versitygw process serving ``data_dir`` (each bucket a directory in it)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self.access_key = "arroyo-" + secrets.token_hex(4)
        self.secret_key = secrets.token_urlsafe(24)
        self._process: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"{data_dir.name}-s3.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, data_dir: Path, timeout: float = 60.0) -> S3Server:
        server = cls(data_dir)
        server._launch(timeout)
        return server

    def _launch(self, timeout: float) -> None:
        binary = fetch_s3_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        env = {
            **os.environ,
            "ROOT_ACCESS_KEY": self.access_key,
            "ROOT_SECRET_KEY": self.secret_key,
            "VGW_REGION": REGION,
        }
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                [str(binary), "--port", f"127.0.0.1:{self.port}", "posix", str(self.data_dir)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise S3ServerError(
                    f"versitygw exited ({self._process.returncode}):\n{tail(self.log)}"
                )
            if self._answers():
                return
            time.sleep(0.1)
        self.stop()
        raise S3ServerError(f"versitygw did not answer within {timeout:.0f} s:\n{tail(self.log)}")

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint, timeout=1).close()
        except urllib.error.HTTPError:
            return True  # an S3 error (anonymous request): it is serving
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self._process is not None:
            stop(self._process, timeout=10)
            self._process = None

    def kill(self) -> None:
        """Gone at once, as a crashed server: the port stays this server's for ``restart``."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self._launch(timeout)

    def create_bucket(self, name: str) -> None:
        self.filesystem().create_dir(name)

    def filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow S3 file system on this server (an independent reader: not Spark)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            region=REGION,
            allow_bucket_creation=True,
            allow_bucket_deletion=True,
        )

    def storage_options(self) -> dict[str, str]:
        """The ``storage.*`` options of a table on this server."""
        return {
            "storage.aws_endpoint": self.endpoint,
            "storage.aws_access_key_id": self.access_key,
            "storage.aws_secret_access_key": self.secret_key,
            "storage.aws_region": REGION,
        }

    def object_store_options(self) -> dict[str, str]:
        """The options of the Rust ``object_store`` crate for this server, as delta-rs and
        other independent readers take them (the storage.* keys are Arroyo's names of them)."""
        return {k.removeprefix("storage."): v for k, v in self.storage_options().items()} | {
            "aws_allow_http": "true"
        }

    def with_clause(self) -> str:
        """``storage_options`` as WITH-clause text: ``, 'storage.x' = '...'``..."""
        return "".join(f", '{k}' = '{v}'" for k, v in self.storage_options().items())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m arroyo.testing.s3 DATA_DIR", file=sys.stderr)
        raise SystemExit(2)
    server = S3Server.start(Path(sys.argv[1]))

    def quit_(_sig: int, _frame: FrameType | None) -> None:
        server.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, quit_)
    print(f"endpoint {server.endpoint}")
    print(f"access key {server.access_key}")
    print(f"secret key {server.secret_key}")
    try:
        signal.pause()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
