"""``arroyo keys create|list|revoke``: the REST API's keys, in the configured database.

``create`` prints the new key alone on stdout (so a script can keep it) and once only: the
database keeps its SHA-256, not the key. ``list`` shows every key, revoked ones too, never a
secret. A key created or revoked takes effect on every api within seconds
(``arroyo.api.auth``). Exit codes: 0 done, 1 refused (a name in use, an unknown id) or the
database failed, 2 a bad config.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from arroyo.errors import ArroyoError
from arroyo.store import Conflict, NotFound, Store


def add_keys_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], config_option: argparse.ArgumentParser
) -> None:
    keys = sub.add_parser(
        "keys", parents=[config_option], help="the REST API's keys: create, list, revoke"
    )
    actions = keys.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="make a key; it is printed once, stored hashed")
    create.add_argument("--name", required=True, help="what the key is for (unique)")
    actions.add_parser("list", help="every key: id, name, created, revoked")
    revoke = actions.add_parser("revoke", help="refuse a key from now on")
    revoke.add_argument("key_id", help="the key's id (key_...), as `list` shows it")


def run_keys(args: argparse.Namespace) -> int:
    from arroyo.config import ConfigError, load_config

    config_path: Path | None = args.config
    try:
        url = load_config(config_path).database_url()
    except ConfigError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(url, args))
    except (Conflict, NotFound) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ArroyoError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 1


async def _run(url: str, args: argparse.Namespace) -> int:
    from arroyo.store import open_store

    store = await open_store(url)
    try:
        await store.migrate()
        return await _act(store, args)
    finally:
        await store.close()


async def _act(store: Store, args: argparse.Namespace) -> int:
    from arroyo.store import ApiKeyId
    from arroyo.store.api_keys import new_api_key

    if args.keys_command == "create":
        name = args.name.strip()
        if not name:
            print("error: --name must not be empty", file=sys.stderr)
            return 1
        key, token = new_api_key(name)
        await store.create_api_key(key)
        print(token)
        print(
            f"created {key.id} ({name}): send it as 'Authorization: Bearer <key>'; it is "
            "shown only this once",
            file=sys.stderr,
        )
        return 0
    if args.keys_command == "list":
        print(f"{'ID':<17} {'CREATED':<20} {'REVOKED':<20} NAME")
        for k in await store.list_api_keys():
            revoked = _time(k.revoked_at) if k.revoked_at is not None else "-"
            print(f"{k.id:<17} {_time(k.created_at):<20} {revoked:<20} {k.name}")
        return 0
    key = await store.revoke_api_key(ApiKeyId(args.key_id))
    print(f"revoked {key.id} ({key.name})")
    return 0


def _time(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S")
