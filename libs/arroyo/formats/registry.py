"""Confluent's schema registry wire format, and the table's schemas in Avro and JSON Schema.

A record framed for the registry is ``0x00``, the schema's id as a 4-byte big-endian integer,
then the payload. Sinks register the table's schema under the subject ``<topic>-value`` (the
registry returns the same id for a schema it already has); sources look up the writer schemas of
that subject when the query starts, and decode each record with the one its id names.

The registry's settings come with the connection (``schema_registry.endpoint``, ``.api_key``,
``.api_secret`` in a Kafka table's options or its connection profile); the client is
confluent-kafka's own.
"""

from __future__ import annotations

import json
import re
import struct
from typing import TYPE_CHECKING, Any

from arroyo.formats import FormatError
from arroyo.program.spec import ColumnSpec, TableSpec

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

MAGIC = 0
HEADER_BYTES = 5
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def header(schema_id: int) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id)


def subject(table: TableSpec) -> str:
    return f"{table.options['topic']}-value"


def client(table: TableSpec) -> SchemaRegistryClient:
    """The registry client for a table's connection; FormatError when none is configured."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    url = table.options.get("schema_registry_endpoint")
    if not url:
        raise FormatError(
            f"'{table.name}' uses a schema registry format option but has no "
            f"schema_registry.endpoint"
        )
    conf: dict[str, Any] = {"url": url}
    key, secret = (
        table.options.get("schema_registry_api_key"),
        table.options.get("schema_registry_api_secret"),
    )
    if key:
        conf["basic.auth.user.info"] = f"{key}:{secret or ''}"
    return SchemaRegistryClient(conf)


def register(table: TableSpec, schema_text: str, schema_type: str) -> int:
    """Register the table's schema under its subject; the id records are framed with."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        schema_id = client(table).register_schema(subject(table), Schema(schema_text, schema_type))
    except SchemaRegistryError as err:
        raise FormatError(
            f"schema registry refused the schema of '{table.name}' "
            f"(subject {subject(table)}): {err.error_message}"
        ) from err
    assert schema_id is not None
    return int(schema_id)


def writer_schemas(table: TableSpec) -> dict[int, str]:
    """Every version of the table's subject: schema id -> schema text (empty when the subject
    does not exist yet)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    registry = client(table)
    try:
        versions = registry.get_versions(subject(table))
    except SchemaRegistryError as err:
        if err.http_status_code == 404:
            return {}
        raise FormatError(
            f"schema registry lookup for '{table.name}' failed: {err.error_message}"
        ) from err
    schemas = {}
    for version in versions:
        registered = registry.get_version(subject(table), version)
        if registered.schema_id is not None and registered.schema is not None:
            schemas[int(registered.schema_id)] = str(registered.schema.schema_str)
    return schemas


# -- the table's schema in Avro and JSON Schema ------------------------------------------------


def avro_schema(columns: list[ColumnSpec], name: str = "ArroyoAvroRoot") -> dict[str, Any]:
    """An Avro record for the columns; nullable columns are ``["null", T]`` unions."""
    return {
        "type": "record",
        "name": name,
        "fields": [_avro_field(c.name, c.spark_type, c.nullable) for c in columns],
    }


def _avro_field(name: str, spark_type: str, nullable: bool) -> dict[str, Any]:
    avro = _avro_type(spark_type, f"{name}_record")
    if nullable:
        return {"name": name, "type": ["null", avro], "default": None}
    return {"name": name, "type": avro}


def _avro_type(spark_type: str, record_name: str) -> Any:
    upper = spark_type.strip().upper()
    simple = {
        "BOOLEAN": "boolean",
        "TINYINT": "int",
        "SMALLINT": "int",
        "INT": "int",
        "BIGINT": "long",
        "FLOAT": "float",
        "DOUBLE": "double",
        "STRING": "string",
        "BINARY": "bytes",
    }
    if upper in simple:
        return simple[upper]
    if upper == "TIMESTAMP":
        return {"type": "long", "logicalType": "timestamp-micros"}
    if upper == "DATE":
        return {"type": "int", "logicalType": "date"}
    decimal = _DECIMAL.fullmatch(upper)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if upper.startswith("ARRAY<") and upper.endswith(">"):
        return {"type": "array", "items": _avro_type(spark_type.strip()[6:-1], record_name)}
    if upper.startswith("STRUCT<"):
        from pyspark.sql.types import StructType

        wrapper = StructType.fromDDL(f"`x` {spark_type}")
        assert isinstance(wrapper, StructType)
        struct_type = wrapper.fields[0].dataType
        assert isinstance(struct_type, StructType)
        fields = [
            _avro_field(f.name, f.dataType.simpleString(), f.nullable) for f in struct_type.fields
        ]
        return {"type": "record", "name": record_name, "fields": fields}
    raise FormatError(f"type {spark_type} cannot be written as Avro")


def json_schema(columns: list[ColumnSpec]) -> dict[str, Any]:
    """A JSON Schema object for the columns, as the json sink writes them."""
    return {
        "type": "object",
        "title": "ArroyoJson",
        "properties": {c.name: _json_type(c.spark_type, c.nullable) for c in columns},
        "required": [c.name for c in columns if not c.nullable],
    }


def _json_type(spark_type: str, nullable: bool) -> dict[str, Any]:
    upper = spark_type.strip().upper()
    if upper in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        kind: Any = "integer"
    elif upper in ("FLOAT", "DOUBLE") or upper.startswith("DECIMAL"):
        kind = "number"
    elif upper == "BOOLEAN":
        kind = "boolean"
    elif upper.startswith("ARRAY<"):
        kind = "array"
    elif upper.startswith("STRUCT<"):
        kind = "object"
    else:
        kind = "string"
    schema: dict[str, Any] = {"type": [kind, "null"] if nullable else kind}
    if upper == "TIMESTAMP":
        schema["format"] = "date-time"
    return schema


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))
