"""Protobuf records, through JSON.

Spark's own protobuf functions live in the spark-protobuf jar, which Maven Central does not
carry for this Spark version; so each message is turned into its JSON form (field names as in
the .proto) by the protobuf runtime in a vectorised Arrow UDF, and the JSON format does the rest
(types, nullability, ``bad_data``). Writing runs the same way backwards. The message type comes
from a FileDescriptorSet (``protoc --include_imports --descriptor_set_out=FILE``) named by
``protobuf.descriptor_file``, and ``protobuf.message_name`` (fully qualified).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arroyo.formats import FormatError, ProtobufOptions, parse_format_options
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column


@functools.cache
def message_class(descriptor_file: str, message_name: str) -> Any:
    """The generated class of ``message_name`` in a descriptor set (cached per process)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    try:
        data = Path(descriptor_file).read_bytes()
    except OSError as err:
        raise FormatError(
            f"cannot read protobuf descriptor set '{descriptor_file}': {err}"
        ) from err
    files = descriptor_pb2.FileDescriptorSet.FromString(data)
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    try:
        descriptor = pool.FindMessageTypeByName(message_name)
    except KeyError as err:
        raise FormatError(
            f"message '{message_name}' is not in descriptor set '{descriptor_file}'"
        ) from err
    return message_factory.GetMessageClass(descriptor)


def _options(table: TableSpec) -> ProtobufOptions:
    assert table.format is not None
    opts = parse_format_options("protobuf", table.format.options)
    assert isinstance(opts, ProtobufOptions)
    message_class(opts.descriptor_file, opts.message_name)  # fail early, on the driver
    return opts


def protobuf_to_json(table: TableSpec) -> Callable[[Column], Column]:
    """A UDF: serialized message (BINARY) -> its JSON (STRING); NULL when it does not parse."""
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    opts = _options(table)
    descriptor_file, message_name = opts.descriptor_file, opts.message_name

    def to_json(values: Any) -> Any:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        cls = message_class(descriptor_file, message_name)

        def one(value: bytes | None) -> str | None:
            if value is None:
                return None
            try:
                message = cls.FromString(bytes(value))
            except DecodeError:
                return None
            # Fields at their proto3 defaults are written (they are values, not NULLs), and
            # 64-bit integers as JSON numbers (Spark reads a quoted number as bad data).
            return str(
                json_format.MessageToJson(
                    message,
                    preserving_proto_field_name=True,
                    indent=None,
                    always_print_fields_with_no_presence=True,
                    unquote_int64_if_possible=True,
                )
            )

        return values.map(one)

    return pandas_udf(to_json, "string", PythonEvalType.SQL_SCALAR_PANDAS_UDF)


def json_to_protobuf(table: TableSpec) -> Callable[[Column], Column]:
    """A UDF: a row's JSON (STRING) -> the serialized message (BINARY)."""
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    opts = _options(table)
    descriptor_file, message_name = opts.descriptor_file, opts.message_name

    def to_message(values: Any) -> Any:
        from google.protobuf import json_format

        cls = message_class(descriptor_file, message_name)

        def one(value: str | None) -> bytes | None:
            if value is None:
                return None
            message = json_format.Parse(value, cls(), ignore_unknown_fields=True)
            return bytes(message.SerializeToString())

        return values.map(one)

    return pandas_udf(to_message, "binary", PythonEvalType.SQL_SCALAR_PANDAS_UDF)
