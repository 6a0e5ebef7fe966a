"""Readiness hooks that services share (``bootstrap.start``'s ``readiness``)."""

from __future__ import annotations

from typing import Protocol

from arroyo.service.bootstrap import Readiness


class Pingable(Protocol):
    async def ping(self) -> None: ...


def store_ready(store: Pingable) -> Readiness:
    """Readiness that holds while the store answers a query (``arroyo.store.Store.ping``)."""

    async def check() -> dict[str, str | None]:
        try:
            await store.ping()
        except Exception as err:
            return {"store": f"the database does not answer: {type(err).__name__}: {err}"}
        return {"store": None}

    return check
