"""The filesystem connector's options, named as Arroyo names them (its filesystem ``config.rs``):
``path`` (local or an object store's, arroyo.connectors.storage) and ``storage.*`` for both;
``source.*`` for sources; ``rolling_policy.*``, ``filename.*``, ``partitioning.*`` and
``shuffle_by_partition.enabled`` for sinks."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import AliasChoices, Field, ValidationInfo, field_validator, model_validator

from arroyo.connectors.base import ConnectorOptions
from arroyo.connectors.filesystem.partitions import java_time_pattern
from arroyo.connectors.storage import Location, StorageError, parse_location
from arroyo.sql.sizes import data_size_bytes
from arroyo.sql.time import DurationError, option_duration_us


def _seconds(text: str) -> int:
    try:
        us = option_duration_us(text)
    except DurationError as err:
        raise ValueError(str(err)) from err
    if us < 1_000_000:
        raise ValueError("must be at least 1 second")
    return us // 1_000_000


def split_fields(text: str) -> list[str]:
    """``'a,b'``, ``[a, b]`` or ``['a', 'b']`` -> the column names (or transforms of them,
    ``bucket(a, 4)``, kept whole)."""
    inner = text.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    names, depth, current = [], 0, ""
    for ch in inner + ",":
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            names.append(current.strip().strip("'\"`"))
            current = ""
        else:
            current += ch
    if depth != 0 or current:
        raise ValueError(f"unbalanced parentheses in '{text}'")
    if not all(names):
        raise ValueError(f"expected column names, found '{text}'")
    return names


if TYPE_CHECKING:
    from arroyo.connectors.runtime.file_tables import FileSelection

# Options a source table takes and a sink table does not, and the other way round.
SOURCE_OPTIONS = ("source.regex_pattern", "source.compression")
SINK_OPTIONS = (
    "rolling_policy.file_size",
    "rolling_policy.interval",
    "rolling_policy.inactivity_interval",
    "filename.prefix",
    "filename.suffix",
    "filename.strategy",
    "partitioning.time_pattern",
    "partitioning.fields",
    "shuffle_by_partition.enabled",
)


class FilesystemOptions(ConnectorOptions):
    path: str = Field(
        description="the directory: a local path, s3://bucket/key (or s3a://, or "
        "s3::http://host:port/bucket/key for an S3-compatible server), gs://bucket/key or "
        "abfs://container@account/key"
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="how to reach an object store, as storage.<key> options: aws_endpoint, "
        "aws_region, aws_access_key_id, aws_secret_access_key, aws_session_token, "
        "aws_allow_http, aws_virtual_hosted_style_request; Hadoop keys starting with 'fs.' "
        "as they are (gs://, abfs://)",
        json_schema_extra={"secret": True},
    )
    regex_pattern: str | None = Field(
        None,
        alias="source.regex_pattern",
        validation_alias=AliasChoices("source.regex_pattern", "source.regex-pattern"),
        description="read only the files under path (at any depth) whose path relative to it "
        "matches this regular expression (source.regex-pattern is its older name)",
    )
    compression: Literal["none", "gzip", "zstd"] = Field(
        "none",
        alias="source.compression",
        validation_alias=AliasChoices("source.compression", "compression_format"),
        description="compression of the source's JSON or text files "
        "(compression_format is its older name)",
    )
    file_size: int | None = Field(
        None,
        alias="rolling_policy.file_size",
        description="start a new file once one holds this much data ('128MB')",
    )
    interval_s: int | None = Field(
        None,
        alias="rolling_policy.interval",
        description="longest time a file stays open; files close at every checkpoint sooner",
    )
    inactivity_s: int | None = Field(
        None,
        alias="rolling_policy.inactivity_interval",
        description="close a file this long without rows; files close at every checkpoint",
    )
    prefix: str | None = Field(None, alias="filename.prefix", description="file name prefix")
    suffix: str | None = Field(
        None, alias="filename.suffix", description="file name suffix, in place of the format's"
    )
    strategy: Literal["serial", "uuid"] | None = Field(
        None,
        alias="filename.strategy",
        description="'serial' (batch and file numbers) or 'uuid' names",
    )
    time_pattern: str | None = Field(
        None,
        alias="partitioning.time_pattern",
        description="directories by event time, strftime-style ('%Y/%m/%d/%H')",
    )
    fields: list[str] | None = Field(
        None,
        alias="partitioning.fields",
        description="directories field=value by these columns, after the time's",
    )
    shuffle_by_partition: bool = Field(
        False,
        alias="shuffle_by_partition.enabled",
        description="gather each partition's rows in one task before writing (fewer files)",
    )

    @model_validator(mode="before")
    @classmethod
    def _storage(cls, data: object) -> object:
        """``storage.<key>`` options, as Arroyo writes them in SQL, into ``storage_options``."""
        if not isinstance(data, dict):
            return data
        given = {k: v for k, v in data.items() if isinstance(k, str) and k.startswith("storage.")}
        if not given:
            return data
        rest = {k: v for k, v in data.items() if k not in given}
        merged = dict(rest.get("storage_options") or {})
        merged.update({k.removeprefix("storage."): str(v) for k, v in given.items()})
        return {**rest, "storage_options": merged}

    @model_validator(mode="after")
    def _location(self) -> FilesystemOptions:
        try:
            parse_location(self.path, self.storage_options)
        except StorageError as err:
            raise ValueError(str(err)) from err
        return self

    @field_validator("regex_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"could not parse regex_pattern '{value}': {err}") from err
        return value

    @field_validator("file_size", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if isinstance(value, str):
            size = data_size_bytes(value)
            if size <= 0:
                raise ValueError("must be greater than 0")
            return size
        return value

    @field_validator("interval_s", "inactivity_s", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return _seconds(value) if isinstance(value, str) else value

    @field_validator("time_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.strip():
                raise ValueError("an empty pattern lays out nothing: leave the option out")
            java_time_pattern(value)  # refuses what it cannot translate
        return value

    @field_validator("prefix", "suffix")
    @classmethod
    def _name_part(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and "/" in value:
            raise ValueError("a file name cannot hold '/'")
        if info.field_name == "prefix" and value is not None and value.startswith(("_", ".")):
            raise ValueError("names starting with '_' or '.' are hidden from readers")
        return value

    @field_validator("fields", mode="before")
    @classmethod
    def _fields(cls, value: object) -> object:
        fields = split_fields(value) if isinstance(value, str) else value
        if isinstance(fields, list) and any("(" in str(f) for f in fields):
            transform = next(f for f in fields if "(" in str(f))
            raise ValueError(
                f"a directory of files is partitioned by column names, not {transform} "
                "(transforms partition an iceberg table)"
            )
        return fields

    @property
    def selection(self) -> FileSelection:
        """What a source reads of ``path``, as the file readers take it."""
        from arroyo.connectors.runtime.file_tables import FileSelection

        return FileSelection(self.regex_pattern, self.compression)

    @property
    def location(self) -> Location:
        return parse_location(self.path, self.storage_options)

    @property
    def partitioned(self) -> bool:
        return bool(self.time_pattern or self.fields)
