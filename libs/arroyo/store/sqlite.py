"""The store on a SQLite file, through the standard library's ``sqlite3``.

Several processes (the api and the controller) share the file: WAL journal mode lets readers
run beside the one writer, and a busy timeout makes a writer wait for the lock rather than fail.
Write transactions begin IMMEDIATE, taking the write lock up front: a deferred transaction that
read first and then tried to write could get SQLITE_BUSY at once, without waiting.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from arroyo.store.base import Row, SqlStore, Transaction
from arroyo.store.errors import Conflict, NotFound, StoreError
from arroyo.store.migrations import SQLITE

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT_S = 30.0


class SqliteStore(SqlStore):
    """``model.Store`` on one SQLite file. Open it with ``SqliteStore.open`` (or
    ``arroyo.store.open_store``)."""

    dialect = SQLITE

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s
        # sqlite3 blocks, so it runs off the event loop, on one thread that owns the one
        # connection. One thread runs the calls in order, so when a caller is cancelled while
        # its statement runs, the rollback that follows waits for that statement to finish.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arroyo-sqlite")
        # One transaction at a time on the connection.
        self._lock = asyncio.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @classmethod
    async def open(
        cls, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
    ) -> SqliteStore:
        """Open (creating the file and its directory if needed) and connect, so a path that
        cannot be opened fails here rather than at the first query."""
        store = cls(path, busy_timeout_s=busy_timeout_s)
        try:
            await store._call(lambda conn: None)
        except BaseException:
            await store.close()
            raise
        return store

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=False)

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[Transaction]:
        async with self._lock:
            if self._closed:
                raise StoreError(f"the store on {self.path} is closed", code="store_closed")
            try:
                # Inside the try: a caller cancelled while BEGIN runs on the thread must still
                # roll back, or the connection would be left in the transaction BEGIN opened.
                await self._call(lambda conn: conn.execute("BEGIN IMMEDIATE" if write else "BEGIN"))
                yield _SqliteTransaction(self)
                await self._call(lambda conn: conn.execute("COMMIT"))
            except BaseException:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._rollback)
                raise

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the connection, on the store's thread, translating sqlite3's errors."""

        def call() -> T:
            if self._conn is None:
                self._conn = self._connect()
            return fn(self._conn)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except sqlite3.Error as err:
            raise _translate(err, self.path) from err
        except OSError as err:
            raise StoreError(f"cannot open SQLite database {self.path}: {err}") from err

    # on the store's thread

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switching a new file to WAL takes an exclusive lock, and SQLite does not wait on a
        busy lock for it: processes opening the same new file at once retry, within the busy
        timeout, until one has switched it."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: sqlite3 issues no BEGIN or COMMIT of its own; _transaction does.
        # timeout is SQLite's busy timeout: how long to wait for another process's lock.
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            # Per connection, and off by default.
            conn.execute("PRAGMA foreign_keys = ON")
            # Stored in the file: the first connection switches it, later ones find it on.
            self._use_wal(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _rollback(self) -> None:
        if self._conn is None:
            return
        try:
            # A no-op when SQLite already rolled back (as it does on some errors).
            self._conn.rollback()
        except sqlite3.Error:
            # The connection is in a state we cannot trust: drop it; the next call reconnects.
            self._disconnect()

    def _disconnect(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()


class _SqliteTransaction:
    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    async def execute(self, sql: str, *args: object) -> int:
        query = _sqlite_placeholders(sql)
        # rowcount is -1 for statements that are not INSERT, UPDATE or DELETE.
        return await self._store._call(lambda conn: max(conn.execute(query, args).rowcount, 0))

    async def fetch(self, sql: str, *args: object) -> list[Row]:
        query = _sqlite_placeholders(sql)
        return await self._store._call(
            lambda conn: [dict(row) for row in conn.execute(query, args).fetchall()]
        )


@functools.lru_cache(maxsize=256)
def _sqlite_placeholders(sql: str) -> str:
    """PostgreSQL's ``$1`` as SQLite's ``?1``: the same numbered parameter, so a query that uses
    one twice passes it once on both engines. (The store's SQL has no ``$`` in literals.)"""
    return re.sub(r"\$(\d+)", r"?\1", sql)


def _translate(err: sqlite3.Error, path: Path) -> StoreError:
    name = getattr(err, "sqlite_errorname", "")
    if name == "SQLITE_CONSTRAINT_FOREIGNKEY":
        return NotFound(f"a row it refers to does not exist ({err})")
    if name in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"):
        return Conflict(f"already exists ({err})")
    return StoreError(f"SQLite database {path}: {err}")
