"""Secrets at rest (arroyo.store.secrets): connection profiles' and tables' settings and
pipelines' programs are encrypted in the database, on SQLite and PostgreSQL, read back as
they were written; another key is refused with a message that says so; rows written before
encryption still read. Checked as a reader that is not the store: the database's own bytes
(SQLite's file) or rows (asyncpg)."""

from __future__ import annotations

import base64
import json
import secrets
import stat
from dataclasses import replace
from pathlib import Path

import asyncpg
import pytest

from arroyo.store import ConnectionTable, ConnectionTableId, JobId, open_store
from arroyo.store.secrets import PREFIX, SecretBox, SecretsKeyError, key_from
from tests.store.test_store import CONFIG, database_url, pipeline, profile

__all__ = ["database_url"]  # the fixture, shared with test_store

PLANTED = "PLANTED-" + secrets.token_hex(8)


async def _raw_values(url: str) -> list[str]:
    """Every stored value of the secret-holding columns, as the database has them."""
    queries = (
        "SELECT config_json AS v FROM connection_profiles",
        "SELECT config_json AS v FROM connection_tables",
        "SELECT program_json AS v FROM pipelines",
    )
    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return [row[0] for q in queries for row in conn.execute(q)]
    conn = await asyncpg.connect(url)
    try:
        return [row["v"] for q in queries for row in await conn.fetch(q)]
    finally:
        await conn.close()


async def test_secrets_are_sealed_in_the_database_and_read_back(database_url: str) -> None:
    box = SecretBox(secrets.token_bytes(32))
    store = await open_store(database_url, secrets=box)
    try:
        await store.migrate()
        cp = replace(profile(1), config={"auth.password": PLANTED})
        await store.create_connection_profile(cp)
        table = ConnectionTable(
            id=ConnectionTableId("ct_1"),
            name="t",
            connector="redis",
            table_type="sink",
            profile_id=None,
            config={"password": PLANTED},
            schema={"format": "json", "fields": []},
            created_at=1,
        )
        await store.create_connection_table(table)
        program = json.dumps({"sources": [{"options": {"password": PLANTED}}]})
        await store.create_pipeline(replace(pipeline(1), program_json=program), JobId("j"), CONFIG)

        assert (await store.get_connection_profile(cp.id)) == cp
        assert (await store.get_connection_table(table.id)) == table
        stored = await store.get_pipeline(pipeline(1).id)
        assert stored is not None and stored.program_json == program
    finally:
        await store.close()

    raw = await _raw_values(database_url)
    assert len(raw) == 3 and all(v.startswith(PREFIX) for v in raw)
    assert not any(PLANTED in v for v in raw)
    if database_url.startswith("sqlite:///"):
        assert PLANTED.encode() not in Path(database_url.removeprefix("sqlite:///")).read_bytes()

    # Another key: refused, naming what could not be read (never its content).
    other = await open_store(database_url, secrets=SecretBox(secrets.token_bytes(32)))
    try:
        with pytest.raises(SecretsKeyError, match="sealed with another secrets key") as err:
            await other.get_connection_profile(cp.id)
        assert "cluster 1" in str(err.value) and PLANTED not in str(err.value)
    finally:
        await other.close()
    # No key at all: refused too.
    keyless = await open_store(database_url)
    try:
        with pytest.raises(SecretsKeyError, match="has no secrets key"):
            await keyless.list_connection_tables()
    finally:
        await keyless.close()


async def test_rows_written_before_encryption_still_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    plain = await open_store(url)
    try:
        await plain.migrate()
        await plain.create_connection_profile(profile(2))
    finally:
        await plain.close()
    sealed = await open_store(url, secrets=SecretBox(secrets.token_bytes(32)))
    try:
        assert await sealed.get_connection_profile(profile(2).id) == profile(2)
    finally:
        await sealed.close()


def test_the_key_is_made_once_private_and_shared_by_a_data_dir(tmp_path: Path) -> None:
    key = key_from(None, tmp_path)
    assert len(key) == 32 and key_from(None, tmp_path) == key
    assert stat.S_IMODE((tmp_path / "secrets.key").stat().st_mode) == 0o600
    configured = secrets.token_bytes(32)
    assert key_from(base64.b64encode(configured).decode(), tmp_path) == configured
    with pytest.raises(SecretsKeyError, match="not base64"):
        key_from("not base64!", tmp_path)
    with pytest.raises(SecretsKeyError, match="must be 32 bytes"):
        SecretBox(b"short")
