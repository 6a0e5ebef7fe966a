"""The store on PostgreSQL, through an asyncpg connection pool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import asyncpg
import structlog

from arroyo.store.base import Row, SqlStore, Transaction
from arroyo.store.errors import Conflict, NotFound, StoreError
from arroyo.store.migrations import POSTGRES

log = structlog.get_logger(__name__)

# The errors asyncpg raises for a server that is down, a connection that broke, or a query the
# server refused. (TimeoutError, from connecting, is an OSError.)
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
# A connection the server closed, or a server not (yet) accepting connections: after a
# restart of the server, every pooled connection is one of the first.
_CONNECTION_ERRORS = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.InterfaceError,
    OSError,
)
# How long a transaction waits for the server to come back before failing with StoreError.
RECONNECT_S = 15.0


class PostgresStore(SqlStore):
    """``model.Store`` on a PostgreSQL database. Open it with ``PostgresStore.open`` (or
    ``arroyo.store.open_store``).

    A transaction that cannot begin because its connection is gone (the server restarted) or
    the server is not accepting connections yet is begun again on a new connection, for up to
    ``RECONNECT_S`` seconds: nothing of it has run, so beginning again is safe. A connection lost
    inside a transaction fails it with ``StoreError`` (retryable), as the server may or may not
    have committed it."""

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
            conn, transaction = await self._begin()
            try:
                try:
                    yield _PostgresTransaction(conn)
                except BaseException:
                    with suppress(*_DRIVER_ERRORS):
                        await transaction.rollback()
                    raise
                await transaction.commit()
            finally:
                await self._pool.release(conn)
        except asyncpg.ForeignKeyViolationError as err:
            raise NotFound(f"a row it refers to does not exist ({err})") from err
        except asyncpg.UniqueViolationError as err:
            raise Conflict(f"already exists ({err})") from err
        except _DRIVER_ERRORS as err:
            raise StoreError(f"PostgreSQL: {err}") from err

    async def _begin(self) -> tuple[Any, Any]:
        """A pooled connection with a transaction begun on it, connecting again while the
        server is away (up to ``RECONNECT_S``)."""
        deadline = time.monotonic() + RECONNECT_S
        pause = 0.05
        while True:
            try:
                conn = await self._pool.acquire()
                try:
                    transaction = conn.transaction()
                    await transaction.start()
                except BaseException:
                    # Cancelled too: the connection goes back, or the pool runs dry.
                    await self._pool.release(conn)
                    raise
                return conn, transaction
            except _CONNECTION_ERRORS as err:
                # The pool's other connections went with the server: drop them all.
                await self._pool.expire_connections()
                if time.monotonic() > deadline:
                    raise
                log.warning("postgres_reconnecting", error=str(err))
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)


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
