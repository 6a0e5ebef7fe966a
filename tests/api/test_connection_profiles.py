"""Connection profiles and the connector catalogue over the REST API, on the servers of
``tests.api``: a SQLite store, the real compiler behind gRPC for the tests that compile
(``spark``), and a real Kafka broker for the one that connects (``kafka``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from arroyo.store import ConnectionProfileId, PipelineId
from arroyo.testing.ports import free_port
from tests.api import Env, error_of, running_api

if TYPE_CHECKING:
    from arroyo.compiler import Compiler
    from arroyo.testing.kafka import KafkaBroker

PROFILES = "/api/v1/connection_profiles"
PASSWORD = "hunter2-not-for-your-eyes"
REGISTRY_SECRET = "registry-secret-also-hidden"
SASL = {
    "bootstrap_servers": "broker-1:9092,broker-2:9092",
    "auth.type": "sasl",
    "auth.mechanism": "SCRAM-SHA-256",
    "auth.protocol": "SASL_SSL",
    "auth.username": "arroyo",
    "auth.password": PASSWORD,
    "schema_registry.endpoint": "http://registry:8081",
    "schema_registry.api_key": "key",
    "schema_registry.api_secret": REGISTRY_SECRET,
}
SECRETS = (PASSWORD, REGISTRY_SECRET)

SOURCE_QUERY = """CREATE TABLE events (id BIGINT, name TEXT) WITH (
    connector = 'kafka',
    connection_profile = '{profile}',
    topic = 'events',
    type = 'source',
    format = 'json'
);
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT id, name FROM events;"""


async def create_profile(
    env: Env, name: str = "cluster", config: dict[str, str] | None = None
) -> dict[str, Any]:
    body = {"name": name, "connector": "kafka", "config": config or {"bootstrap_servers": "k:9092"}}
    response = await env.client.post(PROFILES, json=body)
    created: dict[str, Any] = await response.json()
    assert response.status == 201, created
    return created


# the catalogue


async def test_connectors_lists_every_connector_with_its_schemas(tmp_path: Path) -> None:
    from arroyo.connectors import CONNECTORS

    async with running_api(tmp_path) as env:
        response = await env.client.get("/api/v1/connectors")
        assert response.status == 200
        connectors = {c["name"]: c for c in (await response.json())["data"]}
        assert set(connectors) == {c.name for c in CONNECTORS}

        kafka = connectors["kafka"]
        assert kafka["roles"] == ["sink", "source"]
        assert {"json", "avro", "raw_string"} <= set(kafka["formats"])
        assert kafka["default_format"] == "json"
        assert kafka["metadata_keys"]["offset_id"] == ["BIGINT"]
        options = kafka["options_schema"]["properties"]
        assert {"bootstrap_servers", "topic", "source.offset", "auth.password"} <= set(options)
        assert "bootstrap_servers" in kafka["options_schema"]["required"]
        connection = kafka["connection_schema"]["properties"]
        assert {"bootstrap_servers", "auth.type", "auth.password"} <= set(connection)
        assert "topic" not in connection
        assert connection["auth.password"]["secret"] is True
        assert connection["auth.type"]["enum"] == ["none", "sasl"]

        impulse = connectors["impulse"]
        assert impulse["roles"] == ["source"]
        assert impulse["connection_schema"] is None
        assert "event_rate" in impulse["options_schema"]["properties"]


# create, list, get, delete


async def test_a_profile_is_created_listed_fetched_and_deleted(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        b = await create_profile(env, "b-cluster", {"bootstrap_servers": "b:9092"})
        a = await create_profile(env, "a-cluster", {"bootstrap_servers": "a:9092"})
        assert a["id"].startswith("cp_") and a["id"] != b["id"]
        assert (a["name"], a["connector"]) == ("a-cluster", "kafka")
        assert a["config"] == {"bootstrap_servers": "a:9092"}
        assert isinstance(a["created_at"], int)

        response = await env.client.get(PROFILES)
        assert response.status == 200
        assert (await response.json())["data"] == [a, b]

        response = await env.client.get(f"{PROFILES}/{a['id']}")
        assert response.status == 200
        assert await response.json() == a

        response = await env.client.delete(f"{PROFILES}/{a['id']}")
        assert response.status == 204
        message = await error_of(await env.client.get(f"{PROFILES}/{a['id']}"), 404)
        assert a["id"] in message and "does not exist" in message
        message = await error_of(await env.client.delete(f"{PROFILES}/{a['id']}"), 404)
        assert a["id"] in message
        assert [p.name for p in await env.store.list_connection_profiles()] == ["b-cluster"]


async def test_a_taken_name_is_409_and_keeps_the_first(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        first = await create_profile(env, "cluster", {"bootstrap_servers": "first:9092"})
        response = await env.client.post(
            PROFILES,
            json={"name": "cluster", "connector": "kafka", "config": SASL},
        )
        message = await error_of(response, 409)
        assert "'cluster' already exists" in message
        assert all(secret not in message for secret in SECRETS)
        response = await env.client.get(PROFILES)
        assert (await response.json())["data"] == [first]


async def test_secrets_are_stored_but_never_returned_nor_logged(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        with structlog.testing.capture_logs() as logs:
            created_response = await env.client.post(
                PROFILES, json={"name": "secure", "connector": "kafka", "config": SASL}
            )
            assert created_response.status == 201
            created = await created_response.json()
            by_name = await create_profile(
                env,
                "python-names",
                {"bootstrap_servers": "k:9092", "schema_registry_api_secret": REGISTRY_SECRET},
            )
            listed = await env.client.get(PROFILES)
            fetched = await env.client.get(f"{PROFILES}/{created['id']}")
            texts = [
                json.dumps(created),
                json.dumps(by_name),
                await listed.text(),
                await fetched.text(),
            ]
        for text in texts:
            assert all(secret not in text for secret in SECRETS), text
        assert all(secret not in repr(event) for event in logs for secret in SECRETS)

        assert created["config"] == {
            **SASL,
            "auth.password": "********",
            "schema_registry.api_secret": "********",
        }
        assert by_name["config"]["schema_registry_api_secret"] == "********"
        assert json.loads(await fetched.text()) == created

        stored = await env.store.get_connection_profile(ConnectionProfileId(created["id"]))
        assert stored is not None and stored.config == SASL


# validation

SASL_WITHOUT_PASSWORD = {k: v for k, v in SASL.items() if k != "auth.password"}


@pytest.mark.parametrize("path", [PROFILES, f"{PROFILES}/test"])
@pytest.mark.parametrize(
    ("connector", "config", "expected"),
    [
        (
            "kafka",
            {"bootstrap_servers": "k:9092", "bootstrap.server": "k:9092"},
            "body.config.bootstrap.server: unknown field",
        ),
        ("kafka", {"topic": "t"}, "body.config.topic: unknown field"),
        ("kafka", {}, "body.config.bootstrap_servers: required"),
        ("kafka", {"bootstrap_servers": ""}, "body.config.bootstrap_servers"),
        (
            "kafka",
            {"bootstrap_servers": "k:9092", "auth.type": "kerberos"},
            "body.config.auth.type: Input should be 'none' or 'sasl'",
        ),
        ("kafka", SASL_WITHOUT_PASSWORD, "needs auth.password"),
        ("kafka", {"bootstrap_servers": 9092}, "body.config.bootstrap_servers"),
        ("kafkaa", {"bootstrap_servers": "k:9092"}, "body.connector: unknown connector 'kafkaa'"),
        ("impulse", {}, "body.connector: connector 'impulse' takes no connection profiles"),
    ],
)
async def test_bad_settings_are_400_naming_the_option_and_store_nothing(
    tmp_path: Path, path: str, connector: str, config: dict[str, Any], expected: str
) -> None:
    async with running_api(tmp_path) as env:
        body = {"connector": connector, "config": config}
        if path == PROFILES:
            body["name"] = "p"
        response = await env.client.post(path, json=body)
        message = await error_of(response, 400)
        assert expected in message
        assert all(secret not in message for secret in SECRETS)
        assert await env.store.list_connection_profiles() == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"connector": "kafka", "config": {}}, "body.name: required"),
        ({"name": " ", "connector": "kafka", "config": {}}, "body.name: must not be blank"),
        ({"name": "p", "config": {}}, "body.connector: required"),
        ({"name": "p", "connector": "kafka", "config": {}, "x": 1}, "body.x: unknown field"),
    ],
)
async def test_a_bad_profile_body_is_400_naming_the_field(
    tmp_path: Path, body: dict[str, Any], expected: str
) -> None:
    async with running_api(tmp_path) as env:
        assert expected in await error_of(await env.client.post(PROFILES, json=body), 400)


# testing a connection


async def test_an_unreachable_cluster_is_ok_false_with_the_reason(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"

    async with running_api(tmp_path) as env:
        response = await env.client.post(
            f"{PROFILES}/test",
            json={"connector": "kafka", "config": {"bootstrap_servers": address}},
        )
        assert response.status == 200
        body = await response.json()
        assert body["ok"] is False
        assert f"Kafka at {address}" in body["message"]
        assert await env.store.list_connection_profiles() == []


@pytest.mark.kafka
async def test_a_reachable_cluster_is_ok_with_its_topics(
    tmp_path: Path, kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.post(
            f"{PROFILES}/test",
            json={
                "connector": "kafka",
                "config": {"bootstrap_servers": kafka_broker.bootstrap_servers},
            },
        )
        assert response.status == 200
        body = await response.json()
        assert body["ok"] is True, body
        assert "connected to 1 broker(s)" in body["message"]
        assert kafka_topic in body["message"]


@pytest.mark.kafka
async def test_sasl_credentials_are_tried_and_a_wrong_password_is_ok_false(
    tmp_path: Path, kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    username, password = next(iter(kafka_broker.users.items()))
    sasl = {
        "bootstrap_servers": kafka_broker.sasl_bootstrap_servers,
        "auth.type": "sasl",
        "auth.mechanism": "PLAIN",
        "auth.protocol": "SASL_PLAINTEXT",
        "auth.username": username,
    }

    async with running_api(tmp_path) as env:
        response = await env.client.post(
            f"{PROFILES}/test",
            json={"connector": "kafka", "config": {**sasl, "auth.password": password}},
        )
        body = await response.json()
        assert body["ok"] is True, body
        assert kafka_topic in body["message"]

        response = await env.client.post(
            f"{PROFILES}/test",
            json={"connector": "kafka", "config": {**sasl, "auth.password": PASSWORD}},
        )
        assert response.status == 200
        body = await response.json()
        assert body["ok"] is False, body
        assert kafka_broker.sasl_bootstrap_servers in body["message"]
        assert PASSWORD not in body["message"]


# compiling with profiles


@pytest.mark.spark
async def test_a_query_naming_a_profile_compiles_with_its_settings(
    tmp_path: Path, compiler: Compiler
) -> None:
    query = SOURCE_QUERY.format(profile="cluster")

    async with running_api(tmp_path, compiler=compiler) as env:
        await create_profile(env, "cluster", SASL)

        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": query})
        assert response.status == 200
        body = await response.json()
        assert body["errors"] == []
        tables = {t["name"]: t for t in body["tables"]}
        assert tables["events"]["connector"] == "kafka"
        assert all(secret not in json.dumps(body) for secret in SECRETS)

        response = await env.client.post("/api/v1/pipelines", json={"name": "p", "query": query})
        created = await response.json()
        assert response.status == 201, created
        assert all(secret not in json.dumps(created) for secret in SECRETS)
        # The stored program carries the profile's settings; its secret ones beside the
        # tables, which refer to them (a worker fetches them: arroyo.connectors.secrets).
        pipeline = await env.store.get_pipeline(PipelineId(created["id"]))
        assert pipeline is not None
        program = json.loads(pipeline.program_json)
        [source] = program["sources"]
        assert source["options"]["bootstrap_servers"] == SASL["bootstrap_servers"]
        assert source["options"]["auth_password"] == "${secret:events.auth_password}"
        assert program["secrets"]["events.auth_password"] == PASSWORD
        assert source["options"]["topic"] == "events"


@pytest.mark.spark
async def test_a_query_naming_a_missing_profile_is_refused_with_the_diagnostic(
    tmp_path: Path, compiler: Compiler
) -> None:
    query = SOURCE_QUERY.format(profile="nowhere")

    async with running_api(tmp_path, compiler=compiler) as env:
        profile = await create_profile(env, "cluster")

        response = await env.client.post("/api/v1/pipelines", json={"name": "p", "query": query})
        message = await error_of(response, 400)
        # First; the table that could not be made is then unknown to the INSERT.
        diagnostic = (await response.json())["diagnostics"][0]
        assert diagnostic["code"] == "unknown_connection_profile"
        # Which profiles there are is the help the message gives: the behaviour under test.
        assert "no connection profile named 'nowhere' (known: cluster)" in message
        assert (diagnostic["line"], diagnostic["column"]) == (3, 5)
        assert await env.store.list_pipelines(10) == []

        # A profile deleted is a profile no query can name any more.
        await env.client.delete(f"{PROFILES}/{profile['id']}")
        response = await env.client.post(
            "/api/v1/pipelines/validate_query",
            json={"query": SOURCE_QUERY.format(profile="cluster")},
        )
        assert response.status == 200
        error = (await response.json())["errors"][0]
        assert error["code"] == "unknown_connection_profile"
        assert "(known: none)" in error["message"]
