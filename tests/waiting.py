"""Waiting on a condition in tests: poll it, fail fast when the probe says so, time out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(what: str, probe: Callable[[], T], timeout: float, interval: float = 0.2) -> T:
    """Call ``probe`` every ``interval`` seconds until it returns something truthy, and return
    that. ``probe`` raises to fail at once (a process or query that died); after ``timeout``
    seconds the wait fails, naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
