"""The store's queries of connection tables (``model.ConnectionTable``), mixed into
``base.SqlStore``, whose ``_transaction`` they run in."""

from __future__ import annotations

import abc
import json
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from arroyo.store.errors import Conflict, NotFound
from arroyo.store.model import ConnectionProfileId, ConnectionTable, ConnectionTableId
from arroyo.store.secrets import SealedColumns

_COLUMNS = "id, name, connector, table_type, profile_id, config_json, schema_json, created_at"


class Transaction(Protocol):
    """``base.Transaction``, as these queries use it."""

    async def execute(self, sql: str, *args: object) -> int: ...

    async def fetch(self, sql: str, *args: object) -> list[dict[str, Any]]: ...


class ConnectionTableQueries(SealedColumns, abc.ABC):
    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractAsyncContextManager[Transaction]: ...

    def _table(self, row: dict[str, Any]) -> ConnectionTable:
        what = f"connection table {row['name']}'s settings"
        return _connection_table(self._opened(row, "config_json", what))

    async def create_connection_table(self, table: ConnectionTable) -> None:
        async with self._transaction(write=True) as tx:
            # Checked first for messages that name the table and the profile; a racing creator
            # is stopped by the UNIQUE constraint and the foreign key.
            if await tx.fetch(
                "SELECT 1 AS found FROM connection_tables WHERE name = $1", table.name
            ):
                raise Conflict(f"a connection table named '{table.name}' already exists")
            if table.profile_id is not None and not await tx.fetch(
                "SELECT 1 AS found FROM connection_profiles WHERE id = $1", table.profile_id
            ):
                raise NotFound(f"connection profile {table.profile_id} does not exist")
            await tx.execute(
                f"INSERT INTO connection_tables ({_COLUMNS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                table.id,
                table.name,
                table.connector,
                table.table_type,
                table.profile_id,
                self._seal(json.dumps(table.config, sort_keys=True)),
                json.dumps(table.schema, sort_keys=True),
                table.created_at,
            )

    async def list_connection_tables(
        self, limit: int | None = None, starting_after: ConnectionTableId | None = None
    ) -> list[ConnectionTable]:
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        order = "ORDER BY created_at DESC, id DESC"
        async with self._transaction(write=False) as tx:
            where, args = "", []
            if starting_after is not None:
                cursor = await tx.fetch(
                    "SELECT created_at FROM connection_tables WHERE id = $1", starting_after
                )
                if not cursor:
                    raise NotFound(f"connection table {starting_after} does not exist")
                where = "WHERE created_at < $1 OR (created_at = $1 AND id < $2) "
                args = [cursor[0]["created_at"], starting_after]
            if limit is not None:
                order += f" LIMIT ${len(args) + 1}"
                args.append(limit)
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM connection_tables {where}{order}", *args)
        return [self._table(r) for r in rows]

    async def get_connection_table(self, table_id: ConnectionTableId) -> ConnectionTable | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {_COLUMNS} FROM connection_tables WHERE id = $1", table_id
            )
        return self._table(rows[0]) if rows else None

    async def delete_connection_table(self, table_id: ConnectionTableId) -> None:
        async with self._transaction(write=True) as tx:
            deleted = await tx.execute("DELETE FROM connection_tables WHERE id = $1", table_id)
        if not deleted:
            raise NotFound(f"connection table {table_id} does not exist")

    @staticmethod
    async def _refuse_profile_in_use(tx: Transaction, profile_id: ConnectionProfileId) -> None:
        """Raise Conflict when connection tables use the profile (their foreign key would
        refuse its deletion, with a message that names nothing)."""
        rows = await tx.fetch(
            "SELECT name FROM connection_tables WHERE profile_id = $1", profile_id
        )
        if rows:
            names = ", ".join(sorted(r["name"] for r in rows))
            raise Conflict(
                f"connection profile {profile_id} is used by connection tables: {names}; "
                "delete them first"
            )


def _connection_table(row: dict[str, Any]) -> ConnectionTable:
    profile_id = row["profile_id"]
    return ConnectionTable(
        id=ConnectionTableId(row["id"]),
        name=row["name"],
        connector=row["connector"],
        table_type=row["table_type"],
        profile_id=None if profile_id is None else ConnectionProfileId(profile_id),
        config=json.loads(row["config_json"]),
        schema=json.loads(row["schema_json"]),
        created_at=row["created_at"],
    )
