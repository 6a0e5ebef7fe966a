"""Saved connection tables (Arroyo's ``/api/v1/connection_tables``): a request's table checked
and made into what the store keeps, and a kept table made into the ``CREATE TABLE`` statement
the compiler plans wherever a query names it.

Arroyo's shapes are read as Arroyo's API writes them (``connectionProfileId``, a format as
``{"json": {...}}``, fields as its ``SourceField``s); the schema kept and returned is the
expanded one: every column as a field, whether given as fields or read from a JSON Schema or
an Avro schema. Everything a request gets wrong is a ``BadRequestError`` naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from arroyo.api import models as m
from arroyo.api.errors import BadRequestError
from arroyo.api.routing import describe
from arroyo.connectors import AnyConnector, connector
from arroyo.formats import FORMATS, FormatError, format_option_prefix, parse_format_options
from arroyo.sql.planner.event_time import EVENT_TIME_OPTIONS
from arroyo.sql.types import UnsupportedTypeError, parse_type
from arroyo.store.model import ConnectionProfile, ConnectionTable

# Options a table takes whatever its connector, which the statement sets from the schema.
_TABLE_OPTIONS = {"connector", "type", "format", "bad_data", "connection_profile"}
_FRAMING_OPTIONS = {"framing", "framing.newline.max_length"}
_SQL_TYPES = {
    "int32": "INT",
    "int64": "BIGINT",
    "uint32": "INT UNSIGNED",
    "uint64": "BIGINT UNSIGNED",
    "f32": "REAL",
    "f64": "DOUBLE",
    "bool": "BOOLEAN",
    "string": "TEXT",
    "bytes": "BYTEA",
    "timestamp": "TIMESTAMP",
    "json": "JSON",
}
_ALIASES = {"utf8": "string", "binary": "bytes"}
_UNITS = {"second", "millisecond", "microsecond", "nanosecond"}


@dataclass(frozen=True, slots=True)
class CheckedTable:
    """A requested table, checked: its type (source or sink), options and expanded schema as
    the store keeps them, and its options with its profile's as the connector's model."""

    connector: AnyConnector
    table_type: str
    config: dict[str, str]
    schema: dict[str, Any]
    options: Any


def checked_table(
    body: m.CreateConnectionTableRequest, profile: ConnectionProfile | None
) -> CheckedTable:
    """The table of a request; raises BadRequestError naming what is wrong."""
    conn = connector(body.connector)
    if conn is None or conn.internal:
        raise BadRequestError(f"body.connector: unknown connector '{body.connector}'")
    if profile is not None and profile.connector != conn.name:
        raise BadRequestError(
            f"body.connectionProfileId: profile '{profile.name}' is for connector "
            f"'{profile.connector}', not '{conn.name}'"
        )
    config = {k: _text(v) for k, v in body.config.items()}
    table_type = _table_type(conn, config)
    given = body.schema_ or m.ConnectionSchemaIn()
    fmt, format_options = _format(given.format, conn)
    options = _check_options(conn, config, fmt, profile)
    # A source's columns come from its schema, unless the connector has its own (generators).
    needs_columns = table_type == "source" and conn.columns(options) is None
    schema = expand_schema(given, fmt, format_options, needs_columns=needs_columns)
    return CheckedTable(conn, table_type, config, schema, options)


def _text(value: str | int | float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _table_type(conn: AnyConnector, config: dict[str, str]) -> str:
    roles = conn.roles & {"source", "sink"}
    kind = config.pop("type", None)
    if kind is None:
        if len(roles) != 1:
            raise BadRequestError(
                f"body.config.type: connector '{conn.name}' needs 'source' or 'sink'"
            )
        return next(iter(roles))
    if kind not in roles:
        known = " or ".join(f"'{r}'" for r in sorted(roles)) or "neither"
        raise BadRequestError(
            f"body.config.type: connector '{conn.name}' cannot be a {kind} (it can be {known})"
        )
    return kind


def _check_options(
    conn: AnyConnector, config: dict[str, str], fmt: str | None, profile: ConnectionProfile | None
) -> Any:
    """The connector's options model of the table's options with its profile's settings."""
    clash = sorted(config.keys() & (_TABLE_OPTIONS | _FRAMING_OPTIONS))
    if clash:
        raise BadRequestError(
            f"body.config.{clash[0]}: set by the request itself (connector, "
            "connectionProfileId, schema), not among the options"
        )
    prefix = format_option_prefix(fmt) if fmt else None
    merged = dict(profile.config if profile else {}) | config
    raw = {
        k: v
        for k, v in merged.items()
        if k not in EVENT_TIME_OPTIONS and not (prefix and k.startswith(prefix))
    }
    try:
        return conn.parse_options(raw)
    except ValidationError as err:
        raise BadRequestError(describe(err, "body.config")) from err


def expand_schema(
    schema: m.ConnectionSchemaIn,
    fmt: str | None,
    options: dict[str, str],
    *,
    needs_columns: bool,
) -> dict[str, Any]:
    """The schema as kept: its format, options, bad data and framing, and every column."""
    fields = [_field(f, f"body.schema.fields[{i}]") for i, f in enumerate(schema.fields)]
    definition = None
    if schema.definition is not None:
        kind = re.sub(r"(?<!^)(?=[A-Z])", "_", schema.definition.type).lower()
        definition = {"type": kind, "schema": schema.definition.schema_}
        if not fields:
            fields = definition_fields(kind, schema.definition.schema_)
    if not fields and needs_columns:
        raise BadRequestError("body.schema: a source table needs fields or a definition")
    names = {f["name"] for f in fields}
    for key in schema.primary_keys:
        if key not in names:
            raise BadRequestError(f"body.schema.primaryKeys: no field named '{key}'")
    framing, max_length = _framing(schema.framing)
    return {
        "format": fmt,
        "format_options": options,
        "bad_data": _bad_data(schema.bad_data),
        "framing": framing,
        "framing_max_line_length": max_length,
        "fields": fields,
        "definition": definition,
        "inferred": not fields,
        "primary_keys": list(schema.primary_keys),
    }


def _format(
    given: str | dict[str, dict[str, Any] | None] | None, conn: AnyConnector
) -> tuple[str | None, dict[str, str]]:
    if given is None:
        return conn.default_format, {}
    if isinstance(given, str):
        name, raw = given, {}
    elif len(given) == 1:
        name, options = next(iter(given.items()))
        raw = dict(options or {})
    else:
        raise BadRequestError('body.schema.format: one format, as "json" or {"json": {...}}')
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): v for k, v in raw.items()}
    if name == "json" and snake.pop("debezium", False):
        name = "debezium_json"
    if name not in FORMATS:
        raise BadRequestError(
            f"body.schema.format: unknown format '{name}' (known: {', '.join(FORMATS)})"
        )
    if name not in conn.formats:
        raise BadRequestError(
            f"body.schema.format: connector '{conn.name}' does not support format '{name}' "
            f"(supported: {', '.join(sorted(conn.formats)) or 'none'})"
        )
    known = FORMATS[name].model_fields
    # Arroyo's UI sends every field of its format, unset ones null or false.
    options = {
        k: _text(v) for k, v in snake.items() if v is not None and (k in known or v is not False)
    }
    try:
        parse_format_options(name, options)
    except FormatError as err:
        raise BadRequestError(f"body.schema.format: {err.message}") from err
    return name, options


def _bad_data(given: str | dict[str, Any] | None) -> str | None:
    name = next(iter(given), None) if isinstance(given, dict) else given
    if name not in (None, "fail", "drop"):
        raise BadRequestError(f"body.schema.badData: 'fail' or 'drop', not '{name}'")
    return name


def _framing(given: str | dict[str, Any] | None) -> tuple[str | None, int | None]:
    if given is None or given == "newline":
        return given, None
    method = given.get("method") if isinstance(given, dict) else None
    newline = method.get("newline") if isinstance(method, dict) else None
    if not isinstance(newline, dict):
        raise BadRequestError('body.schema.framing: "newline", or {"method": {"newline": {}}}')
    length = newline.get("maxLineLength", newline.get("max_line_length"))
    if length is not None and (
        not isinstance(length, int) or isinstance(length, bool) or length <= 0
    ):
        raise BadRequestError("body.schema.framing: maxLineLength must be a positive integer")
    return "newline", length


def _field(field: m.SchemaField, where: str) -> dict[str, Any]:
    kind = _ALIASES.get(field.type.lower(), field.type.lower())
    out: dict[str, Any] = {"name": field.name, "type": kind, "required": field.required}
    if kind == "timestamp":
        unit = (field.unit or "millisecond").lower()
        if unit not in _UNITS:
            raise BadRequestError(f"{where}.unit: one of {', '.join(sorted(_UNITS))}")
        out["unit"] = unit
    elif kind == "struct":
        if not field.fields:
            raise BadRequestError(f"{where}.fields: a struct needs its fields")
        out["fields"] = [_field(f, f"{where}.fields[{i}]") for i, f in enumerate(field.fields)]
    elif kind == "list":
        if field.items is None:
            raise BadRequestError(f"{where}.items: a list needs the field of its items")
        out["items"] = _field(field.items, f"{where}.items")
    elif kind not in _SQL_TYPES:
        known = ", ".join([*_SQL_TYPES, "struct", "list"])
        raise BadRequestError(f"{where}.type: unknown type '{field.type}' (known: {known})")
    if field.metadata_key:
        out["metadata_key"] = field.metadata_key
    out["sql_name"] = sql_type(out)
    try:
        parse_type(out["sql_name"])
    except UnsupportedTypeError as err:
        raise BadRequestError(f"{where}: {err}") from err
    return out


def sql_type(field: dict[str, Any]) -> str:
    kind = field["type"]
    if kind == "struct":
        inner = ", ".join(f"{_quoted(f['name'])} {sql_type(f)}" for f in field["fields"])
        return f"STRUCT <{inner}>"
    if kind == "list":
        return f"{sql_type(field['items'])}[]"
    return _SQL_TYPES[kind]


def definition_fields(kind: str, text: str) -> list[dict[str, Any]]:
    """The columns a JSON Schema or an Avro schema describes, as fields."""
    if kind not in ("json_schema", "avro_schema"):
        raise BadRequestError(
            f"body.schema.definition.type: '{kind}' cannot be read here (json_schema or "
            "avro_schema; for protobuf, give the fields and the format's descriptor_file)"
        )
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise BadRequestError(f"body.schema.definition.schema: not JSON: {err}") from err
    try:
        if kind == "json_schema":
            fields = _json_schema_fields(schema, "body.schema.definition")
        else:
            fields = _avro_fields(schema, "body.schema.definition")
        for field in fields:
            _name_types(field)
    except RecursionError:
        raise BadRequestError("body.schema.definition.schema: nested too deeply") from None
    return fields


def _name_types(field: dict[str, Any]) -> None:
    """Give a field read from a definition, and those inside it, their SQL names."""
    for inner in field.get("fields", []):
        _name_types(inner)
    if "items" in field:
        _name_types(field["items"])
    field["sql_name"] = sql_type(field)


def _json_schema_fields(schema: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise BadRequestError(f"{where}: a JSON Schema of an object with properties")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        raise BadRequestError(f"{where}.required: a list of property names")
    required = set(required)
    return [
        {"name": name, **_json_type(prop, f"{where}.{name}"), "required": name in required}
        for name, prop in schema["properties"].items()
    ]


def _json_type(prop: Any, where: str) -> dict[str, Any]:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, list):  # ["string", "null"]: nullable, as every field is unless required
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return {"type": "int64"}
    if kind == "number":
        return {"type": "f64"}
    if kind == "boolean":
        return {"type": "bool"}
    if kind == "string":
        if prop.get("format") == "date-time":
            return {"type": "timestamp", "unit": "microsecond"}
        return {"type": "string"}
    if kind == "array":
        return {
            "type": "list",
            "items": {"name": "item", **_json_type(prop.get("items"), where), "required": False},
        }
    if kind == "object" and isinstance(prop.get("properties"), dict) and prop["properties"]:
        return {"type": "struct", "fields": _json_schema_fields(prop, where)}
    if kind == "object" or kind is None:
        return {"type": "json"}
    raise BadRequestError(f"{where}: JSON Schema type '{kind}' has no column type")


def _avro_fields(schema: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise BadRequestError(f"{where}: an Avro schema of a record")
    fields = []
    for field in schema.get("fields", []):
        name = field.get("name") if isinstance(field, dict) else None
        if not isinstance(name, str) or not name:
            raise BadRequestError(f"{where}: an Avro field without a name")
        kind, nullable = field.get("type"), False
        if isinstance(kind, list):  # a union with null: nullable
            nullable = "null" in kind
            kind = next((k for k in kind if k != "null"), "null")
        fields.append(
            {"name": name, **_avro_type(kind, f"{where}.{name}"), "required": not nullable}
        )
    if not fields:
        raise BadRequestError(f"{where}: an Avro record without fields")
    return fields


def _avro_type(kind: Any, where: str) -> dict[str, Any]:
    if isinstance(kind, list):  # a union (an array's items, say): its one type besides null
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise BadRequestError(
                f"{where}: an Avro union of {json.dumps(kind)} has no column type"
            )
        kind = others[0]
    if isinstance(kind, dict) and isinstance(kind.get("type"), list | dict):
        kind = kind["type"]  # {"type": [...]} or {"type": {...}}: the type it wraps
        return _avro_type(kind, where)
    logical = kind.get("logicalType") if isinstance(kind, dict) else None
    if logical in ("timestamp-millis", "timestamp-micros"):
        return {"type": "timestamp", "unit": logical.removeprefix("timestamp-") + "second"}
    name = kind.get("type") if isinstance(kind, dict) else kind
    simple = {
        "int": "int32",
        "long": "int64",
        "float": "f32",
        "double": "f64",
        "boolean": "bool",
        "string": "string",
        "bytes": "bytes",
        "enum": "string",
        "fixed": "bytes",
        "map": "json",
    }
    if name in simple:
        return {"type": simple[name]}
    if name == "array" and isinstance(kind, dict) and "items" in kind:
        items = _avro_type(kind["items"], where)
        return {"type": "list", "items": {"name": "item", **items, "required": True}}
    if name == "record" and isinstance(kind, dict):
        return {"type": "struct", "fields": _avro_fields(kind, where)}
    raise BadRequestError(f"{where}: Avro type {json.dumps(name)} has no column type")


def statement(table: ConnectionTable, profile_name: str | None) -> str:
    """The ``CREATE TABLE`` statement that declares ``table``, naming its profile (by
    ``profile_name``, its name now) with ``connection_profile``."""
    schema = table.schema
    columns = [
        f"{_quoted(f['name'])} {f['sql_name']}"
        + (" NOT NULL" if f.get("required") else "")
        + (f" METADATA FROM {_literal(f['metadata_key'])}" if f.get("metadata_key") else "")
        for f in schema["fields"]
    ]
    if schema["primary_keys"]:
        columns.append(f"PRIMARY KEY ({', '.join(_quoted(k) for k in schema['primary_keys'])})")
    options = {"connector": table.connector, "type": table.table_type}
    if profile_name is not None:
        options["connection_profile"] = profile_name
    if schema["format"]:
        options["format"] = schema["format"]
        prefix = format_option_prefix(schema["format"])
        options |= {prefix + k: v for k, v in schema["format_options"].items()}
    if schema["bad_data"]:
        options["bad_data"] = schema["bad_data"]
    if schema["framing"]:
        options["framing"] = schema["framing"]
    if schema["framing_max_line_length"]:
        options["framing.newline.max_length"] = str(schema["framing_max_line_length"])
    options |= table.config
    body = f" ({', '.join(columns)})" if columns else ""
    with_ = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in options.items())
    return f"CREATE TABLE {_quoted(table.name)}{body} WITH ({with_})"


def _quoted(name: str) -> str:
    # Always: a name may be a keyword (``timestamp``, ``order``).
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def schema_out(schema: dict[str, Any]) -> m.ConnectionSchemaOut:
    return m.ConnectionSchemaOut.model_validate(schema)
