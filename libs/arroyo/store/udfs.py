"""The store's queries of saved UDFs (``model.SavedUdf``), mixed into ``base.SqlStore``, whose
``_transaction`` they run in."""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager
from typing import Any

from arroyo.store.connection_tables import Transaction
from arroyo.store.errors import Conflict, NotFound
from arroyo.store.model import SavedUdf, UdfId

_COLUMNS = "id, name, prefix, language, definition, description, created_at, updated_at"


class UdfQueries(abc.ABC):
    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractAsyncContextManager[Transaction]: ...

    async def create_udf(self, udf: SavedUdf) -> None:
        async with self._transaction(write=True) as tx:
            # Checked first for a message that names the UDF; a racing creator is stopped by
            # the UNIQUE constraint.
            # In any case: Spark's function names are case-insensitive.
            if await tx.fetch(
                "SELECT 1 AS found FROM udfs WHERE lower(name) = lower($1)", udf.name
            ):
                raise Conflict(f"a UDF named '{udf.name}' is already saved")
            await tx.execute(
                f"INSERT INTO udfs ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                udf.id,
                udf.name,
                udf.prefix,
                udf.language,
                udf.definition,
                udf.description,
                udf.created_at,
                udf.updated_at,
            )

    async def list_udfs(self) -> list[SavedUdf]:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM udfs ORDER BY created_at, id")
        return [_udf(r) for r in rows]

    async def delete_udf(self, udf_id: UdfId) -> None:
        async with self._transaction(write=True) as tx:
            deleted = await tx.execute("DELETE FROM udfs WHERE id = $1", udf_id)
        if not deleted:
            raise NotFound(f"UDF {udf_id} does not exist")


def _udf(row: dict[str, Any]) -> SavedUdf:
    return SavedUdf(
        id=UdfId(row["id"]),
        name=row["name"],
        prefix=row["prefix"],
        language=row["language"],
        definition=row["definition"],
        description=row["description"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
