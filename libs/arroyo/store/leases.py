"""Leases (``model.Lease``): a row per thing only one process may do at a time, and who does it
until when. The queries are mixed into ``base.SqlStore``, whose ``_transaction`` they run in.

Time is the database's (``Dialect.now_micros``), read in the statement that compares it, so
processes on machines whose clocks differ agree on when a lease ends. A take-over is one
conditional ``UPDATE`` (the holder's row, or an ended one): of two processes that try at once,
the database lets one change the row and the other finds it taken. The holder learns nothing
from the database when its own time runs out; it keeps its own, shorter, count
(``arroyo.controller.lease``).
"""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager
from typing import Any

from arroyo.store.connection_tables import Transaction
from arroyo.store.migrations import Dialect
from arroyo.store.model import Lease

_COLUMNS = "name, holder, term, acquired_at, renewed_at, expires_at"


class LeaseQueries(abc.ABC):
    dialect: Dialect

    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractAsyncContextManager[Transaction]: ...

    async def acquire_lease(self, name: str, holder: str, ttl_micros: int) -> Lease | None:
        if ttl_micros <= 0:
            raise ValueError(f"a lease's time must be > 0, got {ttl_micros} microseconds")
        now = self.dialect.now_micros
        async with self._transaction(write=True) as tx:
            # The first taker makes the row, already ended, so the update below is the one
            # path for every taker: a first start and a take-over are the same statement. It
            # reads the clock once (``clock``): every time it writes is the same instant.
            await tx.execute(
                f"INSERT INTO leases ({_COLUMNS}) VALUES ($1, '', 0, 0, 0, 0) "
                "ON CONFLICT (name) DO NOTHING",
                name,
            )
            await tx.execute(
                f"""
                UPDATE leases SET
                    term = CASE WHEN leases.holder = $2 THEN leases.term ELSE leases.term + 1 END,
                    acquired_at = CASE
                        WHEN leases.holder = $2 THEN leases.acquired_at ELSE clock.t END,
                    holder = $2,
                    renewed_at = clock.t,
                    expires_at = clock.t + $3
                FROM (SELECT {now} AS t) AS clock
                WHERE leases.name = $1 AND (leases.holder = $2 OR leases.expires_at <= clock.t)
                """,
                name,
                holder,
                ttl_micros,
            )
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM leases WHERE name = $1", name)
        lease = _lease(rows[0])
        return lease if lease.holder == holder else None

    async def release_lease(self, name: str, holder: str) -> bool:
        async with self._transaction(write=True) as tx:
            changed = await tx.execute(
                f"UPDATE leases SET expires_at = {self.dialect.now_micros} "
                "WHERE name = $1 AND holder = $2",
                name,
                holder,
            )
        return changed > 0

    async def get_lease(self, name: str) -> Lease | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM leases WHERE name = $1", name)
        return _lease(rows[0]) if rows else None


def _lease(row: dict[str, Any]) -> Lease:
    return Lease(
        name=row["name"],
        holder=row["holder"],
        term=int(row["term"]),
        acquired_at=int(row["acquired_at"]),
        renewed_at=int(row["renewed_at"]),
        expires_at=int(row["expires_at"]),
    )
