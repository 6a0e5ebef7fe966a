"""Formats: how a table's rows travel as bytes, decoded and encoded by Spark expressions.

Decoding is ``from_json`` / casts, encoding is ``to_json``: no row passes through Python, but
for ``arrow_json``, with which a source that reads its messages in Python decodes plain JSON
into simple columns where it reads them (Arrow's reader, a slice of records a call).
Options come from the table's ``WITH`` clause under the format's prefix (``json.*``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.sql.sizes import data_size_bytes


class FormatError(ArroyoError):
    code = "format_error"
    domain = ErrorDomain.USER


class FormatOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JsonOptions(FormatOptions):
    timestamp_format: Literal["rfc3339", "unix_millis"] = "rfc3339"
    unstructured: bool = False
    # Records framed for Confluent's schema registry (a 5-byte header); sinks register the
    # table's JSON Schema. Needs the connection's schema_registry.endpoint.
    confluent_schema_registry: bool = False
    # Kafka Connect's envelope: {"schema": {...}, "payload": {...}}.
    include_schema: bool = False
    # Files only (the filesystem sink writes gzip-compressed JSON lines, ``.json.gz``).
    compression: Literal["uncompressed", "gzip"] = "uncompressed"
    # How DECIMAL columns are written: a JSON number (may lose precision in readers that read
    # numbers as doubles), a string of the exact value, or Arroyo's bytes: the unscaled value
    # as 16 big-endian two's-complement bytes, base64 (Debezium's "precise" decimals).
    decimal_encoding: Literal["number", "string", "bytes"] = "number"


class AvroOptions(FormatOptions):
    # Records framed for Confluent's schema registry: sinks register the table's Avro schema,
    # sources decode each record with the writer schema its id names.
    confluent_schema_registry: bool = False
    # Bare Avro datums with no registry header (with or without a registry).
    raw_datums: bool = False


class DebeziumJsonOptions(JsonOptions):
    # Arroyo writes a change record's timestamps as milliseconds since the epoch by default,
    # and its decimals as bytes.
    timestamp_format: Literal["rfc3339", "unix_millis"] = "unix_millis"
    decimal_encoding: Literal["number", "string", "bytes"] = "bytes"


class ProtobufOptions(FormatOptions):
    # A FileDescriptorSet (protoc --descriptor_set_out) and the message type in it.
    descriptor_file: str
    message_name: str


class NoFormatOptions(FormatOptions):
    pass


# Arroyo's limit on a Parquet row group.
MAX_ROW_GROUP_BYTES = 1024**3


class ParquetOptions(FormatOptions):
    """Parquet files (the filesystem sink): compression as Arroyo's default (zstd), and the
    row group size as a data size ('128MB', at most 1 GB), Spark's ``parquet.block.size``."""

    compression: Literal["uncompressed", "snappy", "gzip", "zstd", "lz4", "lz4_raw"] = "zstd"
    row_group_size: int | None = None

    @field_validator("row_group_size", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        size = data_size_bytes(value)
        if not 0 < size <= MAX_ROW_GROUP_BYTES:
            raise ValueError(
                f"row_group_size must be between 1 and {MAX_ROW_GROUP_BYTES} bytes, got {size}"
            )
        return size


# Every format Arroyo tables may name, with the options model under its prefix.
FORMATS: dict[str, type[FormatOptions]] = {
    "json": JsonOptions,
    "debezium_json": DebeziumJsonOptions,
    "raw_string": NoFormatOptions,
    "raw_bytes": NoFormatOptions,
    "parquet": ParquetOptions,
    "avro": AvroOptions,
    "protobuf": ProtobufOptions,
}


def format_option_prefix(name: str) -> str:
    return "json." if name in ("json", "debezium_json") else f"{name}."


def parse_format_options(name: str, raw: dict[str, str]) -> FormatOptions:
    """Validate ``raw`` (keys without the prefix) against the format's model."""
    try:
        return FORMATS[name].model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise FormatError(f"format '{name}' option '{key}': {first['msg']}") from err
