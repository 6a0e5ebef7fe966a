"""Formats: how a table's rows travel as bytes, decoded and encoded by Spark expressions.

Nothing here touches a row in Python: decoding is ``from_json`` / casts, encoding is ``to_json``.
Options come from the table's ``WITH`` clause under the format's prefix (``json.*``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from arroyo.errors import ArroyoError, ErrorDomain


class FormatError(ArroyoError):
    code = "format_error"
    domain = ErrorDomain.USER


class FormatOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JsonOptions(FormatOptions):
    timestamp_format: Literal["rfc3339", "unix_millis"] = "rfc3339"
    unstructured: bool = False


class NoFormatOptions(FormatOptions):
    pass


# Every format Arroyo tables may name, with the options model under its prefix.
FORMATS: dict[str, type[FormatOptions]] = {
    "json": JsonOptions,
    "debezium_json": JsonOptions,
    "raw_string": NoFormatOptions,
    "raw_bytes": NoFormatOptions,
    "parquet": NoFormatOptions,
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
