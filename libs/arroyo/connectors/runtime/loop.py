"""An asyncio event loop on a thread of its own, for async clients (nats-py, rstream) called
from code that is not async (Spark's data source readers, partition writers)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Loop:
    """An asyncio event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.loop.run_forever()
        finally:  # stopped: its selector and sockets are let go
            self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
