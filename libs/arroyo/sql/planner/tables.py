"""CREATE TABLE: a connector table's spec (options checked by its connector's model, format,
columns, watermark), lookup tables read while planning, and memory tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlglot import exp

from arroyo.connectors import connector
from arroyo.errors import PlanningError
from arroyo.formats import FORMATS, FormatError, format_option_prefix, parse_format_options
from arroyo.program.names import quote_name
from arroyo.program.spec import ColumnSpec, FormatSpec, Role, TableSpec, ViewSpec
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.diagnostics import ErrorCode, diagnostic, error
from arroyo.sql.planner.event_time import EVENT_TIME_OPTIONS, event_time
from arroyo.sql.planner.relations import is_hidden
from arroyo.sql.planner.rewriter import Rewriter
from arroyo.sql.statements import CreateTable, Insert, OptionDecl
from arroyo.sql.types import spark_type

if TYPE_CHECKING:
    from arroyo.connectors.base import Connector
    from arroyo.sql.planner.context import PlanContext

# The options every table may take, whatever its connector.
_COMMON_OPTIONS = {"connector", "type", "format", "bad_data", "connection_profile"}
_FRAMING = "framing"
_MAX_LENGTH = "framing.newline.max_length"


def declare_memory_table(ctx: PlanContext, stmt: CreateTable) -> None:
    """A table with no connector: written once by an INSERT, then read like a view."""
    ensure_new_name(ctx, stmt.name, stmt.offset)
    if stmt.options:
        raise error(
            ErrorCode.MISSING_OPTION,
            f"table '{stmt.name}' has options but no connector: add connector = ..., or "
            f"drop the WITH clause for a memory table",
            ctx.text.span(stmt.offset),
        )
    if not stmt.columns:
        raise error(
            ErrorCode.MEMORY_TABLE_COLUMNS,
            f"memory table '{stmt.name}' must declare its columns",
            ctx.text.span(stmt.offset),
        )
    ctx.names.memory[stmt.name] = [
        ColumnSpec(c.name, spark_type(c.type), c.nullable) for c in stmt.columns
    ]


def write_memory_table(ctx: PlanContext, stmt: Insert) -> None:
    """The one INSERT into a memory table: a view of its query, cast to the declared columns."""
    name = stmt.table
    if name in ctx.names.memory_written:
        raise error(
            ErrorCode.MEMORY_TABLE_WRITTEN_TWICE,
            f"memory table '{name}' is already written; a memory table takes one INSERT",
            ctx.text.span(stmt.offset),
        )
    planned = Rewriter(ctx).top_level(stmt.query)
    sql_text = planned.node.sql(dialect="spark")
    schema = ctx.analyse(sql_text, stmt.query)
    fields = [f for f in schema.fields if not is_hidden(f.name)]
    columns = ctx.names.memory[name]
    if len(fields) != len(columns):
        raise error(
            ErrorCode.COLUMN_COUNT_MISMATCH,
            f"'{name}' has {len(columns)} columns but the query gives {len(fields)}",
            ctx.text.span(stmt.offset),
        )
    casts = [
        f"CAST(`{f.name}` AS {c.spark_type}) AS `{c.name}`"
        for f, c in zip(fields, columns, strict=True)
    ]
    casts += [f"`{n}`" for n in schema.fieldNames() if is_hidden(n)]
    view = ViewSpec(name, f"SELECT {', '.join(casts)} FROM ({sql_text}) AS `__memory`")
    ctx.add_view(view, stmt.query, ViewShape(planned.window, planned.updating, planned.static))
    ctx.names.memory_written.add(name)


def _check_misplaced(
    ctx: PlanContext,
    stmt: CreateTable,
    *,
    conn: Connector,
    options: dict[str, OptionDecl],
    parsed: Any,
    fmt: FormatSpec | None,
    role: Role,
) -> None:
    """Options the table's connector takes, but not for a table of this role: its format's
    that nothing uses here, and the other role's own."""
    wrong = []
    if fmt is not None:
        format_options = parse_format_options(fmt.name, fmt.options)
        for name in conn.misplaced_format_options(format_options, role):
            wrong.append((name, f"is not used by {role} tables of connector '{conn.name}'"))
    other = "sink" if role != "sink" else "source"
    for name in conn.misplaced_options(parsed, role):
        wrong.append(
            (
                name,
                f"is for {other} tables of connector '{conn.name}', and '{stmt.name}' is a "
                f"{role} table",
            )
        )
    if wrong:
        raise PlanningError(
            [
                diagnostic(
                    ErrorCode.BAD_OPTION,
                    f"option '{name}' {why}",
                    ctx.text.span(options[name].offset if name in options else stmt.offset),
                )
                for name, why in wrong
            ]
        )


def register_table(ctx: PlanContext, stmt: CreateTable, spec: TableSpec) -> None:
    """A source or lookup table's view. Spark analyses its columns here (virtual columns'
    expressions, metadata), and reading a lookup table lists its files: what is refused is a
    diagnostic on the table now, not a failure when it runs. The table is then an empty
    stand-in, so that the queries reading it are still checked."""
    from pyspark.errors import AnalysisException, ParseException

    from arroyo.connectors.base import ConnectorError

    try:
        ctx.catalog.register_source(spec)
    except (ConnectorError, AnalysisException, ParseException) as err:
        ddl = ", ".join(f"{quote_name(c.name)} {c.spark_type}" for c in spec.columns)
        ctx.catalog.register_empty(spec.name, ddl or "unknown STRING")
        span = ctx.text.span(stmt.offset)
        message = str(err).split("\n")[0].split(" SQLSTATE")[0]
        if spec.is_lookup:
            raise error(ErrorCode.LOOKUP_TABLE, message, span) from err
        params = err.getMessageParameters() if isinstance(err, AnalysisException) else None
        routine = (params or {}).get("routineName")
        if routine:
            raise error(
                ErrorCode.UNKNOWN_FUNCTION,
                f"table '{stmt.name}': unknown function {routine} in a column's expression",
                span,
            ) from err
        raise error(ErrorCode.INVALID_QUERY, f"table '{stmt.name}': {message}", span) from err


def ensure_new_name(ctx: PlanContext, name: str, offset: int) -> None:
    """Refuse a second table or view of ``name``."""
    if ctx.names.defined(name):
        raise error(
            ErrorCode.DUPLICATE_TABLE, f"'{name}' is already defined", ctx.text.span(offset)
        )


def connector_table(ctx: PlanContext, stmt: CreateTable) -> TableSpec:
    """A table with a connector, as its spec: options (its connection profile's, then its
    own) checked by the connector's model and its format's, columns, watermark."""
    text = ctx.text
    ensure_new_name(ctx, stmt.name, stmt.offset)
    options = {o.key: o for o in stmt.options}
    conn_name = options["connector"].value
    conn = connector(conn_name)
    if conn is None or conn.internal:
        from arroyo.connectors import CONNECTORS

        known = ", ".join(c.name for c in CONNECTORS)
        raise error(
            ErrorCode.UNKNOWN_CONNECTOR,
            f"unknown connector '{conn_name}' (known: {known})",
            text.span(options["connector"].offset),
        )
    options = _with_profile(ctx, stmt, conn, options)
    role = _table_role(ctx, stmt, conn, options)
    fmt = _table_format(ctx, stmt, conn, options, role)
    connector_raw = {
        k: o.value
        for k, o in options.items()
        if k not in _COMMON_OPTIONS
        and k not in (_FRAMING, _MAX_LENGTH)
        and k not in EVENT_TIME_OPTIONS
        and not (fmt and k.startswith(format_option_prefix(fmt.name)))
    }
    try:
        parsed = conn.parse_options(connector_raw)
    except ValidationError as err:
        raise _option_error(ctx, stmt, conn, err) from err
    _check_misplaced(ctx, stmt, conn=conn, options=options, parsed=parsed, fmt=fmt, role=role)
    columns = _table_columns(ctx, stmt, conn, parsed)
    event_column, delay = event_time(ctx, stmt, columns, options)
    spec = TableSpec(
        name=stmt.name,
        connector=conn.name,
        role=role,
        options=parsed.model_dump(exclude_none=True),
        columns=columns,
        format=fmt,
        event_time_column=event_column,
        watermark_delay_ms=delay,
        bounded=conn.bounded(parsed),
        primary_key=list(stmt.primary_key),
    )
    if spec.is_lookup:
        _check_lookup(ctx, stmt, spec)
    if spec.is_changelog and not spec.primary_key:
        raise error(
            ErrorCode.CHANGELOG_NEEDS_PRIMARY_KEY,
            f"'{stmt.name}' reads debezium change records, which are matched by key: "
            f"declare its PRIMARY KEY",
            text.span(stmt.offset),
        )
    return spec


def _check_lookup(ctx: PlanContext, stmt: CreateTable, spec: TableSpec) -> None:
    """A lookup table is a table as it is, not a stream: it has no event time, and its
    rows are values, not change records."""
    if stmt.watermark_column is not None:
        raise error(
            ErrorCode.LOOKUP_TABLE,
            f"lookup table '{stmt.name}' has no event time: drop its WATERMARK",
            ctx.text.span(stmt.watermark_offset),
        )
    if spec.format is not None and spec.format.name == "debezium_json":
        raise error(
            ErrorCode.LOOKUP_TABLE,
            f"lookup table '{stmt.name}' cannot read change records (debezium_json); "
            f"give it its rows as they are (json)",
            ctx.text.span(stmt.offset),
        )
    conn = connector(spec.connector)
    if conn is not None and conn.capabilities.lookup_by_key:
        keys = [c for c in spec.columns if c.name in spec.primary_key]
        if spec.format is not None and spec.format.name not in ("json", "raw_string"):
            raise error(
                ErrorCode.LOOKUP_TABLE,
                f"lookup table '{stmt.name}': a {conn.name} lookup table's values are json or "
                f"raw_string, not {spec.format.name}",
                ctx.text.span(stmt.offset),
            )
        if len(keys) != 1 or keys[0].metadata_key != "key" or keys[0].spark_type != "STRING":
            raise error(
                ErrorCode.LOOKUP_TABLE,
                f"{conn.name.capitalize()} lookup tables must have a PRIMARY KEY field defined "
                f"as `field_name TEXT METADATA FROM 'key'` ('{stmt.name}')",
                ctx.text.span(stmt.offset),
            )


def _with_profile(
    ctx: PlanContext, stmt: CreateTable, conn: Connector, options: dict[str, OptionDecl]
) -> dict[str, OptionDecl]:
    """A table naming ``connection_profile`` takes the profile's settings; its own options
    win where both set one. Errors in a profile's settings point at the name."""
    if "connection_profile" not in options:
        return options
    decl = options["connection_profile"]
    span = ctx.text.span(decl.offset)
    profile = ctx.profiles.get(decl.value)
    if profile is None:
        known = ", ".join(sorted(ctx.profiles)) or "none"
        raise error(
            ErrorCode.UNKNOWN_CONNECTION_PROFILE,
            f"no connection profile named '{decl.value}' (known: {known})",
            span,
        )
    if profile.connector != conn.name:
        raise error(
            ErrorCode.BAD_OPTION,
            f"connection profile '{profile.name}' is for connector '{profile.connector}', "
            f"not '{conn.name}'",
            span,
        )
    merged = {k: OptionDecl(k, v, decl.offset) for k, v in profile.config.items()}
    merged.update(options)
    return merged


def _table_role(
    ctx: PlanContext, stmt: CreateTable, conn: Connector, options: dict[str, Any]
) -> Any:
    if stmt.temporary:
        role = options["type"].value if "type" in options else "lookup"
        if role != "lookup":
            raise error(
                ErrorCode.BAD_OPTION,
                f"Cannot have a temporary table with type '{role}'; temporary tables must be "
                f"type 'lookup'",
                ctx.text.span(options["type"].offset),
            )
        if "lookup" not in conn.roles:
            raise error(
                ErrorCode.BAD_OPTION,
                f"connector '{conn.name}' cannot be a lookup table",
                ctx.text.span(stmt.offset),
            )
        return role
    if "type" in options:
        role = options["type"].value
        if role not in ("source", "sink", "lookup"):
            raise error(
                ErrorCode.BAD_OPTION,
                f"type must be 'source', 'sink' or 'lookup', not '{role}'",
                ctx.text.span(options["type"].offset),
            )
        if role not in conn.roles:
            raise error(
                ErrorCode.BAD_OPTION,
                f"connector '{conn.name}' cannot be a {role}"
                + (" table" if role == "lookup" else ""),
                ctx.text.span(options["type"].offset),
            )
        return role
    if len(conn.roles) == 1:
        return next(iter(conn.roles))
    raise error(
        ErrorCode.MISSING_OPTION,
        f"table '{stmt.name}' needs type = 'source' or 'sink' for connector '{conn.name}'",
        ctx.text.span(stmt.offset),
    )


def _table_format(
    ctx: PlanContext, stmt: CreateTable, conn: Connector, options: dict[str, Any], role: str
) -> FormatSpec | None:
    text = ctx.text
    name = options["format"].value if "format" in options else conn.default_format
    if name is None:
        for option in ("format", _FRAMING, _MAX_LENGTH):
            if option in options:
                raise error(
                    ErrorCode.UNKNOWN_FORMAT if option == "format" else ErrorCode.BAD_OPTION,
                    f"connector '{conn.name}' takes no {option}",
                    text.span(options[option].offset),
                )
        return None
    where = text.span(options["format"].offset) if "format" in options else text.span(stmt.offset)
    if name not in FORMATS:
        raise error(
            ErrorCode.UNKNOWN_FORMAT,
            f"unknown format '{name}' (known: {', '.join(FORMATS)})",
            where,
        )
    if name not in conn.formats:
        raise error(
            ErrorCode.UNKNOWN_FORMAT,
            f"connector '{conn.name}' does not support format '{name}' "
            f"(supported: {', '.join(sorted(conn.formats))})",
            where,
        )
    prefix = format_option_prefix(name)
    fmt_raw = {k[len(prefix) :]: o.value for k, o in options.items() if k.startswith(prefix)}
    try:
        parse_format_options(name, fmt_raw)
    except FormatError as err:
        key = next(iter(k for k in options if k.startswith(prefix)), None)
        raise error(
            ErrorCode.BAD_OPTION, err.message, text.span(options[key].offset) if key else where
        ) from err
    bad_data = options["bad_data"].value if "bad_data" in options else "fail"
    if bad_data not in ("fail", "drop"):
        raise error(
            ErrorCode.BAD_OPTION,
            f"bad_data must be 'fail' or 'drop', not '{bad_data}'",
            text.span(options["bad_data"].offset),
        )
    framing, max_length = _framing(ctx, options, role)
    return FormatSpec(name, fmt_raw, "drop" if bad_data == "drop" else "fail", framing, max_length)


def _framing(ctx: PlanContext, options: dict[str, Any], role: str) -> tuple[str | None, int | None]:
    """``framing = 'newline'`` and ``framing.newline.max_length``, as Arroyo reads them: a
    source's messages hold one record per line, each cut to the maximum length."""
    framing = options.get(_FRAMING)
    length = options.get(_MAX_LENGTH)
    if framing is None and length is None:
        return None, None
    if framing is None:
        assert length is not None
        raise error(
            ErrorCode.BAD_OPTION,
            f"{_MAX_LENGTH} needs framing = 'newline'",
            ctx.text.span(length.offset),
        )
    if framing.value != "newline":
        raise error(
            ErrorCode.BAD_OPTION,
            f"unknown framing '{framing.value}' (the one framing is 'newline')",
            ctx.text.span(framing.offset),
        )
    if role != "source":
        raise error(
            ErrorCode.BAD_OPTION,
            "framing splits the messages a source reads; a sink writes one record per message",
            ctx.text.span(framing.offset),
        )
    if length is None:
        return "newline", None
    if not length.value.strip().isdigit() or int(length.value) <= 0:
        raise error(
            ErrorCode.BAD_OPTION,
            f"{_MAX_LENGTH} must be a positive whole number of characters, not '{length.value}'",
            ctx.text.span(length.offset),
        )
    return "newline", int(length.value)


def _option_error(
    ctx: PlanContext, stmt: CreateTable, conn: Connector, err: ValidationError
) -> PlanningError:
    diagnostics = []
    offsets = {o.key: o.offset for o in stmt.options}
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        span = ctx.text.span(offsets.get(key, stmt.offset))
        if e["type"] == "extra_forbidden":
            fields = conn.options_model.model_fields.items()
            allowed = ", ".join(sorted(info.alias or name for name, info in fields)) or "none"
            diagnostics.append(
                diagnostic(
                    ErrorCode.UNKNOWN_OPTION,
                    f"unknown option '{key}' for connector '{conn.name}' (options: {allowed})",
                    span,
                )
            )
        elif e["type"] == "missing":
            diagnostics.append(
                diagnostic(
                    ErrorCode.MISSING_OPTION,
                    f"connector '{conn.name}' requires option '{key}'",
                    span,
                )
            )
        else:
            diagnostics.append(
                diagnostic(ErrorCode.BAD_OPTION, f"option '{key}': {e['msg']}", span)
            )
    return PlanningError(diagnostics)


def _table_columns(
    ctx: PlanContext, stmt: CreateTable, conn: Connector, options: Any
) -> list[ColumnSpec]:
    fixed = conn.columns(options)
    if fixed is not None:
        if stmt.columns:
            declared = {c.name for c in stmt.columns if c.generated is None}
            unknown = declared - {c.name for c in fixed}
            if unknown:
                col = next(c for c in stmt.columns if c.name in unknown)
                raise error(
                    ErrorCode.UNKNOWN_COLUMN,
                    f"connector '{conn.name}' has no column '{col.name}' "
                    f"(columns: {', '.join(c.name for c in fixed)})",
                    ctx.text.span(col.offset),
                )
        generated = [_table_column(ctx, conn, c) for c in stmt.columns if c.generated]
        return [*fixed, *generated]
    return [_table_column(ctx, conn, c) for c in stmt.columns]


def _table_column(ctx: PlanContext, conn: Connector, decl: Any) -> ColumnSpec:
    if decl.metadata_key is not None and decl.metadata_key not in conn.metadata_keys:
        keys = ", ".join(conn.metadata_keys) or "none"
        raise error(
            ErrorCode.UNKNOWN_METADATA,
            f"connector '{conn.name}' has no metadata '{decl.metadata_key}' (available: {keys})",
            ctx.text.span(decl.offset),
        )
    generated = None
    if decl.generated is not None:
        generated = _to_spark_sql(decl.generated)
    column = ColumnSpec(
        decl.name, spark_type(decl.type), decl.nullable, decl.metadata_key, generated
    )
    if decl.metadata_key is not None:
        allowed = conn.metadata_keys[decl.metadata_key]
        if column.spark_type not in allowed:
            raise error(
                ErrorCode.BAD_METADATA_TYPE,
                f"metadata '{decl.metadata_key}' of connector '{conn.name}' is "
                f"{' or '.join(allowed)}, not {column.spark_type}",
                ctx.text.span(decl.offset),
            )
    return column


def _to_spark_sql(node: exp.Expression) -> str:
    return node.sql(dialect="spark")
