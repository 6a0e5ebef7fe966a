"""Waiting on a condition in tests: poll it, fail fast when the probe says so, time out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    what: str,
    probe: Callable[[], T],
    timeout: float,
    interval: float = 0.2,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` every ``interval`` seconds until it returns something truthy, and return
    that. ``probe`` raises to fail at once (a process or query that died); after ``timeout``
    seconds the wait fails, naming ``what`` it waited for and adding ``detail()`` (what was
    seen last, the services' logs)."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, timeout, detail))
        time.sleep(interval)


async def eventually(
    what: str,
    probe: Callable[[], Awaitable[T]],
    timeout: float,
    interval: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """``wait_until`` for a coroutine probe, inside an event loop."""
    deadline = time.monotonic() + timeout
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, timeout, detail))
        await asyncio.sleep(interval)


def _timed_out(what: str, timeout: float, detail: Callable[[], str] | None) -> str:
    extra = detail() if detail is not None else ""
    return f"timed out after {timeout:g} s waiting for {what}{extra}"
