"""The test schema registry (``arroyo.testing.schema_registry``: Apicurio Registry through its
Confluent-compatible API) as Confluent's own client sees it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from arroyo.testing.schema_registry import SchemaRegistry

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "arroyo.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    with SchemaRegistry.start(tmp_path_factory.mktemp("schema-registry")) as running:
        yield running


def _client(registry: SchemaRegistry) -> SchemaRegistryClient:
    # A fresh client each time: the client caches ids and schemas, the tests must reach the
    # server.
    return SchemaRegistryClient(registry.client_config())


def test_avro_schema_registers_and_reads_back(registry: SchemaRegistry) -> None:
    schema = Schema(json.dumps(ORDER), "AVRO")
    schema_id = _client(registry).register_schema("orders-value", schema)
    assert isinstance(schema_id, int)

    fetched = _client(registry).get_schema(schema_id)
    assert fetched.schema_type == "AVRO"
    assert json.loads(fetched.schema_str) == ORDER

    # The same schema again, in the same subject or another, with other whitespace: same id.
    assert _client(registry).register_schema("orders-value", schema) == schema_id
    compact = Schema(json.dumps(ORDER, separators=(",", ":")), "AVRO")
    assert _client(registry).register_schema("orders-value", compact) == schema_id
    assert _client(registry).register_schema("orders-copy-value", schema) == schema_id

    latest = _client(registry).get_latest_version("orders-value")
    assert (latest.subject, latest.version, latest.schema_id) == ("orders-value", 1, schema_id)
    assert {"orders-value", "orders-copy-value"} <= set(_client(registry).get_subjects())


def test_json_schema_keeps_its_type(registry: SchemaRegistry) -> None:
    body = {"type": "object", "properties": {"id": {"type": "integer"}}}
    schema_id = _client(registry).register_schema("json-value", Schema(json.dumps(body), "JSON"))
    fetched = _client(registry).get_schema(schema_id)
    assert fetched.schema_type == "JSON"
    assert json.loads(fetched.schema_str) == body


def test_unknown_id_and_subject_are_confluent_404s(registry: SchemaRegistry) -> None:
    with pytest.raises(SchemaRegistryError) as unknown_id:
        _client(registry).get_schema(987_654)
    assert unknown_id.value.http_status_code == 404
    assert unknown_id.value.error_code == 40403  # Confluent's "schema not found"

    with pytest.raises(SchemaRegistryError) as unknown_subject:
        _client(registry).get_latest_version("no-such-subject")
    assert unknown_subject.value.http_status_code == 404
    assert unknown_subject.value.error_code == 40401  # Confluent's "subject not found"


def test_backward_compatibility_by_default(registry: SchemaRegistry) -> None:
    client = _client(registry)
    assert client.get_compatibility() == "BACKWARD"
    first = {"type": "record", "name": "Evolving", "fields": [{"name": "a", "type": "long"}]}
    client.register_schema("evolving-value", Schema(json.dumps(first), "AVRO"))
    # A new field with a default reads old data: compatible, version 2.
    defaulted = {**first, "fields": [*first["fields"], {"name": "b", "type": "int", "default": 0}]}
    client.register_schema("evolving-value", Schema(json.dumps(defaulted), "AVRO"))
    assert client.get_versions("evolving-value") == [1, 2]
    # A new field without one cannot: rejected with HTTP 409.
    required = {**first, "fields": [*first["fields"], {"name": "c", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as rejected:
        client.register_schema("evolving-value", Schema(json.dumps(required), "AVRO"))
    assert rejected.value.http_status_code == 409


def test_basic_auth_and_restart_keep_schemas(tmp_path: Path) -> None:
    data_dir = tmp_path / "registry"
    schema = Schema(json.dumps(ORDER), "AVRO")
    with SchemaRegistry.start(data_dir, basic_auth=("alice", "alice-secret")) as secured:
        with pytest.raises(SchemaRegistryError) as anonymous:
            SchemaRegistryClient({"url": secured.url}).get_subjects()
        assert anonymous.value.http_status_code == 401
        wrong = {"url": secured.url, "basic.auth.user.info": "alice:wrong"}
        with pytest.raises(SchemaRegistryError) as refused:
            SchemaRegistryClient(wrong).get_subjects()
        assert refused.value.http_status_code == 401
        schema_id = _client(secured).register_schema("orders-value", schema)

    # Its data lives in data_dir: a new server there still knows the schema and its id.
    with SchemaRegistry.start(data_dir) as restarted:
        assert json.loads(_client(restarted).get_schema(schema_id).schema_str) == ORDER
        assert _client(restarted).register_schema("orders-value", schema) == schema_id


@pytest.mark.kafka
def test_kafka_storage(tmp_path: Path) -> None:
    # Apicurio's kafkasql storage: its journal is a topic on the broker (as Confluent's registry
    # keeps its schemas in _schemas), so a new server reading the same topic has the schemas.
    from arroyo.testing.kafka import KafkaBroker

    schema = Schema(json.dumps(ORDER), "AVRO")
    with KafkaBroker.start(tmp_path / "kafka") as broker:
        bootstrap = broker.bootstrap_servers
        with SchemaRegistry.start(tmp_path / "registry", kafka_bootstrap=bootstrap) as first:
            schema_id = _client(first).register_schema("orders-value", schema)
            assert _client(first).get_compatibility() == "BACKWARD"
        with SchemaRegistry.start(tmp_path / "registry", kafka_bootstrap=bootstrap) as second:
            assert json.loads(_client(second).get_schema(schema_id).schema_str) == ORDER
            assert _client(second).get_subjects() == ["orders-value"]
