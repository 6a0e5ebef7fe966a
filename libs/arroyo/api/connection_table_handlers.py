"""The handlers of connection tables and of a profile's autocompletion, mixed into
``arroyo.api.handlers.Api`` (whose store they use)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import structlog
from aiohttp import web
from pydantic import BaseModel, ValidationError

from arroyo.api import models as m
from arroyo.api.connection_tables import CheckedTable, checked_table, expand_schema, schema_out
from arroyo.api.errors import BadRequestError, ResourceNotFoundError, UpstreamFailedError
from arroyo.api.ids import new_id, now_micros
from arroyo.api.routing import EVENT_STREAM, Call, describe
from arroyo.connectors import ConnectorError, connector
from arroyo.connectors.base import secret_fields
from arroyo.store.errors import NotFound
from arroyo.store.model import (
    ConnectionProfile,
    ConnectionProfileId,
    ConnectionTable,
    ConnectionTableId,
    Store,
)

log = structlog.get_logger(__name__)

# What POST /connection_tables/test reads from a source, and for how long at most.
SAMPLE_RECORDS = 5
SAMPLE_TIMEOUT_S = 10.0
# The most of a sampled record an event shows.
_SAMPLE_CHARS = 1_000


class ConnectionTableHandlers:
    """Connection tables (Arroyo's ``/connection_tables``) and ``/connection_profiles/{id}/
    autocomplete``. Needs ``_store``, as ``Api`` sets it."""

    _store: Store

    async def create_connection_table(
        self, call: Call[m.CreateConnectionTableRequest]
    ) -> m.ConnectionTableOut:
        """Save a table (a connector, its options, the profile whose settings it takes, and a
        schema: fields, or a JSON Schema or Avro definition they are read from) that queries
        then read or write by name, with no CREATE TABLE. Options and schema are checked as a
        table's are (a 400 names the field); a name already taken is a 409."""
        body = call.input
        profile = await self._profile_of(body.connection_profile_id)
        checked = checked_table(body, profile)
        table = ConnectionTable(
            id=ConnectionTableId(new_id("ct")),
            name=body.name,
            connector=checked.connector.name,
            table_type=checked.table_type,
            profile_id=profile.id if profile else None,
            config=checked.config,
            schema=checked.schema,
            created_at=now_micros(),
        )
        await self._store.create_connection_table(table)
        log.info(
            "connection_table_created",
            table_id=table.id,
            name=table.name,
            connector=table.connector,
        )
        return _table_out(table, profile)

    async def list_connection_tables(
        self, call: Call[m.ListConnectionTablesQuery]
    ) -> m.ConnectionTablePage:
        """Newest first, ``limit`` at a time; pass the last id of a page as ``starting_after``
        for the next one. Secret options are redacted."""
        query = call.input
        cursor = ConnectionTableId(query.starting_after) if query.starting_after else None
        try:
            tables = await self._store.list_connection_tables(query.limit + 1, cursor)
        except NotFound as err:
            raise BadRequestError(
                f"query.starting_after: connection table {query.starting_after} does not exist"
            ) from err
        profiles = {p.id: p for p in await self._store.list_connection_profiles()}
        data = [
            _table_out(t, profiles.get(t.profile_id) if t.profile_id else None)
            for t in tables[: query.limit]
        ]
        return m.ConnectionTablePage(data=data, has_more=len(tables) > query.limit)

    async def get_connection_table(self, call: Call[None]) -> m.ConnectionTableOut:
        """The table, secret options redacted."""
        table = await self._table(call)
        profile = (
            await self._store.get_connection_profile(table.profile_id) if table.profile_id else None
        )
        return _table_out(table, profile)

    async def delete_connection_table(self, call: Call[None]) -> None:
        """Delete a table. Pipelines already created with it keep it as they compiled it;
        queries naming it no longer compile."""
        table_id = ConnectionTableId(call.path("table_id"))
        try:
            await self._store.delete_connection_table(table_id)
        except NotFound as err:
            raise ResourceNotFoundError(f"connection table {table_id} does not exist") from err
        log.info("connection_table_deleted", table_id=table_id)

    async def test_connection_table(
        self, call: Call[m.CreateConnectionTableRequest]
    ) -> web.StreamResponse:
        """Check a table without saving it, as server-sent events, each ``data:`` Arroyo's
        test message ``{"error": bool, "done": bool, "message": str}``: its options and schema
        (a 400 before any event when refused), its connection (the connector's test of its
        settings), and for a source up to five of the newest records its system holds; the
        last event has ``done`` true, and ``error`` true when the table cannot work."""
        body = call.input
        checked = checked_table(body, await self._profile_of(body.connection_profile_id))
        response = web.StreamResponse(
            headers={"Content-Type": EVENT_STREAM, "Cache-Control": "no-cache"}
        )
        await response.prepare(call.request)
        async for error, done, message in _table_test(checked):
            event = {"error": error, "done": done, "message": message}
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        await response.write_eof()
        return response

    async def test_schema(self, call: Call[m.ConnectionSchemaIn]) -> m.ConnectionSchemaOut:
        """Check a schema alone: its fields, or the JSON Schema or Avro definition they are
        read from; a 400 names what is wrong. Answers the schema as a table would keep it."""
        schema = call.input
        fmt = schema.format if isinstance(schema.format, str) else None
        if isinstance(schema.format, dict) and len(schema.format) == 1:
            fmt = next(iter(schema.format))
        return schema_out(expand_schema(schema, fmt, {}, needs_columns=False))

    async def autocomplete_connection_profile(self, call: Call[None]) -> m.ConnectionAutocomplete:
        """What the profile's system lists for a table's options, by option: a Kafka
        cluster's topics (``{"values": {"topic": [...]}}``); empty for a connector that
        cannot say. A system that cannot be reached is a 502 saying why."""
        profile_id = call.path("profile_id")
        profile = await self._store.get_connection_profile(ConnectionProfileId(profile_id))
        if profile is None:
            raise ResourceNotFoundError.connection_profile(profile_id)
        conn = connector(profile.connector)
        if conn is None or conn.connection_model is None:
            return m.ConnectionAutocomplete(values={})
        try:
            settings = conn.connection_model.model_validate(profile.config)
        except ValidationError as err:
            raise BadRequestError(
                describe(err, f"connection profile '{profile.name}' config")
            ) from err
        try:
            values = await asyncio.to_thread(conn.autocomplete, settings)
        except ConnectorError as err:
            raise UpstreamFailedError(
                f"connection profile '{profile.name}': {err.message}"
            ) from err
        except Exception as err:
            # A client library's own error; only its type is logged (its message may quote
            # the settings it was given).
            log.warning("autocomplete_raised", connector=conn.name, error=type(err).__name__)
            said = _scrubbed(str(err), conn.connection_model, settings)
            raise UpstreamFailedError(
                f"connection profile '{profile.name}': {type(err).__name__}: {said}"
            ) from err
        return m.ConnectionAutocomplete(values=values)

    async def _table(self, call: Call[None]) -> ConnectionTable:
        table_id = call.path("table_id")
        table = await self._store.get_connection_table(ConnectionTableId(table_id))
        if table is None:
            raise ResourceNotFoundError(f"connection table {table_id} does not exist")
        return table

    async def _profile_of(self, profile_id: str | None) -> ConnectionProfile | None:
        if profile_id is None:
            return None
        profile = await self._store.get_connection_profile(ConnectionProfileId(profile_id))
        if profile is None:
            raise BadRequestError(
                f"body.connectionProfileId: connection profile {profile_id} does not exist"
            )
        return profile


async def _table_test(checked: CheckedTable) -> AsyncIterator[tuple[bool, bool, str]]:
    """(error, done, message) of each step of a table's test."""
    conn = checked.connector
    yield False, False, f"the {checked.table_type} table's options and schema are valid"
    try:
        if conn.connection_model is not None:
            found = await asyncio.to_thread(conn.test_connection, checked.options)
            yield False, False, found
        if checked.table_type == "source":
            records = await asyncio.to_thread(
                conn.sample, checked.options, SAMPLE_RECORDS, SAMPLE_TIMEOUT_S
            )
            if records is not None:
                yield False, False, f"read {len(records)} of the newest records"
                for record in records:
                    yield False, False, record.decode(errors="replace")[:_SAMPLE_CHARS]
    except ConnectorError as err:
        yield True, True, err.message
        return
    except Exception as err:
        # The client library refused a setting only it knows: the user's to fix. Only the
        # type is logged: a client's message may quote its settings.
        log.warning("connection_table_test_raised", connector=conn.name, error=type(err).__name__)
        said = _scrubbed(str(err), type(checked.options), checked.options)
        yield True, True, f"{type(err).__name__}: {said}"
        return
    yield False, True, "the table is ready to use"


def _scrubbed(message: str, model: type[BaseModel] | None, settings: BaseModel) -> str:
    """``message`` (a client library's) with the values of ``settings``'s secret options
    replaced: such a message may quote the settings it was given."""
    if model is None:
        return message
    secret = secret_fields(model)
    for name, info in model.model_fields.items():
        value = getattr(settings, name, None)
        if (info.alias or name) in secret and isinstance(value, str) and value:
            message = message.replace(value, m.REDACTED)
    return message


def _redact(model: type[BaseModel] | None, config: Mapping[str, str]) -> dict[str, str]:
    if model is None:
        return dict(config)
    secret = secret_fields(model)
    names = {n for n, info in model.model_fields.items() if (info.alias or n) in secret}
    return {k: m.REDACTED if k in secret | names else v for k, v in config.items()}


def _table_out(table: ConnectionTable, profile: ConnectionProfile | None) -> m.ConnectionTableOut:
    conn = connector(table.connector)
    profile_out = None
    if profile is not None:
        profile_out = m.ConnectionProfileOut(
            id=profile.id,
            name=profile.name,
            connector=profile.connector,
            config=_redact(conn.connection_model if conn else None, profile.config)
            if conn
            else dict.fromkeys(profile.config, m.REDACTED),
            created_at=profile.created_at,
        )
    config: dict[str, Any] = (
        _redact(conn.options_model, table.config)
        if conn
        else dict.fromkeys(table.config, m.REDACTED)
    )
    return m.ConnectionTableOut.model_validate(
        {
            "id": table.id,
            "name": table.name,
            "connector": table.connector,
            "table_type": table.table_type,
            "connection_profile": profile_out,
            "config": config,
            "schema": schema_out(table.schema),
            "created_at": table.created_at,
        }
    )
