"""Stopping the server processes that tests start, and reading what they logged: the steps every
launcher of ``arroyo.testing`` (and the tests' cluster of Arroyo services) shares."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from arroyo.errors import ArroyoError, ErrorDomain


class ServerUnavailableError(ArroyoError):
    """A server the tests run is not installed here, or would not start: says which, and how
    to install it."""

    code = "server_unavailable"
    domain = ErrorDomain.EXTERNAL


def stop(*processes: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM every process still running (a clean shutdown, logs flushed), then wait for each;
    one still there after ``timeout`` seconds of its wait gets SIGKILL. Signalled together, the
    processes shut down side by side."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the log at ``path``, or ``(no log)``."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
