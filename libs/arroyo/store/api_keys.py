"""API keys (``model.ApiKey``): how one is made (``new_api_key``: the token its owner sends,
``<id>.<secret>``, and what the store keeps of it, the secret's SHA-256), and the store's
queries of them, mixed into ``base.SqlStore``, whose ``_transaction`` they run in."""

from __future__ import annotations

import abc
import base64
import hashlib
import secrets
import string
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from arroyo.store.connection_tables import Transaction
from arroyo.store.errors import Conflict, NotFound
from arroyo.store.model import ApiKey, ApiKeyId

_COLUMNS = "id, name, secret_sha256, created_at, revoked_at"
_ID_ALPHABET = string.ascii_lowercase + string.digits


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# The key of ``api.bootstrap_key``: its token is the secret alone (no id before a '.').
BOOTSTRAP_ID = ApiKeyId("key_bootstrap")


def bootstrap_api_key(secret: str) -> ApiKey:
    return ApiKey(BOOTSTRAP_ID, "bootstrap (api.bootstrap_key)", secret_digest(secret), 0)


def new_api_key(name: str) -> tuple[ApiKey, str]:
    """A key named ``name`` to store, and the token to give its owner (shown once): 32 random
    bytes of secret, URL-safe base64."""
    key_id = ApiKeyId("key_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(12)))
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    stored = ApiKey(key_id, name, secret_digest(secret), time.time_ns() // 1000)
    return stored, f"{key_id}.{secret}"


class ApiKeyQueries(abc.ABC):
    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractAsyncContextManager[Transaction]: ...

    async def create_api_key(self, key: ApiKey) -> None:
        async with self._transaction(write=True) as tx:
            if await tx.fetch(
                "SELECT 1 AS found FROM api_keys WHERE name = $1 AND revoked_at IS NULL",
                key.name,
            ):
                raise Conflict(f"an API key named '{key.name}' exists; revoke it first")
            await _insert(tx, key)

    async def put_bootstrap_api_key(self, key: ApiKey) -> None:
        # One upsert, not a delete and an insert: api replicas starting at once each put it,
        # and two inserts of one id would fail the second on PostgreSQL.
        key = replace(key, revoked_at=None)
        async with self._transaction(write=True) as tx:
            await tx.execute(
                f"INSERT INTO api_keys ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
                "secret_sha256 = excluded.secret_sha256, created_at = excluded.created_at, "
                "revoked_at = excluded.revoked_at",
                key.id,
                key.name,
                key.secret_sha256,
                key.created_at,
                key.revoked_at,
            )

    async def list_api_keys(self) -> list[ApiKey]:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id")
        return [_api_key(r) for r in rows]

    async def revoke_api_key(self, key_id: ApiKeyId) -> ApiKey:
        now = time.time_ns() // 1000
        async with self._transaction(write=True) as tx:
            await tx.execute(
                "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                now,
                key_id,
            )
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM api_keys WHERE id = $1", key_id)
        if not rows:
            raise NotFound(f"API key {key_id} does not exist")
        return _api_key(rows[0])


async def _insert(tx: Transaction, key: ApiKey) -> None:
    await tx.execute(
        f"INSERT INTO api_keys ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5)",
        key.id,
        key.name,
        key.secret_sha256,
        key.created_at,
        key.revoked_at,
    )


def _api_key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(
        id=ApiKeyId(row["id"]),
        name=row["name"],
        secret_sha256=row["secret_sha256"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )
