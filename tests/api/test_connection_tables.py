"""Connection tables (Arroyo's ``/api/v1/connection_tables``) and a profile's autocompletion
over the REST API, on the servers of ``tests.api``: a SQLite store, the real compiler behind
gRPC for the tests that compile (``spark``), and a real Kafka broker and NATS server for those
that connect (``kafka``, ``nats``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from arroyo.store import ConnectionTableId
from arroyo.testing.ports import free_port
from tests.api import Env, error_of, running_api
from tests.feeds import POLLED, serve

if TYPE_CHECKING:
    from arroyo.compiler import Compiler
    from arroyo.testing.kafka import KafkaBroker
    from arroyo.testing.nats import NatsServer

TABLES = "/api/v1/connection_tables"
PROFILES = "/api/v1/connection_profiles"
PASSWORD = "hunter2-not-for-your-eyes"
FIELDS = [
    {"name": "id", "type": "int64", "required": True},
    {"name": "name", "type": "string"},
    {"name": "at", "type": "timestamp", "unit": "millisecond"},
    {"name": "tags", "type": "list", "items": {"name": "item", "type": "utf8"}},
    {"name": "point", "type": "struct", "fields": [{"name": "x", "type": "f64"}]},
]


async def create_profile(env: Env, bootstrap_servers: str = "k:9092") -> dict[str, Any]:
    body = {
        "name": "cluster",
        "connector": "kafka",
        "config": {
            "bootstrap_servers": bootstrap_servers,
            "auth.type": "sasl",
            "auth.mechanism": "PLAIN",
            "auth.protocol": "SASL_PLAINTEXT",
            "auth.username": "u",
            "auth.password": PASSWORD,
        }
        if bootstrap_servers == "k:9092"
        else {"bootstrap_servers": bootstrap_servers},
    }
    response = await env.client.post(PROFILES, json=body)
    created: dict[str, Any] = await response.json()
    assert response.status == 201, created
    return created


def kafka_table(name: str, profile_id: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "connector": "kafka",
        "connectionProfileId": profile_id,
        "config": {"topic": "events", "type": "source", "source.offset": "earliest"},
        "schema": {"format": {"json": {"confluentSchemaRegistry": False}}, **schema},
    }


async def create_table(env: Env, body: dict[str, Any]) -> dict[str, Any]:
    response = await env.client.post(TABLES, json=body)
    created: dict[str, Any] = await response.json()
    assert response.status == 201, created
    return created


async def test_a_table_is_created_listed_paged_fetched_and_deleted(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        profile = await create_profile(env)
        first = await create_table(env, kafka_table("first", profile["id"], fields=FIELDS))
        assert first["id"].startswith("ct_")
        assert (first["connector"], first["table_type"]) == ("kafka", "source")
        assert first["config"] == {"topic": "events", "source.offset": "earliest"}
        assert first["connection_profile"]["id"] == profile["id"]
        assert first["connection_profile"]["config"]["auth.password"] == "********"
        assert PASSWORD not in json.dumps(first)
        schema = first["schema"]
        assert schema["format"] == "json"
        assert [f["sql_name"] for f in schema["fields"]] == [
            "BIGINT",
            "TEXT",
            "TIMESTAMP",
            "TEXT[]",
            'STRUCT <"x" DOUBLE>',
        ]
        assert schema["inferred"] is False
        second = await create_table(env, kafka_table("second", profile["id"], fields=FIELDS))

        response = await env.client.get(TABLES, params={"limit": "1"})
        page = await response.json()
        assert response.status == 200
        assert ([t["id"] for t in page["data"]], page["has_more"]) == ([second["id"]], True)
        response = await env.client.get(
            TABLES, params={"limit": "1", "starting_after": second["id"]}
        )
        page = await response.json()
        assert ([t["id"] for t in page["data"]], page["has_more"]) == ([first["id"]], False)
        message = await error_of(
            await env.client.get(TABLES, params={"starting_after": "ct_nope"}), 400
        )
        assert "query.starting_after" in message

        response = await env.client.get(f"{TABLES}/{first['id']}")
        assert response.status == 200
        assert await response.json() == first

        response = await env.client.delete(f"{TABLES}/{first['id']}")
        assert response.status == 204
        assert "does not exist" in await error_of(
            await env.client.get(f"{TABLES}/{first['id']}"), 404
        )
        await error_of(await env.client.delete(f"{TABLES}/{first['id']}"), 404)
        assert await env.store.get_connection_table(ConnectionTableId(first["id"])) is None


async def test_a_taken_name_is_409_and_a_used_profile_cannot_be_deleted(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        profile = await create_profile(env)
        table = await create_table(env, kafka_table("events", profile["id"], fields=FIELDS))
        response = await env.client.post(
            TABLES, json=kafka_table("events", profile["id"], fields=FIELDS)
        )
        assert "already exists" in await error_of(response, 409)
        message = await error_of(await env.client.delete(f"{PROFILES}/{profile['id']}"), 409)
        assert "used by connection tables: events" in message
        await env.client.delete(f"{TABLES}/{table['id']}")
        response = await env.client.delete(f"{PROFILES}/{profile['id']}")
        assert response.status == 204


async def test_definitions_become_fields(tmp_path: Path) -> None:
    json_schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": ["string", "null"]},
            "at": {"type": "string", "format": "date-time"},
            "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            "any": {"type": "object"},
        },
        "required": ["id"],
    }
    avro = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"]},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "xs", "type": {"type": "array", "items": "int"}},
            {"name": "ys", "type": {"type": "array", "items": ["null", "string"]}},
        ],
    }
    async with running_api(tmp_path) as env:
        profile = await create_profile(env)
        definition = {"type": "jsonSchema", "schema": json.dumps(json_schema)}
        table = await create_table(
            env, kafka_table("from_json", profile["id"], definition=definition)
        )
        fields = {f["name"]: (f["sql_name"], f["required"]) for f in table["schema"]["fields"]}
        assert fields == {
            "id": ("BIGINT", True),
            "name": ("TEXT", False),
            "at": ("TIMESTAMP", False),
            "nested": ('STRUCT <"ok" BOOLEAN>', False),
            "any": ("JSON", False),
        }
        assert table["schema"]["definition"]["type"] == "json_schema"

        response = await env.client.post(
            f"{TABLES}/schemas/test",
            json={
                "format": "avro",
                "definition": {"type": "avroSchema", "schema": json.dumps(avro)},
            },
        )
        body = await response.json()
        assert response.status == 200, body
        fields = {f["name"]: (f["sql_name"], f["required"]) for f in body["fields"]}
        assert fields == {
            "id": ("BIGINT", True),
            "name": ("TEXT", False),
            "at": ("TIMESTAMP", True),
            "xs": ("INT[]", True),
            "ys": ("TEXT[]", True),
        }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"connector": "kafkaa"}, "body.connector: unknown connector 'kafkaa'"),
        ({"connectionProfileId": "cp_nope"}, "connection profile cp_nope does not exist"),
        ({"name": "has space"}, "body.name"),
        ({"config": {"topic": "t", "type": "both"}}, "body.config.type: connector 'kafka'"),
        ({"config": {"topic": "t", "type": "source", "nope": "1"}}, "body.config.nope"),
        ({"config": {"type": "source"}}, "body.config.topic"),
        ({"config": {"topic": "t", "type": "source", "format": "json"}}, "body.config.format"),
        ({"schema": {"format": "json"}}, "a source table needs fields or a definition"),
        ({"schema": {"format": "parquet", "fields": FIELDS}}, "does not support format"),
        ({"schema": {"format": {"json": {"nope": True}}, "fields": FIELDS}}, "option 'nope'"),
        (
            {"schema": {"fields": [{"name": "a", "type": "int65"}]}},
            "body.schema.fields[0].type: unknown type 'int65'",
        ),
        (
            {"schema": {"fields": [{"name": "a", "type": "struct"}]}},
            "body.schema.fields[0].fields",
        ),
        ({"schema": {"fields": FIELDS, "primaryKeys": ["nope"]}}, "no field named 'nope'"),
        ({"schema": {"badData": "ignore", "fields": FIELDS}}, "body.schema.badData"),
        (
            {"schema": {"definition": {"type": "jsonSchema", "schema": "{"}}},
            "body.schema.definition.schema: not JSON",
        ),
        (
            {"schema": {"definition": {"type": "jsonSchema", "schema": "[" * 100_000}}},
            "body.schema.definition.schema: not JSON",
        ),
        (
            {
                "schema": {
                    "definition": {
                        "type": "jsonSchema",
                        "schema": '{"type": "object", "properties": {"a": {"type": "string"}}, '
                        '"required": true}',
                    }
                }
            },
            "body.schema.definition.required: a list of property names",
        ),
        (
            {"schema": {"definition": {"type": "protobufSchema", "schema": "syntax"}}},
            "'protobuf_schema' cannot be read here",
        ),
        ({"extra": 1}, "body.extra"),
    ],
)
async def test_bad_tables_are_400_naming_the_problem_and_store_nothing(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    async with running_api(tmp_path) as env:
        profile = await create_profile(env)
        body = kafka_table("t", profile["id"], fields=FIELDS) | change
        for path in (TABLES, f"{TABLES}/test"):
            got = await error_of(await env.client.post(path, json=body), 400)
            assert message in got, got
        assert await env.store.list_connection_tables() == []


async def test_a_webhook_sink_needs_no_fields_and_takes_the_querys(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        table = await create_table(
            env,
            {
                "name": "hook",
                "connector": "webhook",
                "config": {"endpoint": "http://127.0.0.1:1/h", "headers": "X-Token: s3cret"},
                "schema": {"format": "json"},
            },
        )
        assert table["table_type"] == "sink"
        assert table["schema"]["inferred"] is True
        assert table["config"]["headers"] == "********"


@pytest.mark.spark
async def test_a_query_reads_and_writes_saved_tables_by_name(
    tmp_path: Path, compiler: Compiler
) -> None:
    query = "INSERT INTO hook SELECT id, name FROM events WHERE id > 1;"
    async with running_api(tmp_path, compiler=compiler) as env:
        profile = await create_profile(env)
        await create_table(env, kafka_table("events", profile["id"], fields=FIELDS[:2]))
        await create_table(
            env,
            {
                "name": "hook",
                "connector": "webhook",
                "config": {"endpoint": "http://127.0.0.1:1/h"},
            },
        )
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": query})
        body = await response.json()
        assert response.status == 200
        assert body["errors"] == [], body
        tables = {t["name"]: t for t in body["tables"]}
        assert (tables["events"]["connector"], tables["events"]["role"]) == ("kafka", "source")
        assert [c["name"] for c in tables["events"]["columns"]] == ["id", "name"]
        assert tables["hook"]["connector"] == "webhook"
        assert PASSWORD not in json.dumps(body)

        # A table the query declares itself is the query's, whatever is saved by that name.
        own = (
            "CREATE TABLE events WITH (connector = 'impulse', event_rate = '1');\n"
            "INSERT INTO hook SELECT counter AS id FROM events;"
        )
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": own})
        body = await response.json()
        assert body["errors"] == [], body
        assert {t["name"]: t["connector"] for t in body["tables"]}["events"] == "impulse"

        response = await env.client.post("/api/v1/pipelines", json={"name": "p", "query": query})
        assert response.status == 201, await response.text()


@pytest.mark.spark
async def test_a_saved_table_that_does_not_plan_is_reported_where_the_query_names_it(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        profile = await create_profile(env)
        # Planning finds what creation cannot: the event time column does not exist.
        body = kafka_table("events", profile["id"], fields=FIELDS[:2])
        body["config"]["event_time_field"] = "nope"
        await create_table(env, body)
        query = (
            "CREATE TABLE out WITH (connector = 'blackhole');\n"
            "INSERT INTO out SELECT id FROM events;"
        )
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": query})
        errors = (await response.json())["errors"]
        assert errors, errors
        assert errors[0]["message"].startswith("saved connection table 'events': "), errors
        assert (errors[0]["line"], errors[0]["column"]) == (2, 32)


async def test_autocomplete_of_an_unreachable_cluster_is_502(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        profile = await create_profile(env, f"127.0.0.1:{free_port()}")
        response = await env.client.get(f"{PROFILES}/{profile['id']}/autocomplete")
        assert "connection profile 'cluster'" in await error_of(response, 502)
        await error_of(await env.client.get(f"{PROFILES}/cp_nope/autocomplete"), 404)


async def _events(response: Any) -> list[dict[str, Any]]:
    assert response.status == 200, await response.text()
    assert response.content_type == "text/event-stream"
    text = await response.text()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.kafka
async def test_autocomplete_lists_topics_and_a_test_streams_the_newest_records(
    tmp_path: Path, kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    kafka_broker.produce(kafka_topic, [json.dumps({"id": n, "name": f"n{n}"}) for n in range(8)])
    async with running_api(tmp_path) as env:
        profile = await create_profile(env, kafka_broker.bootstrap_servers)
        response = await env.client.get(f"{PROFILES}/{profile['id']}/autocomplete")
        body = await response.json()
        assert response.status == 200, body
        assert kafka_topic in body["values"]["topic"]

        table = kafka_table("events", profile["id"], fields=FIELDS[:2])
        table["config"]["topic"] = kafka_topic
        events = await _events(await env.client.post(f"{TABLES}/test", json=table))
        assert events[-1] == {"error": False, "done": True, "message": "the table is ready to use"}
        records = [json.loads(e["message"]) for e in events if e["message"].startswith("{")]
        assert len(records) == 5
        assert {r["id"] for r in records} <= set(range(8))

        table["config"]["topic"] = "no-such-topic"
        events = await _events(await env.client.post(f"{TABLES}/test", json=table))
        assert events[-1]["error"] and events[-1]["done"]
        assert "no topic 'no-such-topic'" in events[-1]["message"]


@pytest.mark.http
async def test_a_test_of_an_http_source_streams_its_first_messages(tmp_path: Path) -> None:
    port = free_port()
    runner = await serve(port)
    base = f"http://127.0.0.1:{port}"
    schema = {"format": {"json": {}}, "fields": FIELDS[:2]}
    try:
        async with running_api(tmp_path) as env:
            for connector, config in [
                ("sse", {"endpoint": f"{base}/sse"}),
                (
                    "websocket",
                    {"endpoint": f"ws://127.0.0.1:{port}/ws", "subscription_message": "subscribe"},
                ),
                ("polling_http", {"endpoint": f"{base}/poll", "poll_interval_ms": "50"}),
            ]:
                table = {"name": "t", "connector": connector, "config": config, "schema": schema}
                events = await _events(await env.client.post(f"{TABLES}/test", json=table))
                assert events[-1] == {
                    "error": False,
                    "done": True,
                    "message": "the table is ready to use",
                }, (connector, events)
                records = [json.loads(e["message"]) for e in events if e["message"][0] == "{"]
                if connector == "polling_http":  # emit_behavior 'all': each poll's body
                    assert records == [POLLED] * 5, events
                else:
                    assert [r["id"] for r in records] == [0, 1, 2, 3, 4], (connector, events)

            table = {"name": "t", "connector": "sse", "config": {"endpoint": f"{base}/x"}}
            table["schema"] = schema
            events = await _events(await env.client.post(f"{TABLES}/test", json=table))
            assert events[-1]["error"] and events[-1]["done"], events
            assert f"SSE endpoint {base}/x answered 404: no such feed" in events[-1]["message"]
    finally:
        await runner.cleanup()


@pytest.mark.nats
async def test_autocomplete_lists_nats_streams_and_their_subjects(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    import nats

    stream = f"s{uuid.uuid4().hex[:8]}"
    client = await nats.connect(
        nats_server.url, user=nats_server.username, password=nats_server.password
    )
    try:
        await client.jetstream().add_stream(name=stream, subjects=[f"{stream}.a", f"{stream}.b"])
    finally:
        await client.close()
    async with running_api(tmp_path) as env:
        config = {
            "servers": f"{nats_server.host}:{nats_server.port}",
            "auth.type": "credentials",
            "auth.username": nats_server.username,
            "auth.password": nats_server.password,
        }
        response = await env.client.post(
            PROFILES, json={"name": "nats", "connector": "nats", "config": config}
        )
        profile = await response.json()
        assert response.status == 201, profile
        response = await env.client.get(f"{PROFILES}/{profile['id']}/autocomplete")
        values = (await response.json())["values"]
        assert response.status == 200, values
        assert stream in values["stream"]
        assert {f"{stream}.a", f"{stream}.b"} <= set(values["subject"])


def test_a_client_librarys_error_has_the_secrets_taken_out() -> None:
    """A client library's message may quote the settings it was given: its secrets are
    replaced before the message reaches the caller."""
    from arroyo.api.connection_table_handlers import _scrubbed
    from arroyo.api.models import REDACTED
    from arroyo.connectors.kinesis.options import KinesisConnection

    settings = KinesisConnection.model_validate(
        {"aws_access_key_id": "AKID", "aws_secret_access_key": "s3cret-key"}
    )
    said = _scrubbed("refused key AKID with secret s3cret-key", KinesisConnection, settings)
    assert said == f"refused key AKID with secret {REDACTED}"
