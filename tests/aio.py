"""Running async code in tests, one way (pytest-asyncio is not a dependency).

- An async test is written ``async def test_...``: ``tests/conftest.py`` runs it with ``run``,
  its fixtures resolved as for any test (fixtures themselves stay synchronous).
- Synchronous code that awaits something (a fixture creating a database, a test that must stay
  synchronous because what it drives runs its own event loop, as ``arroyo migrate`` does) calls
  ``run`` too.
- A synchronous test whose servers must keep running while its own thread does blocking work
  (Playwright's sync API refuses to run inside an event loop) hosts them on a ``LoopThread``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result, run to completion on a fresh event loop that is closed afterwards
    (with its async generators and default executor), as ``asyncio.run`` does."""
    return asyncio.run(coro)


class LoopThread:
    """An event loop running in a background thread, for a synchronous test; made by
    ``loop_thread``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.loop = loop
        self.timeout_s = timeout_s

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s result, run on the loop; the calling thread blocks for at most
        ``timeout_s`` seconds."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout_s)

    def call(self, function: Callable[[], T]) -> T:
        """``function()``, called on the loop (for objects that belong to it)."""

        async def on_the_loop() -> T:
            return function()

        return self.run(on_the_loop())


@contextmanager
def loop_thread(name: str, timeout_s: float) -> Iterator[LoopThread]:
    """A ``LoopThread`` named ``name``, stopped, joined and closed on exit. What runs on it must
    be shut down (through ``LoopThread.run``) before the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    try:
        yield LoopThread(loop, timeout_s)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        loop.close()
