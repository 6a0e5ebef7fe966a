"""Spark expressions that decode and encode rows in each format (needs pyspark)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from arroyo.formats import AvroOptions, JsonOptions, arrow_json, parse_format_options, registry
from arroyo.program.names import SIGN, quote_name
from arroyo.program.spec import ColumnSpec, TableSpec

CORRUPT = "_corrupt_record"

# Naive RFC 3339 as Arroyo writes it (chrono's AutoSi): no fraction for whole seconds, else
# milliseconds (``.800``) where they hold it all, else microseconds.
_TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"
_WHOLE_SECOND = r'("\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\.000000"'
_WHOLE_MILLISECOND = r'("\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})000"'


def _json_options(table: TableSpec) -> JsonOptions:
    assert table.format is not None
    opts = parse_format_options(table.format.name, table.format.options)
    assert isinstance(opts, JsonOptions)
    return opts


def physical_columns(table: TableSpec) -> list[ColumnSpec]:
    return [c for c in table.columns if c.physical]


def decode(
    df: DataFrame, table: TableSpec, *, signed: bool = False, planning: bool = False
) -> DataFrame:
    """Turn the connector's ``value`` into the table's physical columns, applying ``bad_data``.

    Keeps ``_source_time``, ``_eoi`` and any ``_meta_*`` columns. The end-of-input marker row is
    never bad data. ``signed``: a changelog's changes as signed rows (see ``_decode_signed``).
    ``planning``: the query is only planned, so no schema registry is asked for writer schemas.
    """
    assert table.format is not None
    fmt = table.format.name
    physical = physical_columns(table)
    if table.format.framing == "newline":
        df = _lines(df, table.format.framing_max_length)
    fast = arrow_json.carried(df.columns)  # decoded where the source read them
    passthrough = [c for c in df.columns if c.startswith("_") and c != "value" and c not in fast]
    if fmt in ("raw_string", "raw_bytes"):
        target = "STRING" if fmt == "raw_string" else "BINARY"
        return df.select(F.col("value").cast(target).alias(physical[0].name), *passthrough)
    if fmt == "avro":
        return _decode_avro(df, table, physical, passthrough, planning)
    if fmt == "protobuf":
        from arroyo.formats.protobuf import protobuf_to_json

        # Each message becomes its JSON form, read as plain JSON from here on.
        df = df.withColumn("value", protobuf_to_json(table)(F.col("value")))
        opts = JsonOptions()
    elif fmt == "debezium_json":
        if signed:
            return _decode_signed(df, table, physical, passthrough)
        return _decode_debezium(df, table, physical, passthrough)
    elif fmt == "json":
        opts = _json_options(table)
    else:
        return df
    if opts.unstructured:
        return df.select(F.col("value").cast("STRING").alias(physical[0].name), *passthrough)
    millis = opts.timestamp_format == "unix_millis"
    fields = []
    for col in physical:
        read_type = "BIGINT" if millis and col.spark_type == "TIMESTAMP" else col.spark_type
        fields.append(f"`{col.name}` {read_type}")
    fields.append(f"`{CORRUPT}` STRING")
    text = F.col("value")
    if opts.confluent_schema_registry:
        text = F.expr(f"substring(value, {registry.HEADER_BYTES + 1})")
    text = text.cast("STRING")
    row_schema = ", ".join(fields)
    if opts.include_schema:
        text = F.get_json_object(text, "$.payload")
    parsed = F.from_json(
        text, row_schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    )
    if fast:
        parsed = F.when(F.col(arrow_json.DECODED), _decoded_row(physical)).otherwise(parsed)
    out = df.select(parsed.alias("_parsed"), F.col("value").alias("_raw"), *passthrough)
    selected: list[Column] = []
    for col in physical:
        field = F.col(f"_parsed.`{col.name}`")
        if millis and col.spark_type == "TIMESTAMP":
            field = F.timestamp_millis(field)
        selected.append(field.alias(col.name))
    bad = F.col(f"_parsed.`{CORRUPT}`").isNotNull() | F.col("_parsed").isNull()
    for col in physical:
        if not col.nullable:
            bad = bad | F.col(f"_parsed.`{col.name}`").isNull()
    bad = bad & ~F.col("_eoi")
    out = out.select(*selected, bad.alias("_bad"), "_raw", *passthrough)
    return apply_bad_data(out, table)


def _decoded_row(physical: list[ColumnSpec]) -> Column:
    """The row a source decoded (``arrow_json``), shaped as ``from_json``'s."""
    names = arrow_json.value_names(len(physical))
    fields = [F.col(f"`{n}`").alias(c.name) for n, c in zip(names, physical, strict=True)]
    return F.struct(*fields, F.lit(None).cast("STRING").alias(CORRUPT))


def _lines(df: DataFrame, max_length: int | None) -> DataFrame:
    """``framing = 'newline'``: each message's lines as records of their own (empty lines are
    none), cut to ``max_length`` characters; the end-of-input marker row stays one row."""
    value_type = df.schema["value"].dataType
    line = F.col("_line")
    if max_length is not None:
        line = F.substring(line, 1, max_length)
    others = [f"`{c}`" for c in df.columns if c != "value"]
    lines = F.explode_outer(F.split(F.col("value").cast("STRING"), "\n"))
    split = df.select(lines.alias("_line"), *others)
    kept = split.filter(F.col("_eoi") | (F.col("_line") != ""))
    return kept.select(line.cast(value_type).alias("value"), *others)


def _decode_avro(
    df: DataFrame,
    table: TableSpec,
    physical: list[ColumnSpec],
    passthrough: list[str],
    planning: bool,
) -> DataFrame:
    """Avro datums (bare, or framed for the registry) into the table's columns. With the
    registry, each record is read with the writer schema its id names, resolved into the
    table's schema (Avro's schema evolution); a record with an id unknown when the query started
    is bad data."""
    from pyspark.sql.avro.functions import from_avro

    assert table.format is not None
    opts = parse_format_options("avro", table.format.options)
    assert isinstance(opts, AvroOptions)
    reader = registry.schema_text(registry.avro_schema(physical))
    permissive = {"mode": "PERMISSIVE"}
    framed = opts.confluent_schema_registry and not opts.raw_datums
    if framed:
        payload = F.expr(f"substring(value, {registry.HEADER_BYTES + 1})")
        schemas = {} if planning else registry.writer_schemas(table)
        if schemas:
            schema_id = F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("BIGINT")
            parsed: Column = F.lit(None)
            for writer_id, writer in sorted(schemas.items()):
                read = from_avro(payload, writer, {**permissive, "avroSchema": reader})
                parsed = F.when(schema_id == writer_id, read).otherwise(parsed)
            # Anything else is bad data: not framed, or written with a schema unknown here.
            parsed = F.when(F.substring("value", 1, 1) == F.lit(b"\x00"), parsed)
        else:
            parsed = from_avro(payload, reader, permissive)
    else:
        parsed = from_avro(F.col("value"), reader, permissive)
    out = df.select(parsed.alias("_parsed"), F.col("value").alias("_raw"), *passthrough)
    bad = F.col("_parsed").isNull()
    for col in physical:
        if not col.nullable:
            bad = bad | F.col(f"_parsed.`{col.name}`").isNull()
    selected = [F.col(f"_parsed.`{c.name}`").alias(c.name) for c in physical]
    out = out.select(*selected, (bad & ~F.col("_eoi")).alias("_bad"), "_raw", *passthrough)
    return apply_bad_data(out, table)


def _change_record_schema(physical: list[ColumnSpec]) -> str:
    """A change record's schema, its TIMESTAMP fields read as text (see ``_image_field``)."""
    row = ", ".join(
        f"`{c.name}` {'STRING' if c.spark_type == 'TIMESTAMP' else c.spark_type}" for c in physical
    )
    return f"before STRUCT<{row}>, after STRUCT<{row}>, op STRING, `{CORRUPT}` STRING"


def _image_field(image: Column, col: ColumnSpec) -> Column:
    """One column of a change record's row image. A TIMESTAMP given as a number is read as
    Arroyo reads it, in nanoseconds since the epoch (its TIMESTAMP's unit), and as text
    otherwise (Spark alone would read a number as seconds); one that is neither is NULL here
    and bad data (``_unreadable_times``)."""
    field = image.getField(col.name)
    if col.spark_type != "TIMESTAMP":
        return field.alias(col.name)
    nanos = field.try_cast("DECIMAL(20,0)")
    as_number = F.timestamp_micros(F.floor(nanos / 1000).cast("BIGINT"))
    return (
        F.when(field.rlike("^-?[0-9]{1,20}$"), as_number).otherwise(field.try_cast("TIMESTAMP"))
    ).alias(col.name)


def _unreadable_times(image: Column, physical: list[ColumnSpec]) -> Column:
    """Whether a TIMESTAMP field of the image is given but is no time."""
    bad = F.lit(False)
    for col in physical:
        if col.spark_type == "TIMESTAMP":
            given = image.getField(col.name)
            bad = bad | (given.isNotNull() & _image_field(image, col).isNull())
    return bad


def _decode_debezium(
    df: DataFrame, table: TableSpec, physical: list[ColumnSpec], passthrough: list[str]
) -> DataFrame:
    """Change records in: ``c``/``r``/``u`` give the row after, ``d`` the row before with
    ``__arroyo_keep`` false (the row no longer exists)."""
    schema = _change_record_schema(physical)
    text = F.col("value").cast("STRING")
    parsed = F.from_json(
        text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    ).alias("_parsed")
    out = df.select(parsed, text.alias("_raw"), *passthrough)
    op = F.col("_parsed.op")
    deleted = op == "d"
    image = F.when(deleted, F.col("_parsed.before")).otherwise(F.col("_parsed.after"))
    selected = [_image_field(image, c) for c in physical]
    bad = (
        F.col("_parsed").isNull()
        | F.col(f"_parsed.`{CORRUPT}`").isNotNull()
        | ~F.coalesce(op.isin("c", "r", "u", "d"), F.lit(False))
        | image.isNull()
        | _unreadable_times(image, physical)
    )
    for key in table.primary_key:
        bad = bad | image.getField(key).isNull()
    bad = bad & ~F.col("_eoi")
    keep = (~deleted).alias("__arroyo_keep")
    out = out.select(*selected, keep, bad.alias("_bad"), "_raw", *passthrough)
    return apply_bad_data(out, table)


def _decode_signed(
    df: DataFrame, table: TableSpec, physical: list[ColumnSpec], passthrough: list[str]
) -> DataFrame:
    """Change records as signed rows, for aggregates that retract: ``c``/``r`` add the row after
    (+1), ``d`` takes the row before away (-1), ``u`` does both. An update without its before
    image cannot be retracted, so it is bad data here."""
    schema = _change_record_schema(physical)
    text = F.col("value").cast("STRING")
    parsed = F.from_json(
        text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    ).alias("_parsed")
    op, before = F.col("_parsed.op"), F.col("_parsed.before")
    deleted = op == "d"
    changes = F.array(
        F.struct(
            F.when(deleted, before).otherwise(F.col("_parsed.after")).alias("image"),
            F.when(deleted, F.lit(-1)).otherwise(F.lit(1)).alias("sign"),
        ),
        F.struct(F.when(op == "u", before).alias("image"), F.lit(-1).alias("sign")),
    )
    image = F.col("_change.image")
    bad = (
        F.col("_parsed").isNull()
        | F.col(f"_parsed.`{CORRUPT}`").isNotNull()
        | ~F.coalesce(op.isin("c", "r", "u", "d"), F.lit(False))
        | image.isNull()
        | _unreadable_times(image, physical)
    )
    for key in table.primary_key:
        bad = bad | image.getField(key).isNull()
    out = (
        df.select(parsed, text.alias("_raw"), *passthrough)
        .select("*", F.posexplode(changes).alias("_position", "_change"))
        # The second change exists for updates only (the end-of-input marker keeps its first).
        .filter((F.col("_position") == 0) | (op == "u"))
    )
    selected = [_image_field(image, c) for c in physical]
    sign = F.col("_change.sign").alias(SIGN)
    out = out.select(*selected, sign, (bad & ~F.col("_eoi")).alias("_bad"), "_raw", *passthrough)
    return apply_bad_data(out, table)


def apply_bad_data(df: DataFrame, table: TableSpec) -> DataFrame:
    """Rows flagged ``_bad`` fail the job (naming the record) or are dropped and counted."""
    assert table.format is not None
    if table.format.bad_data == "drop":
        df = df.observe(
            f"bad_data:{table.name}", F.count(F.when(F.col("_bad"), 1)).alias("dropped")
        )
        df = df.filter(~F.col("_bad"))
    else:
        # The record as it came is kept as it came (no copy per record) and rendered only
        # in the message: binary formats in hex, text as text.
        raw = F.col("_raw")
        if table.format.name == "avro":
            raw = F.hex(raw)
        message = F.concat(
            F.lit(f"bad data in table '{table.name}' ({table.format.name}): could not decode "),
            F.coalesce(raw.cast("STRING"), F.lit("<null>")),
        )
        # The filter must stay above the decoding projection: pushed beneath it (as the
        # optimizer does through deterministic projections) it would inline the decoder, once
        # per reference, and parse every record three times. Spark keeps predicates above a
        # non-deterministic projection; spark_partition_id() is the cheapest such expression.
        # (The drop branch needs none of this: observe() is a barrier already.)
        df = df.withColumn("_bad", F.col("_bad") & (F.spark_partition_id() >= 0))
        df = df.filter(F.coalesce(F.when(F.col("_bad"), F.raise_error(message)), F.lit(True)))
    return df.drop("_bad", "_raw")


def encode(
    df: DataFrame, table: TableSpec, *, keep: Sequence[str] = (), beside: Sequence[str] = ()
) -> DataFrame:
    """A ``value`` column: each row in the sink's format; then the columns named in ``keep``
    as they are (a record key, a timestamp), and those named in ``beside``, which are carried
    along but not part of the record (a file sink's partition directory)."""
    record = df.select(*[f"`{n}`" for n in df.columns if n not in beside]) if beside else df
    kept = [F.col(f"`{name}`") for name in (*keep, *beside)]
    return df.select(_encoded(record, table).alias("value"), *kept)


def _encoded(df: DataFrame, table: TableSpec) -> Column:
    assert table.format is not None
    fmt = table.format.name
    if fmt == "raw_string":
        return F.col(df.columns[0]).cast("STRING")
    if fmt == "raw_bytes":
        return F.col(df.columns[0]).cast("BINARY")
    if fmt == "avro":
        return _encoded_avro(df, table)
    if fmt == "protobuf":
        from arroyo.formats.protobuf import json_to_protobuf

        row = F.struct(*[F.col(f"`{name}`") for name in df.columns])
        return json_to_protobuf(table)(json_text(row, has_timestamps(df.schema)))
    opts = _json_options(table)
    if opts.unstructured and len(df.columns) == 1:
        return F.col(df.columns[0]).cast("STRING")
    row = _json_struct(df, df.columns, opts)
    if fmt == "debezium_json":
        # Append-only input: every row is a create.
        row = F.struct(F.lit(None).alias("before"), row.alias("after"), F.lit("c").alias("op"))
    text = json_text(row, has_timestamps(df.schema))
    if opts.include_schema:
        schema = registry.schema_text(_connect_schema(table))
        text = F.concat(F.lit(f'{{"schema":{schema},"payload":'), text, F.lit("}"))
    if opts.confluent_schema_registry:
        columns = [c for c in table.columns if c.physical]
        schema_id = registry.register(
            table, registry.schema_text(registry.json_schema(columns)), "JSON"
        )
        return F.concat(F.lit(registry.header(schema_id)), text.cast("BINARY"))
    return text


def _encoded_avro(df: DataFrame, table: TableSpec) -> Column:
    """Avro datums of the table's schema; framed with the registered schema's id when the
    table uses the registry."""
    from pyspark.sql.avro.functions import to_avro

    assert table.format is not None
    opts = parse_format_options("avro", table.format.options)
    assert isinstance(opts, AvroOptions)
    columns = [c for c in table.columns if c.physical]
    schema = registry.schema_text(registry.avro_schema(columns))
    datum = to_avro(F.struct(*[F.col(f"`{name}`") for name in df.columns]), schema)
    if not opts.confluent_schema_registry:
        return datum
    schema_id = registry.register(table, schema, "AVRO")
    return datum if opts.raw_datums else F.concat(F.lit(registry.header(schema_id)), datum)


def _connect_schema(table: TableSpec) -> dict[str, object]:
    """Kafka Connect's schema of the table's rows (the ``schema`` of its JSON envelope)."""
    kinds = {
        "BOOLEAN": "boolean",
        "TINYINT": "int8",
        "SMALLINT": "int16",
        "INT": "int32",
        "BIGINT": "int64",
        "FLOAT": "float",
        "DOUBLE": "double",
        "BINARY": "bytes",
    }
    fields = [
        {
            "field": c.name,
            "type": kinds.get(c.spark_type.upper(), "string"),
            "optional": c.nullable,
        }
        for c in table.columns
        if c.physical
    ]
    return {"type": "struct", "fields": fields, "optional": False}


def json_text(row: Column, timestamps: bool = True) -> Column:
    """The row as one JSON object, timestamps written as Arroyo writes them. ``timestamps``
    False says the row has none, which spares two regular expressions over every record."""
    text = F.to_json(row, {"timestampFormat": _TS_FORMAT, "ignoreNullFields": "false"})
    if not timestamps:
        return text
    text = F.regexp_replace(text, _WHOLE_SECOND, '$1"')
    return F.regexp_replace(text, _WHOLE_MILLISECOND, '$1"')


def has_timestamps(data_type: DataType) -> bool:
    """Whether a value of this type holds a timestamp anywhere (in a field, element, key)."""
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return True
    if isinstance(data_type, StructType):
        return any(has_timestamps(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return has_timestamps(data_type.elementType)
    if isinstance(data_type, MapType):
        return has_timestamps(data_type.keyType) or has_timestamps(data_type.valueType)
    return False


def json_row(df: DataFrame, columns: Sequence[str], table: TableSpec) -> Column:
    """Each row's ``columns`` as one JSON object, as ``table``'s JSON format writes a row
    (its timestamps as its ``json.timestamp_format`` says)."""
    row = _json_struct(df, columns, _json_options(table))
    return json_text(row, has_timestamps(df.select(row).schema))


def _json_struct(df: DataFrame, columns: Sequence[str], opts: JsonOptions) -> Column:
    """The row's ``columns`` as a struct, each as the JSON options write it."""
    return F.struct(*[_json_field(df, name, opts) for name in columns])


def _json_field(df: DataFrame, name: str, opts: JsonOptions) -> Column:
    col = F.col(f"`{name}`")
    data_type = df.schema[name].dataType
    if opts.timestamp_format == "unix_millis" and isinstance(data_type, TimestampType):
        col = F.unix_millis(col)
    elif isinstance(data_type, DecimalType) and opts.decimal_encoding == "string":
        col = col.cast("STRING")
    elif isinstance(data_type, DecimalType) and opts.decimal_encoding == "bytes":
        col = decimal_bytes(name)
    return col.alias(name)


def decimal_bytes(name: str) -> Column:
    """Column ``name`` (a DECIMAL) as Arroyo's ``bytes`` encoding writes it: its unscaled
    value as 16 big-endian two's-complement bytes (an i128), base64. Exact throughout: the
    unscaled value is the decimal's text without its point; integral division (``div``, which
    truncates) by 2^64 gives the high 64 bits, floored, which ``hex`` writes in two's
    complement; the low 64 bits go as two 32-bit halves."""
    unscaled = (
        f"CAST(regexp_replace(CAST({quote_name(name)} AS STRING), '[.]', '') AS DECIMAL(38, 0))"
    )
    m = "CAST(18446744073709551616 AS DECIMAL(38, 0))"
    q = f"({unscaled} div {m})"
    r = f"({unscaled} - CAST({q} AS DECIMAL(38, 0)) * {m})"
    high = f"IF({r} < 0, {q} - 1, {q})"
    low = f"IF({r} < 0, {r} + {m}, {r})"
    low_high = f"({low} div 4294967296)"
    low_low = f"CAST({low} - CAST({low_high} AS DECIMAL(38, 0)) * 4294967296 AS BIGINT)"
    text = (
        f"concat(lpad(hex({high}), 16, '0'), lpad(hex({low_high}), 8, '0'), "
        f"lpad(hex({low_low}), 8, '0'))"
    )
    return F.expr(f"base64(unhex({text}))")


def spark_schema(columns: list[ColumnSpec]) -> StructType:
    schema = StructType.fromDDL(", ".join(f"`{c.name}` {c.spark_type}" for c in columns))
    assert isinstance(schema, StructType)
    return schema
