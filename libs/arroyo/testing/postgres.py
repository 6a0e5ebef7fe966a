"""A real PostgreSQL server for tests, started from its binaries and torn down afterwards.

``running_postgres()`` runs a throwaway PostgreSQL cluster: ``initdb`` into a fresh directory,
``pg_ctl start`` on 127.0.0.1 at a free port (``arroyo.testing.ports``), with its socket in that
directory, then a database created for the tests. PostgreSQL refuses to run as root, so as root
the cluster belongs to, and runs as, the ``postgres`` user (or ``nobody``). The binaries are
found on PATH or where Debian's ``postgresql`` package puts them (``find_postgres_bin``).
"""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.testing import processes
from arroyo.testing.ports import free_port

SUPERUSER = "arroyo"
DATABASE = "arroyo_test"
START_TIMEOUT_S = 60.0


class PostgresUnavailableError(ArroyoError):
    """No PostgreSQL binaries here, or the server would not start."""

    code = "postgres_unavailable"
    domain = ErrorDomain.EXTERNAL


@dataclass(frozen=True)
class _RunAs:
    """The user the cluster runs as; None fields mean the current one."""

    uid: int | None = None
    gid: int | None = None
    home: str | None = None


def find_postgres_bin() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``: on PATH, or where Debian's
    ``postgresql`` package puts them (not on PATH), the newest version first."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    candidates += [
        Path(d) for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    ]
    for directory in candidates:
        if all((directory / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresUnavailableError(
        "PostgreSQL is not installed: no initdb, pg_ctl and postgres on PATH or under "
        "/usr/lib/postgresql/*/bin. Install it (apt-get install postgresql; .ci/run does)."
    )


def _version(bindir: str) -> tuple[int, ...]:
    name = Path(bindir).parent.name
    return tuple(int(p) for p in name.split(".") if p.isdigit())


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway PostgreSQL server (``running_postgres_server``): ``url`` is its test
    database; ``restart()`` stops and starts the same cluster on the same port and data, as an
    operator's restart does (every client's connections are cut)."""

    url: str
    bindir: Path
    data: Path
    run_as: _RunAs

    @property
    def log_path(self) -> Path:
        return self.data.parent / "server.log"

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m mode``; returns once the server accepts connections again."""
        self._pg_ctl("-m", mode, "restart")
        asyncio.run(_wait_until_ready(self.url))

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: the server is down until ``start()``."""
        self._pg_ctl("-m", mode, "stop")

    def start(self) -> None:
        """Start the stopped server; returns once it accepts connections."""
        self._pg_ctl("start")
        asyncio.run(_wait_until_ready(self.url))

    def _pg_ctl(self, *args: str) -> None:
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_path)]
        command += ["-w", "-t", str(int(START_TIMEOUT_S)), *args]
        try:
            _run(self.run_as, command, self.data.parent)
        except PostgresUnavailableError as err:
            raise PostgresUnavailableError(
                f"{err}\nserver log:\n{processes.tail(self.log_path)}"
            ) from err


@contextmanager
def running_postgres(bindir: Path | None = None) -> Iterator[str]:
    """Yield the URL of a database on a fresh PostgreSQL server; stop it and delete its files
    on exit."""
    with running_postgres_server(bindir) as server:
        yield server.url


@contextmanager
def running_postgres_server(bindir: Path | None = None) -> Iterator[PostgresServer]:
    """``running_postgres``, yielding the server itself (to restart it)."""
    bindir = bindir or find_postgres_bin()
    run_as = _unprivileged_user()
    # Under /tmp rather than pytest's tmp_path: the path must be short (a Unix socket path is
    # at most 107 bytes) and, when the server runs as another user, reachable by that user
    # (pytest's base directory is private to us).
    root = Path(tempfile.mkdtemp(prefix="arroyo-pg-"))
    try:
        if run_as.uid is not None:
            os.chown(root, run_as.uid, -1 if run_as.gid is None else run_as.gid)
        data = root / "data"
        port = free_port()
        _run(
            run_as,
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-locale",
                "--encoding=UTF8",
                "--no-sync",
            ],
            root,
        )
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {port}\n"
                f"unix_socket_directories = '{root}'\n"
                # A throwaway cluster: durability only costs time.
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )
        base = f"postgresql://{SUPERUSER}@127.0.0.1:{port}"
        server = PostgresServer(f"{base}/{DATABASE}", bindir, data, run_as)
        # -w: pg_ctl itself polls until the server accepts connections, up to -t seconds.
        server._pg_ctl("start")
        try:
            asyncio.run(_wait_until_ready(f"{base}/postgres"))
            asyncio.run(create_database(f"{base}/postgres", DATABASE))
            yield server
        finally:
            _run(run_as, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _wait_until_ready(url: str) -> None:
    # The server accepts connections once pg_ctl -w returns, but poll with a deadline anyway:
    # a slow machine may still be finishing startup.
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            conn = await asyncpg.connect(url)
        except (OSError, asyncpg.CannotConnectNowError) as err:
            if time.monotonic() > deadline:
                raise PostgresUnavailableError(
                    f"PostgreSQL did not accept connections within {START_TIMEOUT_S:g} s: {err}"
                ) from err
            await asyncio.sleep(0.1)
        else:
            await conn.close()
            return


async def create_database(url: str, name: str) -> str:
    """Create database ``name`` on the server of ``url`` (a URL of any database on it); returns
    the new database's URL."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return f"{url.rsplit('/', 1)[0]}/{name}"


def _unprivileged_user() -> _RunAs:
    """As root, a user PostgreSQL will run as: ``postgres`` if it exists, else ``nobody``."""
    if os.geteuid() != 0:
        return _RunAs()
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        return _RunAs(uid=user.pw_uid, gid=user.pw_gid, home=user.pw_dir)
    raise PostgresUnavailableError("running as root, and no postgres or nobody user to run as")


def _run(run_as: _RunAs, args: list[str], cwd: Path) -> None:
    env = dict(os.environ, LC_ALL="C")
    if run_as.home is not None:
        env["HOME"] = run_as.home
    if run_as.uid is not None:
        # Drops root's uid, gid and supplementary groups, by util-linux's setpriv rather than
        # subprocess's user= and group=: with those, Python forks rather than vforks, and the
        # fork handlers of a library with threads (gRPC's, in a test process that uses it) run
        # in the child, which then crashed before its exec (SIGSEGV, seen once in CI).
        gid = run_as.gid if run_as.gid is not None else run_as.uid
        args = ["setpriv", f"--reuid={run_as.uid}", f"--regid={gid}", "--clear-groups", *args]
    result = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S + 30,
        check=False,
    )
    if result.returncode != 0:
        raise PostgresUnavailableError(
            f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        )
