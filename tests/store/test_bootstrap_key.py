"""``api.bootstrap_key`` in the store: every api replica puts it as it starts, at once or not,
on SQLite and PostgreSQL, and it ends up there once, not revoked."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from arroyo.store import Store, open_store
from arroyo.store.api_keys import BOOTSTRAP_ID, bootstrap_api_key
from tests.store.test_store import database_url, opened

__all__ = ["database_url"]


async def test_replicas_put_the_bootstrap_key_at_once(database_url: str) -> None:
    key = bootstrap_api_key("k" * 40)
    async with opened(database_url) as store:
        await store.put_bootstrap_api_key(key)
        await store.revoke_api_key(BOOTSTRAP_ID)
    stores: list[Store] = [await open_store(database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(s.put_bootstrap_api_key(key) for s in stores))
        keys = await stores[0].list_api_keys()
    finally:
        for s in stores:
            await s.close()
    assert keys == [replace(key, revoked_at=None)]
