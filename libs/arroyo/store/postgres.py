"""The store on PostgreSQL, through an asyncpg connection pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from arroyo.store.base import Row, SqlStore, Transaction
from arroyo.store.errors import Conflict, NotFound, StoreError
from arroyo.store.migrations import POSTGRES

# The errors asyncpg raises for a server that is down, a connection that broke, or a query the
# server refused. (TimeoutError, from connecting, is an OSError.)
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)


class PostgresStore(SqlStore):
    """``model.Store`` on a PostgreSQL database. Open it with ``PostgresStore.open`` (or
    ``arroyo.store.open_store``)."""

    dialect = POSTGRES

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 10) -> PostgresStore:
        """Connect, so an unreachable server fails here rather than at the first query."""
        try:
            pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size)
        except _DRIVER_ERRORS as err:
            # Not the URL: it may hold a password.
            raise StoreError(f"cannot connect to PostgreSQL: {err}") from err
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[Transaction]:
        # READ COMMITTED for reads and writes alike: row locks order concurrent writers, and the
        # one write made on the strength of a read (a checkpoint or error for a job that was
        # there) is also guarded by its foreign key, reported as NotFound below.
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                yield _PostgresTransaction(conn)
        except asyncpg.ForeignKeyViolationError as err:
            raise NotFound(f"a row it refers to does not exist ({err})") from err
        except asyncpg.UniqueViolationError as err:
            raise Conflict(f"already exists ({err})") from err
        except _DRIVER_ERRORS as err:
            raise StoreError(f"PostgreSQL: {err}") from err


class _PostgresTransaction:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: object) -> int:
        # The command tag: "UPDATE 2", "INSERT 0 1", "DELETE 0", "CREATE TABLE".
        tag: str = await self._conn.execute(sql, *args)
        count = tag.rsplit(" ", 1)[-1]
        return int(count) if count.isdigit() else 0

    async def fetch(self, sql: str, *args: object) -> list[Row]:
        return [dict(record) for record in await self._conn.fetch(sql, *args)]
