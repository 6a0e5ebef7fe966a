"""From Arroyo SQL to a pipeline program whose queries Spark has already analysed.

The planner walks the statements in order. Tables become TableSpecs (options checked by their
connector's model); sources are registered in Spark as temp views at once, so each later query
can be analysed by Spark itself: Spark's analyser supplies types, name resolution and
streaming-support checks, and its errors are turned into diagnostics pointing at the user's SQL.

What the planner adds on top of Spark, query by query (``_Rewriter``):

- every row carries its event time in a hidden ``_timestamp`` column, which ``*`` never shows
  and sinks never write;
- ``tumble``/``hop``/``session`` in GROUP BY become Spark's ``window``/``session_window`` over
  that event time, and a windowed aggregate's rows take ``window_time(window)`` as event time, so
  aggregates and joins over windowed results work downstream;
- the checks Arroyo makes and Spark does not (window placement, hop widths, nested windows,
  top-level ORDER BY/LIMIT, reading sinks, writing sources).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlglot
from pydantic import ValidationError
from sqlglot import exp

from arroyo.connectors import connector
from arroyo.connectors.base import ConnectionProfile, Connector
from arroyo.errors import Diagnostic, PlanningError, Span
from arroyo.formats import FORMATS, FormatError, format_option_prefix, parse_format_options
from arroyo.program.names import EVENT_TIME, KEEP, SIGN, TOUCHED, quote_name, signed_view
from arroyo.program.spec import (
    AggregateSpec,
    ChangesSpec,
    ColumnSpec,
    FormatSpec,
    IntervalJoinSpec,
    PipelineProgram,
    SinkQuery,
    TableSpec,
    ViewSpec,
    WindowAggregateSpec,
)
from arroyo.sql.functions import FunctionError, translate
from arroyo.sql.statements import (
    CreateTable,
    CreateView,
    Insert,
    OptionDecl,
    Query,
    SetOption,
    parse_script,
)
from arroyo.sql.text import SourceText
from arroyo.sql.time import DurationError, interval_us, parse_duration_us
from arroyo.sql.types import spark_type
from arroyo.sql.windows import WindowSpec, window_name
from arroyo.udfs import UdfLibrary
from arroyo.udfs import register as register_udfs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


_WINDOW_HELPER = "__arroyo_window"
_COMMON_OPTIONS = {"connector", "type", "format", "bad_data", "connection_profile"}
_KNOWN_SETTINGS = {"updating_ttl"}
# Columns the planner adds for the engine, never written to a sink as data.
_HIDDEN = (EVENT_TIME, KEEP, TOUCHED)
# Arroyo's default updating_ttl: a join's rows are kept for a day of event time, an updating
# aggregate's keys for a day without an update.
_DEFAULT_UPDATING_TTL_US = 24 * 3_600_000_000
# A top-N without windows: Spark's max_by(x, o, N) takes N up to this.
_MAX_TOP_N = 100_000
# The meta key marking a top-N's generated rows and its aggregate (see _unwindowed_top_n).
_RANKED_ROWS = "arroyo_ranked_rows"


@dataclass
class _Table:
    spec: TableSpec
    declared_columns: bool


@dataclass(frozen=True, slots=True)
class _Relation:
    alias: str
    columns: list[tuple[str, str]]  # (name, spark type) including _timestamp when present
    window: tuple[str, WindowSpec] | None
    updating: list[str] | None = None  # key columns, when the relation is an updating result
    batch_input: str | None = None  # see _Planned
    static: bool = False  # a lookup table, or a query of lookup tables alone: not a stream
    # Columns equal to its event time (``_timestamp``) wherever set, lower-case dotted paths:
    # a table's WATERMARK FOR column, or its connector's (Connector.event_time_fields).
    time_fields: frozenset[str] = frozenset()

    @property
    def has_event_time(self) -> bool:
        return any(name == EVENT_TIME for name, _ in self.columns)


@dataclass
class _Planned:
    """A rewritten query: its AST in Spark's terms, and what downstream needs to know of it."""

    node: exp.Query
    window: tuple[str, WindowSpec] | None = None
    updating: list[str] | None = None  # key columns of an updating result
    # Set when the query must run per micro-batch (window functions such as ROW_NUMBER, which
    # Spark cannot run on a stream): the streaming view that feeds it. The query reads that
    # view's batch as ``<view>__batch``.
    batch_input: str | None = None
    static: bool = False  # it reads lookup tables alone


@dataclass
class _State:
    text: SourceText
    tables: dict[str, _Table] = field(default_factory=dict)
    views: list[ViewSpec] = field(default_factory=list)
    view_windows: dict[str, tuple[str, WindowSpec] | None] = field(default_factory=dict)
    view_updating: dict[str, list[str] | None] = field(default_factory=dict)
    # Views whose rows of each window all leave one streaming windowed aggregate (their root)
    # in the same micro-batch: the root's name (see _Rewriter._window_local_join).
    view_roots: dict[str, str] = field(default_factory=dict)
    view_nodes: dict[str, exp.Query] = field(default_factory=dict)  # their rewritten queries
    # Lookup tables, and views and memory tables that read lookup tables alone: not streams.
    static: set[str] = field(default_factory=set)
    inserts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    updating_inserts: dict[str, list[str]] = field(default_factory=dict)
    batch_inserts: dict[str, str] = field(default_factory=dict)
    # Memory tables (no connector): their declared columns, and whether they were written.
    memory: dict[str, list[ColumnSpec]] = field(default_factory=dict)
    memory_written: set[str] = field(default_factory=set)
    counter: itertools.count[int] = field(default_factory=itertools.count)
    settings: dict[str, str] = field(default_factory=dict)
    updating_ttl_us: int = _DEFAULT_UPDATING_TTL_US
    # Joins and updating results that aggregates read through a stage: the stage (a source)
    # and the query writing it (see _Rewriter._stage_join and _stage_changes).
    stages: list[tuple[TableSpec, SinkQuery]] = field(default_factory=list)
    # Arroyo's own aggregate functions that views call (see _Rewriter._top_rows_root).
    aggregates: list[AggregateSpec] = field(default_factory=list)
    # Views whose stateful operator another reads in the same query, where Spark's checks of
    # the chain are off (SinkQuery.unchecked_chain): interval joins under an updating
    # aggregate (_stage_join) and updating aggregates' changes (_fused_changes).
    fused_views: set[str] = field(default_factory=set)
    # Roots of window-local queries run by Arroyo's window aggregate, and the view that runs
    # them (see _Rewriter._window_aggregate_root).
    window_aggregate_roots: dict[str, str] = field(default_factory=dict)


def _setting_duration_us(value: str) -> int:
    """A duration setting as written: ``INTERVAL '1 hour'``, ``'1 hour'`` or ``1 hour``."""
    text = value.strip()
    if text[:8].upper() == "INTERVAL":
        text = text[8:]
    us = parse_duration_us(text.strip().strip("'"))
    if us <= 0:
        raise DurationError("the duration must be positive")
    return us


def _error(code: str, message: str, span: Span | None) -> PlanningError:
    return PlanningError([Diagnostic(code, message, span)])


class Planner:
    """Plans Arroyo SQL against a SparkSession (which it uses for analysis only: no query runs,
    no external system is contacted)."""

    def __init__(
        self,
        spark: SparkSession,
        *,
        parallelism: int = 1,
        state_dir: Path | None = None,
        udfs: UdfLibrary | None = None,
        profiles: Mapping[str, ConnectionProfile] | None = None,
    ) -> None:
        self.spark = spark
        self.parallelism = parallelism
        self.state_dir = state_dir or Path("/tmp/arroyo-planning")
        self.udfs = udfs
        self.profiles = dict(profiles or {})

    def plan(self, sql: str) -> PipelineProgram:
        from arroyo.engine.build import (
            BuildSettings,
            drop_temp_views,
            register_source,
            register_view,
        )

        text, statements = parse_script(sql)
        state = _State(text)
        if self.udfs is not None:
            register_udfs(self.spark, self.udfs)
        settings = BuildSettings(self.state_dir, self.parallelism, planning=True)
        drop_temp_views(self.spark)
        sources: list[TableSpec] = []
        diagnostics: list[Diagnostic] = []
        for stmt in statements:
            try:
                if (
                    isinstance(stmt, CreateTable)
                    and stmt.as_query is None
                    and not any(o.key == "connector" for o in stmt.options)
                ):
                    self._memory_table(state, stmt)
                elif isinstance(stmt, CreateTable) and stmt.as_query is None:
                    table = self._table(state, stmt)
                    state.tables[stmt.name] = table
                    if table.spec.is_lookup:
                        sources.append(table.spec)
                        state.static.add(stmt.name)
                        self._register_lookup(state, stmt, table.spec, settings)
                    elif table.spec.role == "source":
                        sources.append(table.spec)
                        if table.spec.is_changelog:
                            state.view_updating[stmt.name] = table.spec.primary_key
                        register_source(self.spark, table.spec, settings)
                elif isinstance(stmt, CreateTable | CreateView):
                    query = stmt.as_query if isinstance(stmt, CreateTable) else stmt.query
                    assert query is not None
                    self._ensure_new_name(state, stmt.name, stmt.offset)
                    planned = _Rewriter(self, state).top_level(query)
                    view = ViewSpec(stmt.name, planned.node.sql(dialect="spark"))
                    self.analyse(state, view.sql, query)
                    register_view(self.spark, view)
                    state.views.append(view)
                    state.view_windows[stmt.name] = planned.window
                    state.view_updating[stmt.name] = planned.updating
                    if planned.static:
                        state.static.add(stmt.name)
                    _note_window_root(state, view, planned)
                elif isinstance(stmt, Insert) and stmt.table in state.memory:
                    self._write_memory_table(state, stmt)
                elif isinstance(stmt, Insert):
                    target = state.tables.get(stmt.table)
                    if target is None:
                        raise _error(
                            "unknown_table",
                            f"no table named '{stmt.table}'",
                            text.span(stmt.offset),
                        )
                    if target.spec.role != "sink":
                        raise _error(
                            "insert_into_source",
                            f"cannot insert into '{stmt.table}': it is a source table",
                            text.span(stmt.offset),
                        )
                    sink_connector = connector(target.spec.connector)
                    local_joins = sink_connector is not None and sink_connector.writes_lines
                    planned = _Rewriter(self, state, local_joins, into_sink=True).top_level(
                        stmt.query
                    )
                    sql_text = planned.node.sql(dialect="spark")
                    self._check_streaming(state, sql_text, stmt.query, planned)
                    if planned.updating is not None:
                        self._check_updating_sink(state, target.spec, stmt.offset)
                        state.updating_inserts[stmt.table] = planned.updating
                    if planned.batch_input is not None:
                        self._check_batch_sink(state, target.spec, stmt.offset)
                        state.batch_inserts[stmt.table] = planned.batch_input
                    state.inserts.setdefault(stmt.table, []).append((sql_text, stmt.offset))
                elif isinstance(stmt, Query):
                    planned = _Rewriter(self, state, local_joins=True, into_sink=True).top_level(
                        stmt.query
                    )
                    sql_text = planned.node.sql(dialect="spark")
                    self._check_streaming(state, sql_text, stmt.query, planned)
                    name = f"select_{sum(1 for q in state.inserts if q.startswith('select_'))}"
                    fmt = "json" if planned.updating is None else "debezium_json"
                    state.tables[name] = _Table(
                        TableSpec(name, "stdout", "sink", {}, [], FormatSpec(fmt)), False
                    )
                    if planned.updating is not None:
                        state.updating_inserts[name] = planned.updating
                    if planned.batch_input is not None:
                        state.batch_inserts[name] = planned.batch_input
                    state.inserts[name] = [(sql_text, stmt.offset)]
                elif isinstance(stmt, SetOption):
                    if stmt.key not in _KNOWN_SETTINGS:
                        raise _error(
                            "unknown_setting",
                            f"unknown setting '{stmt.key}' "
                            f"(known: {', '.join(sorted(_KNOWN_SETTINGS))})",
                            text.span(stmt.offset),
                        )
                    if stmt.key == "updating_ttl":
                        try:
                            state.updating_ttl_us = _setting_duration_us(stmt.value)
                        except DurationError as err:
                            raise _error(
                                "bad_setting",
                                f"updating_ttl: {err} (write e.g. INTERVAL '1 hour')",
                                text.span(stmt.offset),
                            ) from err
                    state.settings[stmt.key] = stmt.value
            except PlanningError as err:
                diagnostics.extend(err.diagnostics)
        if diagnostics:
            raise PlanningError(diagnostics)
        queries = [
            self._sink_query(state, name, inserts) for name, inserts in state.inserts.items()
        ]
        if not queries:
            raise _error(
                "no_sink",
                "the query writes nowhere: add an INSERT INTO a sink table or a SELECT",
                text.span(0),
            )
        writers = self._stage_readers(state, queries)
        written = {w.sink.name for w in writers}
        sources += [stage for stage, _ in state.stages if stage.name in written]
        queries += writers
        return PipelineProgram(
            sources=sources,
            views=state.views,
            queries=queries,
            parallelism=self.parallelism,
            udfs=self.udfs.source if self.udfs else None,
            udfs_path=self.udfs.path if self.udfs else None,
            aggregates=state.aggregates,
        )

    def _stage_readers(self, state: _State, queries: list[SinkQuery]) -> list[SinkQuery]:
        """The queries writing the stages that some query reads (a stage is planned with the
        view that needs it, and a view nobody reads needs none), after checking that each has
        one reader: the reader removes the files it has read, so a second would miss them."""
        if not state.stages:
            return []
        views = {v.name: v.sql for v in state.views}
        by_name = {spec.name: writer for spec, writer in state.stages}
        signed = {signed_view(name): name for name in by_name}

        def tables(sql: str) -> set[str]:
            try:
                return {t.name for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)}
            except sqlglot.errors.ParseError:
                # Spark SQL sqlglot cannot read (a column named ``window``): every identifier,
                # more than the tables, which can only make a stage look read more.
                return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql))

        def reads(sql: str, seen: frozenset[str] = frozenset()) -> set[str]:
            found: set[str] = set()
            for table_name in tables(sql):
                name = signed.get(table_name, table_name)
                if name in by_name:
                    found.add(name)
                elif name in views and name not in seen:
                    found |= reads(views[name], seen | {name})
            return found

        needed: list[SinkQuery] = []
        readers: dict[str, list[SinkQuery]] = {}
        pending = list(queries)
        while pending:
            query = pending.pop()
            for stage in reads(query.sql):
                if stage not in readers:
                    needed.append(by_name[stage])
                    pending.append(by_name[stage])
                readers.setdefault(stage, []).append(query)
        for sharing in readers.values():
            if len(sharing) > 1:
                sinks = [q.sink.name for q in sharing if q.sink.name in state.inserts]
                where = max((state.inserts[s][0][1] for s in sinks), default=0)
                raise _error(
                    "updating_join_shared",
                    "an aggregate over a join without windows that Spark runs (not an "
                    "interval join: keys of two types, more than two inputs), or over an "
                    "updating result with a HAVING, a DISTINCT count or a sum of decimals, "
                    "can feed one query, and two read the same one (repeat the aggregate for "
                    "each instead of sharing it through a view)",
                    state.text.span(where),
                )
        return needed

    # -- tables ----------------------------------------------------------------------------

    def _memory_table(self, state: _State, stmt: CreateTable) -> None:
        """A table with no connector: written once by an INSERT, then read like a view."""
        self._ensure_new_name(state, stmt.name, stmt.offset)
        if stmt.options:
            raise _error(
                "missing_option",
                f"table '{stmt.name}' has options but no connector: add connector = ..., or "
                f"drop the WITH clause for a memory table",
                state.text.span(stmt.offset),
            )
        if not stmt.columns:
            raise _error(
                "memory_table_columns",
                f"memory table '{stmt.name}' must declare its columns",
                state.text.span(stmt.offset),
            )
        state.memory[stmt.name] = [
            ColumnSpec(c.name, spark_type(c.type), c.nullable) for c in stmt.columns
        ]

    def _write_memory_table(self, state: _State, stmt: Insert) -> None:
        name = stmt.table
        if name in state.memory_written:
            raise _error(
                "memory_table_written_twice",
                f"memory table '{name}' is already written; a memory table takes one INSERT",
                state.text.span(stmt.offset),
            )
        planned = _Rewriter(self, state).top_level(stmt.query)
        sql_text = planned.node.sql(dialect="spark")
        schema = self.analyse(state, sql_text, stmt.query)
        fields = [f for f in schema.fields if f.name not in _HIDDEN]
        columns = state.memory[name]
        if len(fields) != len(columns):
            raise _error(
                "column_count_mismatch",
                f"'{name}' has {len(columns)} columns but the query gives {len(fields)}",
                state.text.span(stmt.offset),
            )
        casts = [
            f"CAST(`{f.name}` AS {c.spark_type}) AS `{c.name}`"
            for f, c in zip(fields, columns, strict=True)
        ]
        casts += [f"`{n}`" for n in _HIDDEN if n in schema.fieldNames()]
        view = ViewSpec(name, f"SELECT {', '.join(casts)} FROM ({sql_text}) AS `__memory`")
        self.analyse(state, view.sql, stmt.query)
        from arroyo.engine.build import register_view

        register_view(self.spark, view)
        state.views.append(view)
        state.view_windows[name] = planned.window
        state.view_updating[name] = planned.updating
        if planned.static:
            state.static.add(name)
        state.memory_written.add(name)

    def _register_lookup(
        self, state: _State, stmt: CreateTable, spec: TableSpec, settings: Any
    ) -> None:
        """A lookup table's view: its rows read whole (no event time), for joins with streams.
        Reading it lists its files, so a path with none is an error now, not when it runs."""
        from pyspark.errors import AnalysisException

        from arroyo.connectors.base import ConnectorError
        from arroyo.engine.build import register_source

        try:
            register_source(self.spark, spec, settings)
        except (ConnectorError, AnalysisException) as err:
            # An empty stand-in, so that the queries reading it are still checked.
            ddl = ", ".join(f"{quote_name(c.name)} {c.spark_type}" for c in spec.columns)
            empty = self.spark.createDataFrame([], ddl or "unknown STRING")
            empty.createOrReplaceTempView(spec.name)
            message = str(err).split("\n")[0].split(" SQLSTATE")[0]
            raise _error("lookup_table", message, state.text.span(stmt.offset)) from err

    def _ensure_new_name(self, state: _State, name: str, offset: int) -> None:
        if name in state.tables or name in state.view_windows or name in state.memory:
            raise _error("duplicate_table", f"'{name}' is already defined", state.text.span(offset))

    def _table(self, state: _State, stmt: CreateTable) -> _Table:
        text = state.text
        self._ensure_new_name(state, stmt.name, stmt.offset)
        options = {o.key: o for o in stmt.options}
        conn_name = options["connector"].value
        conn = connector(conn_name)
        if conn is None or conn.internal:
            from arroyo.connectors import CONNECTORS

            known = ", ".join(c.name for c in CONNECTORS)
            raise _error(
                "unknown_connector",
                f"unknown connector '{conn_name}' (known: {known})",
                text.span(options["connector"].offset),
            )
        options = self._with_profile(state, stmt, conn, options)
        role = self._role(state, stmt, conn, options)
        fmt = self._format(state, stmt, conn, options)
        connector_raw = {
            k: o.value
            for k, o in options.items()
            if k not in _COMMON_OPTIONS
            and not (fmt and k.startswith(format_option_prefix(fmt.name)))
        }
        try:
            parsed = conn.parse_options(connector_raw)
        except ValidationError as err:
            raise self._option_error(state, stmt, conn, err) from err
        columns = self._columns(state, stmt, conn, parsed)
        event_time, delay = self._watermark(state, stmt, columns)
        spec = TableSpec(
            name=stmt.name,
            connector=conn.name,
            role=role,
            options=parsed.model_dump(exclude_none=True),
            columns=columns,
            format=fmt,
            event_time_column=event_time,
            watermark_delay_ms=delay,
            bounded=conn.bounded(parsed),
            primary_key=list(stmt.primary_key),
        )
        if spec.is_lookup:
            self._check_lookup(state, stmt, spec)
        if spec.is_changelog and not spec.primary_key:
            raise _error(
                "changelog_needs_primary_key",
                f"'{stmt.name}' reads debezium change records, which are matched by key: "
                f"declare its PRIMARY KEY",
                text.span(stmt.offset),
            )
        return _Table(spec, declared_columns=bool(stmt.columns))

    def _check_lookup(self, state: _State, stmt: CreateTable, spec: TableSpec) -> None:
        """A lookup table is a table as it is, not a stream: it has no event time, and its
        rows are values, not change records."""
        if stmt.watermark_column is not None:
            raise _error(
                "lookup_table",
                f"lookup table '{stmt.name}' has no event time: drop its WATERMARK",
                state.text.span(stmt.watermark_offset),
            )
        if spec.format is not None and spec.format.name == "debezium_json":
            raise _error(
                "lookup_table",
                f"lookup table '{stmt.name}' cannot read change records (debezium_json); "
                f"give it its rows as they are (json)",
                state.text.span(stmt.offset),
            )

    def _with_profile(
        self, state: _State, stmt: CreateTable, conn: Connector, options: dict[str, OptionDecl]
    ) -> dict[str, OptionDecl]:
        """A table naming ``connection_profile`` takes the profile's settings; its own options
        win where both set one. Errors in a profile's settings point at the name."""
        if "connection_profile" not in options:
            return options
        decl = options["connection_profile"]
        span = state.text.span(decl.offset)
        profile = self.profiles.get(decl.value)
        if profile is None:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise _error(
                "unknown_connection_profile",
                f"no connection profile named '{decl.value}' (known: {known})",
                span,
            )
        if profile.connector != conn.name:
            raise _error(
                "bad_option",
                f"connection profile '{profile.name}' is for connector '{profile.connector}', "
                f"not '{conn.name}'",
                span,
            )
        merged = {k: OptionDecl(k, v, decl.offset) for k, v in profile.config.items()}
        merged.update(options)
        return merged

    def _role(
        self, state: _State, stmt: CreateTable, conn: Connector, options: dict[str, Any]
    ) -> Any:
        if "type" in options:
            role = options["type"].value
            if role not in ("source", "sink", "lookup"):
                raise _error(
                    "bad_option",
                    f"type must be 'source', 'sink' or 'lookup', not '{role}'",
                    state.text.span(options["type"].offset),
                )
            if role not in conn.roles:
                raise _error(
                    "bad_option",
                    f"connector '{conn.name}' cannot be a {role}"
                    + (" table" if role == "lookup" else ""),
                    state.text.span(options["type"].offset),
                )
            return role
        if len(conn.roles) == 1:
            return next(iter(conn.roles))
        raise _error(
            "missing_option",
            f"table '{stmt.name}' needs type = 'source' or 'sink' for connector '{conn.name}'",
            state.text.span(stmt.offset),
        )

    def _format(
        self, state: _State, stmt: CreateTable, conn: Connector, options: dict[str, Any]
    ) -> FormatSpec | None:
        text = state.text
        name = options["format"].value if "format" in options else conn.default_format
        if name is None:
            if "format" in options:
                raise _error(
                    "unknown_format",
                    f"connector '{conn.name}' takes no format",
                    text.span(options["format"].offset),
                )
            return None
        where = (
            text.span(options["format"].offset) if "format" in options else text.span(stmt.offset)
        )
        if name not in FORMATS:
            raise _error(
                "unknown_format", f"unknown format '{name}' (known: {', '.join(FORMATS)})", where
            )
        if name not in conn.formats:
            raise _error(
                "unknown_format",
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
            raise _error(
                "bad_option", err.message, text.span(options[key].offset) if key else where
            ) from err
        bad_data = options["bad_data"].value if "bad_data" in options else "fail"
        if bad_data not in ("fail", "drop"):
            raise _error(
                "bad_option",
                f"bad_data must be 'fail' or 'drop', not '{bad_data}'",
                text.span(options["bad_data"].offset),
            )
        return FormatSpec(name, fmt_raw, "drop" if bad_data == "drop" else "fail")

    def _option_error(
        self, state: _State, stmt: CreateTable, conn: Connector, err: ValidationError
    ) -> PlanningError:
        diagnostics = []
        offsets = {o.key: o.offset for o in stmt.options}
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            span = state.text.span(offsets.get(key, stmt.offset))
            if e["type"] == "extra_forbidden":
                allowed = ", ".join(sorted(conn.options_model.model_fields)) or "none"
                diagnostics.append(
                    Diagnostic(
                        "unknown_option",
                        f"unknown option '{key}' for connector '{conn.name}' (options: {allowed})",
                        span,
                    )
                )
            elif e["type"] == "missing":
                diagnostics.append(
                    Diagnostic(
                        "missing_option", f"connector '{conn.name}' requires option '{key}'", span
                    )
                )
            else:
                diagnostics.append(Diagnostic("bad_option", f"option '{key}': {e['msg']}", span))
        return PlanningError(diagnostics)

    def _columns(
        self, state: _State, stmt: CreateTable, conn: Connector, options: Any
    ) -> list[ColumnSpec]:
        fixed = conn.columns(options)
        if fixed is not None:
            if stmt.columns:
                declared = {c.name for c in stmt.columns if c.generated is None}
                unknown = declared - {c.name for c in fixed}
                if unknown:
                    col = next(c for c in stmt.columns if c.name in unknown)
                    raise _error(
                        "unknown_column",
                        f"connector '{conn.name}' has no column '{col.name}' "
                        f"(columns: {', '.join(c.name for c in fixed)})",
                        state.text.span(col.offset),
                    )
            generated = [self._column(state, conn, c) for c in stmt.columns if c.generated]
            return [*fixed, *generated]
        return [self._column(state, conn, c) for c in stmt.columns]

    def _column(self, state: _State, conn: Connector, decl: Any) -> ColumnSpec:
        if decl.metadata_key is not None and decl.metadata_key not in conn.metadata_keys:
            keys = ", ".join(conn.metadata_keys) or "none"
            raise _error(
                "unknown_metadata",
                f"connector '{conn.name}' has no metadata '{decl.metadata_key}' "
                f"(available: {keys})",
                state.text.span(decl.offset),
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
                raise _error(
                    "bad_metadata_type",
                    f"metadata '{decl.metadata_key}' of connector '{conn.name}' is "
                    f"{' or '.join(allowed)}, not {column.spark_type}",
                    state.text.span(decl.offset),
                )
        return column

    def _watermark(
        self, state: _State, stmt: CreateTable, columns: list[ColumnSpec]
    ) -> tuple[str | None, int]:
        if stmt.watermark_column is None:
            return None, 1000
        span = state.text.span(stmt.watermark_offset)
        col = next((c for c in columns if c.name == stmt.watermark_column), None)
        if col is None:
            raise _error(
                "unknown_column",
                f"WATERMARK FOR names unknown column '{stmt.watermark_column}'",
                span,
            )
        if col.spark_type != "TIMESTAMP":
            raise _error(
                "bad_watermark", f"WATERMARK FOR column '{col.name}' must be a TIMESTAMP", span
            )
        expr = stmt.watermark_expr
        if expr is None:
            return col.name, 1000
        if isinstance(expr, exp.Paren):
            expr = expr.this
        if isinstance(expr, exp.Column) and expr.name == col.name:
            return col.name, 0
        if (
            isinstance(expr, exp.Sub)
            and isinstance(expr.this, exp.Column)
            and expr.this.name == col.name
        ):
            try:
                return col.name, interval_us(expr.expression) // 1000
            except DurationError as err:
                raise _error("bad_watermark", str(err), span) from err
        raise _error(
            "bad_watermark",
            f"WATERMARK expression must be '{col.name}' or '{col.name} - INTERVAL ...'",
            span,
        )

    # -- sinks -----------------------------------------------------------------------------

    def reads_fused_view(self, state: _State, sql: str) -> bool:
        """Whether a query reads, through any views, a view whose stateful operator another
        reads in the same query (_State.fused_views)."""
        if not state.fused_views:
            return False
        plan = self.spark.sql(sql)._jdf.queryExecution().analyzed().toString()
        return any(f"View (`{name}`," in plan for name in state.fused_views)

    def _sink_query(self, state: _State, name: str, inserts: list[tuple[str, int]]) -> SinkQuery:
        table = state.tables[name]
        spec = table.spec
        selects = []
        columns = spec.columns
        keys = state.updating_inserts.get(name)
        if (keys is not None or name in state.batch_inserts) and len(inserts) > 1:
            raise _error(
                "updating_union",
                f"'{name}' takes an updating result; it cannot take other inserts too",
                state.text.span(inserts[1][1]),
            )
        keep = False
        for sql_text, offset in inserts:
            schema = self.spark.sql(sql_text).schema
            keep = keep or KEEP in schema.fieldNames()
            fields = [f for f in schema.fields if f.name not in _HIDDEN]
            if not columns:
                columns = [
                    ColumnSpec(f.name, f.dataType.simpleString(), f.nullable) for f in fields
                ]
            writable = [c for c in columns if c.physical]
            if len(fields) != len(writable):
                raise _error(
                    "column_count_mismatch",
                    f"'{name}' has {len(writable)} columns but the query gives {len(fields)}",
                    state.text.span(offset),
                )
            casts = ", ".join(
                f"CAST(`{f.name}` AS {c.spark_type}) AS `{c.name}`"
                for f, c in zip(fields, writable, strict=True)
            )
            casts += "".join(f", `{n}`" for n in (KEEP, TOUCHED) if n in schema.fieldNames())
            selects.append(f"SELECT {casts} FROM ({sql_text}) AS `__insert`")
        spec = TableSpec(
            spec.name,
            spec.connector,
            spec.role,
            spec.options,
            columns,
            spec.format,
            spec.event_time_column,
            spec.watermark_delay_ms,
            spec.bounded,
            spec.primary_key,
        )
        batch_input = state.batch_inserts.get(name)
        if batch_input is not None:
            merge = state.window_aggregate_roots.get(batch_input)
            return SinkQuery(
                spec,
                f"SELECT * FROM {quote_name(merge or batch_input)}",
                batch_sql=selects[0],
                batch_view=batch_view_name(batch_input),
                batch_merge=merge,
            )
        if keys is None:
            return SinkQuery(spec, " UNION ALL ".join(selects))
        # The keys are named as the query names them; the sink may rename columns by position.
        names = [f.name for f in self.spark.sql(inserts[0][0]).schema.fields]
        renamed = {
            n: c.name for n, c in zip([n for n in names if n not in _HIDDEN], columns, strict=False)
        }
        return SinkQuery(
            spec,
            selects[0],
            output_mode="update",
            key_columns=[renamed.get(k, k) for k in keys],
            keep_column=KEEP if keep else None,
            updating_ttl_ms=(
                state.updating_ttl_us // 1000 if TOUCHED in schema.fieldNames() else None
            ),
            unchecked_chain=self.reads_fused_view(state, selects[0]),
        )

    def _check_batch_sink(self, state: _State, sink: TableSpec, offset: int) -> None:
        conn = connector(sink.connector)
        if conn is None or not conn.writes_lines:
            raise _error(
                "window_function_sink",
                f"connector '{sink.connector}' cannot take the result of a window function yet",
                state.text.span(offset),
            )

    def _check_updating_sink(self, state: _State, sink: TableSpec, offset: int) -> None:
        conn = connector(sink.connector)
        takes_any = conn is not None and not conn.formats  # blackhole
        if not takes_any and (sink.format is None or sink.format.name != "debezium_json"):
            raise _error(
                "updating_into_append_sink",
                f"this query gives an updating result (rows change as input arrives), which "
                f"'{sink.name}' cannot write as format "
                f"'{sink.format.name if sink.format else 'none'}'; "
                f"use format = 'debezium_json'",
                state.text.span(offset),
            )
        if conn is None or not conn.writes_lines:
            raise _error(
                "updating_unsupported_sink",
                f"connector '{sink.connector}' cannot write updating results yet",
                state.text.span(offset),
            )

    # -- analysis --------------------------------------------------------------------------

    def analyse(self, state: _State, sql_text: str, original: exp.Expr) -> StructType:
        """Let Spark analyse ``sql_text``; its errors become diagnostics on ``original``."""
        from pyspark.errors import AnalysisException, ParseException

        try:
            return self.spark.sql(sql_text).schema
        except (AnalysisException, ParseException) as err:
            raise _spark_diagnostic(state.text, err, original) from err

    def _check_streaming(
        self, state: _State, sql_text: str, original: exp.Query, planned: _Planned
    ) -> None:
        """A query into a sink must read a stream: lookup tables alone are static."""
        self.analyse(state, sql_text, original)
        if planned.static:
            raise _error(
                "lookup_only",
                "this query reads only lookup tables, which are static: join them with a "
                "stream (a source table)",
                _span_of(state.text, original),
            )


def _to_spark_sql(node: exp.Expression) -> str:
    return node.sql(dialect="spark")


def _span_of(text: SourceText, node: exp.Expr) -> Span | None:
    for candidate in (node, node.this if isinstance(node.this, exp.Expression) else None):
        if candidate is not None and "start" in candidate.meta:
            return text.span(int(candidate.meta["start"]))
    for child in node.walk():
        if isinstance(child, exp.Expression) and "start" in child.meta:
            return text.span(int(child.meta["start"]))
    return None


def _spark_diagnostic(text: SourceText, err: Any, original: exp.Expr) -> PlanningError:
    condition = (err.getCondition() if hasattr(err, "getCondition") else None) or ""
    params = err.getMessageParameters() or {}
    span = _span_of(text, original)
    message = str(err).split("\n")[0]
    message = message.split(" SQLSTATE")[0]
    if condition.startswith("UNRESOLVED_COLUMN"):
        name = params.get("objectName", "").split(".")[-1].strip("`")
        for col in original.find_all(exp.Column):
            if col.name == name:
                span = _span_of(text, col) or span
                break
        proposal = params.get("proposal", "")
        hint = f" (did you mean one of: {proposal}?)" if proposal else ""
        return _error("unknown_column", f"unknown column '{name}'{hint}", span)
    if condition.startswith("UNRESOLVED_ROUTINE"):
        return _error("unknown_function", f"unknown function {params.get('routineName', '')}", span)
    return _error("invalid_query", message, span)


class _Rewriter:
    """Rewrites one query (recursively: CTEs, subqueries, unions) into Spark's terms."""

    def __init__(
        self, planner: Planner, state: _State, local_joins: bool = False, into_sink: bool = False
    ) -> None:
        self.planner = planner
        self.state = state
        self.text = state.text
        # Whether a join of windows may run per micro-batch (_window_local_join): only for a
        # query written into a sink that takes per-batch results.
        self.local_joins = local_joins
        # Whether the query being planned is the one written into a sink (not a view, CTE or
        # subquery, which further operators may read).
        self.into_sink = into_sink

    def top_level(self, query: exp.Query) -> _Planned:
        for clause, what in (("order", "ORDER BY"), ("limit", "LIMIT")):
            node = query.args.get(clause)
            if node is not None:
                raise _error(
                    "unsupported_" + clause,
                    f"{what} is not supported on an unbounded stream",
                    _span_of(self.text, node) or _span_of(self.text, query),
                )
        return self.query(query)

    def query(self, query: exp.Query) -> _Planned:
        query = query.copy()
        with_ = query.args.get("with_")
        if with_ is not None:
            query.set("with_", None)
            for cte in with_.expressions:
                self._register_cte(query, cte)
        if isinstance(query, exp.Union):
            if query.args.get("distinct"):
                raise _error(
                    "unsupported_union",
                    "UNION without ALL is not supported on streams; use UNION ALL",
                    _span_of(self.text, query),
                )
            left = self._nested(query.left)
            right = self._nested(query.right)
            if left.batch_input is not None or right.batch_input is not None:
                raise _error(
                    "window_function_union",
                    "UNION ALL of window-function results is not supported",
                    _span_of(self.text, query),
                )
            if left.updating is not None or right.updating is not None:
                raise _error(
                    "updating_union",
                    "UNION ALL of updating results is not supported",
                    _span_of(self.text, query),
                )
            if left.static != right.static:
                raise _error(
                    "lookup_union",
                    "UNION ALL of a stream and a lookup table is not supported (Spark unions "
                    "streams with streams only); join the lookup table instead",
                    _span_of(self.text, query),
                )
            query.set("this", left.node)
            query.set("expression", right.node)
            return _Planned(query, left.window, static=left.static)
        if isinstance(query, exp.Subquery):
            inner = self.query(query.this)
            query.set("this", inner.node)
            return _Planned(
                query, inner.window, inner.updating, inner.batch_input, static=inner.static
            )
        if not isinstance(query, exp.Select):
            raise _error(
                "unsupported_query", f"unsupported query: {query.key}", _span_of(self.text, query)
            )
        return self._select(query)

    def _nested(self, query: exp.Query) -> _Planned:
        """Plan a query inside this one (a subquery, CTE or UNION branch): a window-local join
        runs per batch only as the top-level query, as a per-batch result can only go to the
        sink, not into further streaming operators."""
        local_joins, self.local_joins = self.local_joins, False
        into_sink, self.into_sink = self.into_sink, False
        try:
            return self.query(query)
        finally:
            self.local_joins = local_joins
            self.into_sink = into_sink

    def _register_cte(self, query: exp.Query, cte: exp.CTE) -> None:
        from arroyo.engine.build import register_view

        name = cte.alias
        unique = f"{name}__cte{next(self.state.counter)}"
        planned = self._nested(cte.this)
        view = ViewSpec(unique, planned.node.sql(dialect="spark"))
        self.planner.analyse(self.state, view.sql, cte.this)
        register_view(self.planner.spark, view)
        self.state.views.append(view)
        self.state.view_windows[unique] = planned.window
        self.state.view_updating[unique] = planned.updating
        if planned.static:
            self.state.static.add(unique)
        _note_window_root(self.state, view, planned)
        for table in query.find_all(exp.Table):
            if table.name == name and not table.args.get("db"):
                alias = table.alias or name
                table.set("this", exp.to_identifier(unique))
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))

    # -- SELECT ----------------------------------------------------------------------------

    def _select(self, select: exp.Select) -> _Planned:
        try:
            relations = self._relations(select)
        except PlanningError as err:
            if not any(d.code == "window_function_input" for d in err.diagnostics):
                raise
            if not self._unwindowed_top_n(select):
                raise
            relations = self._relations(select)
        self._expand_stars(select, relations)
        try:
            translate(
                select,
                lambda: self._event_time(relations),
                self.planner.udfs.kinds if self.planner.udfs else None,
                {r.alias: dict(r.columns) for r in relations},
            )
        except FunctionError as err:
            raise _error("bad_function_call", str(err), _span_of(self.text, err.node)) from err
        streams = [r for r in relations if not r.static]
        if relations and not streams:
            return _Planned(select, static=True)  # lookup tables alone: Spark runs it as it is
        if len(streams) < len(relations):
            self._check_lookup_joins(select, relations)
        is_aggregate = select.args.get("group") is not None or any(
            _has_aggregate(p) for p in select.expressions
        )
        batch_inputs = [r for r in relations if r.batch_input is not None]
        if batch_inputs:
            if is_aggregate or len(relations) > 1:
                raise _error(
                    "window_function_input",
                    "only projections and filters can follow a window function such as "
                    "ROW_NUMBER()",
                    _span_of(self.text, select),
                )
            return _Planned(select, None, None, batch_inputs[0].batch_input)
        over = [w for w in select.find_all(exp.Window) if w.find_ancestor(exp.Select) is select]
        if over:
            return self._per_window_ranking(select, relations, over)
        windows = self._rewrite_windows(select, relations)
        if windows is not None:
            return self._windowed_aggregate(select, windows)
        grouped_window = self._grouped_input_window(select, relations)
        if grouped_window is not None:
            return self._windowed_aggregate(select, grouped_window)
        updating_inputs = [r for r in relations if r.updating is not None]
        if is_aggregate and len(relations) == 1 and self._reads_changelog(select):
            return self._changelog_aggregate(select, relations)
        if updating_inputs and is_aggregate and len(relations) == 1:
            changes = self._fused_changes(select, relations[0])
            if changes is not None:
                return self._changelog_aggregate(select, [changes], signed=True)
            return self._changelog_aggregate(select, [self._stage_changes(select, relations[0])])
        if updating_inputs and (is_aggregate or len(relations) > 1):
            what = "an aggregate" if is_aggregate else "a join"
            raise _error(
                "updating_input",
                f"{what} over an updating result is not supported; "
                f"aggregate or join the input before it is updated",
                _span_of(self.text, select),
            )
        if is_aggregate:
            return self._updating_aggregate(select, relations)
        if updating_inputs:
            return self._updating_projection(select, updating_inputs[0])
        if len(streams) > 1 and not all(r.window for r in streams):
            self._check_unwindowed_joins(select, relations)
            self._bound_unwindowed_joins(select, relations)
            if self.into_sink and not any(r.window for r in relations):
                # Only into a sink: Spark takes no stateful operator after the interval join
                # in the same query, and a view of it may be read by one.
                self._interval_join(select, relations)
        if len(relations) > 1 and self.local_joins:
            local = self._window_local_join(select, relations)
            if local is not None:
                return local
        return self._projection(select, relations)

    def _window_local_join(self, select: exp.Select, relations: list[_Relation]) -> _Planned | None:
        """A join of windowed views on their windows, where every view derives, window by
        window, from one streaming windowed aggregate (its root; e.g. Nexmark q5: the counts
        per auction and window, and the maximum count per window of those counts). All the
        rows of a window leave the root in the micro-batch in which the watermark passes the
        window's end, so each view's rows of that window, and the join of them, can be computed
        from that batch alone. The query runs per batch over the root's batch instead of as a
        streaming join: the root's aggregate is kept once (Spark would run it once per side of
        the join) and the join and the derived aggregates keep no state. Same rows, emitted in
        the same micro-batch as the streaming join would emit them."""
        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        sources = [from_.this, *(j.this for j in select.args.get("joins") or [])]
        if not all(isinstance(t, exp.Table) for t in sources):
            return None
        roots = {self.state.view_roots.get(t.name) for t in sources}
        if len(roots) != 1 or None in roots:
            return None
        windows = {(r.alias, r.window[0]) for r in relations if r.window is not None}
        for join, rel in zip(select.args.get("joins") or [], relations[1:], strict=True):
            on = join.args.get("on")
            if (join.args.get("side") or "").upper() or on is None or rel.window is None:
                return None
            mine = (rel.alias, rel.window[0])
            if not any(
                isinstance(eq.this, exp.Column)
                and isinstance(eq.expression, exp.Column)
                and mine in (sides := {(c.table, c.name) for c in (eq.this, eq.expression)})
                and len(sides) == 2
                and sides <= windows
                for eq in _conjuncts(on)
                if isinstance(eq, exp.EQ)
            ):
                return None
        (root,) = roots
        assert root is not None
        reduced = self._top_rows_root(select, sources, root)
        batch_root, root_form = reduced or (root, None)
        if reduced is None and root not in self.state.window_aggregate_roots:
            stream = self._window_aggregate_root(root)
            if stream is not None:
                self.state.window_aggregate_roots[root] = stream
        self._register_batch_view(batch_root)
        # A view grouped by the window alone has a row per window the batch closes: sent whole
        # to each task, it spares shuffling and sorting the other side (q5's counts) to join.
        # (Not for session windows, of which a batch may close one per key.)
        per_window = [t.alias_or_name for t in sources if self._grouped_by_window(t.name)]
        window = self.state.view_windows.get(root)
        if per_window and len(per_window) < len(sources) and window and window[1].kind != "session":
            hint = select.args.get("hint") or exp.Hint(expressions=[])
            hint.append(
                "expressions",
                exp.JoinHint(
                    this="BROADCAST",
                    expressions=[exp.to_table(exp.to_identifier(a)) for a in per_window],
                ),
            )
            select.set("hint", hint)
        for table in sources:
            assert isinstance(table, exp.Table)
            table.replace(
                exp.Subquery(
                    this=self._batch_form(table.name, root_form),
                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
                )
            )
        planned = self._projection(select, relations)
        return _Planned(planned.node, None, None, batch_root)

    def _grouped_by_window(self, view: str) -> bool:
        """Whether ``view`` is a windowed aggregate grouped by its input's window alone."""
        node = self.state.view_nodes.get(view)
        source = node.args.get("from_") if isinstance(node, exp.Select) else None
        inner = source.this.this if source and isinstance(source.this, exp.Subquery) else None
        group = inner.args.get("group") if isinstance(inner, exp.Select) else None
        if inner is None or group is None or len(group.expressions) != 1:
            return False
        window = next(
            (p.unalias() for p in inner.expressions if p.alias_or_name == _WINDOW_HELPER), None
        )
        grouped = _resolve_group_item(inner, group.expressions[0])
        return window is not None and grouped.sql(dialect="spark") == window.sql(dialect="spark")

    def _window_aggregate_root(self, root: str) -> str | None:
        """A view giving the partial results of ``root``, a keyed tumbling or hopping window
        aggregate, from Arroyo's window aggregate (WindowAggregateSpec, WindowAggregate.java:
        state kept per pane of time, where Spark keeps an entry per key and window, reads and
        writes it in every batch that touches it, and reads its whole state in every batch to
        find the closed windows). Each micro-batch sums the partial results into the root's
        rows, so only for a root whose rows go to per-batch queries alone. None where the
        aggregate is not of that form (count, sum, avg, min and max of plain arguments, grouped
        by the window and at least one key), or its types are not ones it takes."""
        from pyspark.errors import AnalysisException, IllegalArgumentException

        from arroyo.engine.build import window_aggregate, window_aggregate_results

        view = next((v for v in self.state.views if v.name == root), None)
        window = self.state.view_windows.get(root)
        if view is None or window is None or view.interval_join or view.changes:
            return None
        window_column, spec = window
        if spec.kind == "session":
            return None
        outer = sqlglot.parse_one(view.sql, read="spark")
        source = outer.args.get("from_") or outer.args.get("from")
        if not isinstance(outer, exp.Select) or source is None:
            return None
        inner = source.this.this if isinstance(source.this, exp.Subquery) else None
        group = inner.args.get("group") if isinstance(inner, exp.Select) else None
        if (
            not isinstance(inner, exp.Select)
            or group is None
            or inner.args.get("having") is not None
            or inner.args.get("distinct") is not None
        ):
            return None
        call = next(
            (p.unalias() for p in inner.expressions if p.alias_or_name == _WINDOW_HELPER),
            None,
        )
        if not isinstance(call, exp.Anonymous) or not call.expressions:
            return None
        window_sql = call.sql(dialect="spark")
        grouped = [_resolve_group_item(inner, g).sql(dialect="spark") for g in group.expressions]
        if grouped.count(window_sql) != 1:
            return None
        keys: list[exp.Expr] = []
        arguments: list[exp.Expr] = []
        kinds: list[str] = []
        names: list[str] = []
        selected: set[str] = set()
        for projection in inner.expressions:
            name, value = projection.alias_or_name, projection.unalias()
            sql = value.sql(dialect="spark")
            if name == _WINDOW_HELPER or sql == window_sql:
                continue
            if sql in grouped:
                keys.append(exp.alias_(value.copy(), name))
                selected.add(sql)
                continue
            plain = _plain_aggregate(value)
            if plain is None:
                return None
            kind, argument = plain
            arguments.append(exp.alias_(argument.copy(), f"__a{len(arguments)}"))
            kinds.append(kind)
            names.append(name)
        # Keys grouped by but not selected are keys all the same.
        for i, sql in enumerate(grouped):
            if sql != window_sql and sql not in selected:
                keys.append(exp.alias_(sqlglot.parse_one(sql, read="spark"), f"__k{i}"))
        feed = inner.copy()
        feed.set(
            "expressions", [*keys, exp.alias_(call.expressions[0].copy(), EVENT_TIME), *arguments]
        )
        feed.set("group", None)
        spark = self.planner.spark
        schema = spark.table(quote_name(root)).schema
        aggregate = WindowAggregateSpec(
            feed.sql(dialect="spark"),
            len(keys),
            kinds,
            names,
            window_column,
            spec.width_us,
            spec.slide_us,
            [f.name for f in schema.fields],
            # Buckets of keys, each pane's state split among them: enough for the tasks to
            # share the work evenly, few enough that each holds many keys.
            max(64, 8 * self.planner.parallelism),
        )
        try:
            partials = window_aggregate(spark, aggregate)
            # Per-batch queries read its rows as they would read Spark's.
            summed = window_aggregate_results(partials, aggregate)
        except (IllegalArgumentException, AnalysisException):
            return None  # a function, key or type it does not take; a name its columns use
        if _columns(summed.schema) != _columns(schema):
            return None
        name = f"__window_aggregate{next(self.state.counter)}"
        partials.createOrReplaceTempView(name)
        self.state.views.append(ViewSpec(name, view.sql, window_aggregate=aggregate))
        self.state.view_windows[name] = window
        self.state.view_updating[name] = None
        return name

    def _batch_form(self, view: str, root_form: exp.Query | None = None) -> exp.Query:
        """A window-local view's query, reading its root's micro-batch instead of the stream
        (or, given ``root_form``, reading that in place of the root's batch)."""
        root = self.state.view_roots[view]
        if root == view:
            if root_form is not None:
                return root_form.copy()
            return exp.select("*").from_(exp.to_identifier(batch_view_name(root)))
        node = self.state.view_nodes[view].copy()
        for table in list(node.find_all(exp.Table)):
            table.replace(
                exp.Subquery(
                    this=self._batch_form(table.name, root_form),
                    alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)),
                )
            )
        return node

    def _top_rows_root(
        self, select: exp.Select, sources: list[exp.Table], root: str
    ) -> tuple[str, exp.Query] | None:
        """A smaller root for the rows of a window that hold its maximum (or minimum).

        The pattern (Nexmark q7, the highest bids of each window): the root is a windowed
        GROUP BY without aggregates (distinct rows per window), joined on the window with a
        view ``SELECT window, max(x) AS m FROM root GROUP BY window``, on ``root.x = m``. Only
        the rows whose x is their window's maximum can meet that condition, and the maximum
        over those rows is the same maximum, so the root may keep just them: a streaming
        aggregate keyed by the window alone (ExtremeRows.java: the distinct rows of the
        largest x so far, ties included) in place of one keyed by every distinct row of the
        window, whose state holds every row until the window closes. Each batch expands the
        kept rows back into the root's columns, and the query runs over them as before.

        Returns the new root's view and the root's batch form read from it; None where the
        query is not of that form."""
        if len(sources) != 2 or [t.name for t in sources].count(root) != 1:
            return None
        (rows,) = [t for t in sources if t.name == root]
        (maxima,) = [t for t in sources if t.name != root]
        window = self.state.view_windows.get(root)
        if window is None or window[1].kind == "session":
            # A session window is per group: grouped by the window alone, it would join
            # sessions that the query keeps apart.
            return None
        extreme = _per_window_extreme(self.state.view_nodes.get(maxima.name), root, window[0])
        root_node = self.state.view_nodes.get(root)
        distinct = _distinct_windowed(root_node, window[0])
        if extreme is None or distinct is None:
            return None
        largest, column, alias = extreme
        inner, payload = distinct
        if column not in payload:
            return None
        mine = {(rows.alias_or_name, column), (maxima.alias_or_name, alias)}
        joins = select.args.get("joins") or []
        conditions = [c for j in joins if j.args.get("on") for c in _conjuncts(j.args["on"])]
        where = select.args.get("where")
        if where is not None:
            conditions += _conjuncts(where.this)
        if not any(
            isinstance(c, exp.EQ)
            and all(isinstance(side, exp.Column) for side in (c.this, c.expression))
            and {(side.table, side.name) for side in (c.this, c.expression)} == mine
            for c in conditions
        ):
            return None
        schema = self.planner.spark.table(quote_name(root)).schema
        types = {f.name: f.dataType for f in schema.fields}
        names = list(payload)
        key_type = types[column].simpleString()
        if not re.fullmatch(
            r"(tinyint|smallint|int|bigint|decimal\(.*\)|date|timestamp\w*)", key_type
        ) or any("binary" in types[n].simpleString() for n in names):
            # A key Java orders as Spark does; rows told apart by value (not a binary array).
            return None
        function = f"__arroyo_extreme_rows{next(self.state.counter)}"
        ddl = ", ".join(f"{quote_name(n)} {types[n].simpleString()}" for n in names)
        spec = AggregateSpec(function, ddl, names.index(column), largest)
        from pyspark.errors import AnalysisException

        from arroyo.engine.build import register_aggregate, register_view

        register_aggregate(self.planner.spark, spec)
        # The new root: the same query, grouped by its window alone, its other grouped
        # columns gathered into the top rows.
        helper = "__arroyo_rows"
        kept = [p for p in inner.expressions if p.alias_or_name not in payload]
        call = exp.Anonymous(this=function, expressions=[payload[n].copy() for n in names])
        grouped = {p.unalias().sql(): p.unalias() for p in kept}
        new_inner = inner.copy()
        new_inner.set("expressions", [*(p.copy() for p in kept), exp.alias_(call, helper)])
        new_inner.set("group", exp.Group(expressions=[e.copy() for e in grouped.values()]))
        assert isinstance(root_node, exp.Select)
        node = root_node.copy()
        columns = [p for p in node.expressions if p.alias_or_name not in payload]
        subquery = node.args["from_"].this
        columns.append(exp.column(helper, table=subquery.alias_or_name))
        node.set("expressions", columns)
        node.args["from_"].this.set("this", new_inner)
        view = ViewSpec(f"{root}__top_rows{next(self.state.counter)}", node.sql(dialect="spark"))
        try:
            register_view(self.planner.spark, view)
        except AnalysisException:
            # Spark refused the smaller root (say, a grouped column its aggregate's input
            # cannot take): the query runs over the root it was written with.
            return None
        self.state.aggregates.append(spec)
        self.state.views.append(view)
        expanded = exp.select(
            exp.Star(), exp.func("INLINE", exp.column("rows", table=helper))
        ).from_(exp.to_identifier(batch_view_name(view.name)))
        form = exp.select(*(exp.column(f.name, quoted=True) for f in schema.fields)).from_(
            exp.Subquery(this=expanded, alias=exp.TableAlias(this=exp.to_identifier(helper)))
        )
        return view.name, form

    def _bound_unwindowed_joins(self, select: exp.Select, relations: list[_Relation]) -> None:
        """State bounds for joins without windows.

        Spark drops a side's join state only when the join condition bounds that side's event
        time against the other's (then a row goes once the watermark says no row it could
        match can still come). Two sources of such bounds:

        - The query's own conditions on columns equal to the inputs' event times (Nexmark
          q9's ``B.bid.datetime BETWEEN A.auction.datetime AND ...``). Spark sees those only
          through the watermark column, so each is added again in terms of ``_timestamp``
          (_join_time_bounds): the copy holds wherever the original does, so results do not
          change, and a bid can be dropped as soon as the watermark passes it.
        - ``updating_ttl``. Arroyo drops a row from a join's state once it is older than the
          TTL, so each joined input's event time must lie within the TTL of the first
          input's: rows further apart than the TTL never meet (as in Arroyo, where the older
          one has expired), and each side's state is dropped once the other side's watermark
          is past it by the TTL. Spark takes the loosest of a side's bounds, so a half of the
          TTL bound is left out where the query already bounds that side at least as tightly.

        Joins written with USING (no ON to extend) keep their state for the pipeline's life."""
        first = next(r for r in relations if not r.static)
        ttl_us = self.state.updating_ttl_us
        bounded = _join_time_bounds(select, relations)
        seconds = exp.Literal.string(f"{ttl_us / 1_000_000:.6f}")
        ttl = exp.Interval(this=seconds, unit=exp.var("SECOND"))
        for join, rel in zip(select.args.get("joins") or [], relations[1:], strict=False):
            on = join.args.get("on")
            if on is None or rel is first or not (first.has_event_time and rel.has_event_time):
                continue
            mine = exp.column(EVENT_TIME, table=rel.alias)
            theirs = exp.column(EVENT_TIME, table=first.alias)
            halves: list[exp.Expression] = []
            if bounded.get((rel.alias, first.alias), -math.inf) < -ttl_us:
                halves.append(exp.GTE(this=mine, expression=exp.Sub(this=theirs, expression=ttl)))
            if bounded.get((first.alias, rel.alias), -math.inf) < -ttl_us:
                halves.append(
                    exp.LTE(
                        this=mine.copy(),
                        expression=exp.Add(this=theirs.copy(), expression=ttl.copy()),
                    )
                )
            if halves:
                join.set("on", exp.and_(exp.paren(join.args["on"].copy()), *halves))

    def _check_lookup_joins(self, select: exp.Select, relations: list[_Relation]) -> None:
        """A stream joined with lookup tables: each of the stream's rows meets the lookup rows
        there when its micro-batch runs (any condition, no state kept). The stream can keep
        rows that match nothing (stream LEFT JOIN lookup); a lookup row that matches nothing
        cannot be emitted, as a later stream row might still match it."""
        for join, rel, streaming in _joined(select, relations):
            side = (join.args.get("side") or "").upper()
            kind = (join.args.get("kind") or "").upper()
            if kind in ("SEMI", "ANTI") and not rel.static and not streaming:
                raise _error(
                    "lookup_outer_join",
                    f"a {kind} JOIN of a lookup table with a stream would decide each lookup "
                    f"row on stream rows still to come; filter the stream by the lookup table "
                    f"instead (stream {kind} JOIN lookup)",
                    _span_of(self.text, join),
                )
            if (rel.static and streaming and side in ("RIGHT", "FULL")) or (
                not rel.static and not streaming and side in ("LEFT", "FULL")
            ):
                raise _error(
                    "lookup_outer_join",
                    f"a {side} JOIN would keep the lookup table's unmatched rows, which a "
                    f"stream can never rule out; keep the stream's instead "
                    f"(stream LEFT JOIN lookup)",
                    _span_of(self.text, join),
                )

    def _check_unwindowed_joins(self, select: exp.Select, relations: list[_Relation]) -> None:
        """Joins without windows keep both sides' rows to match later rows: only inner
        equi-joins can do that (an outer join would have to retract its NULL-padded rows).
        Joins with lookup tables keep no rows (_check_lookup_joins)."""
        for join, rel, streaming in _joined(select, relations):
            if rel.static or not streaming:
                continue  # a join with lookup tables
            side = (join.args.get("side") or "").upper()
            if side in ("LEFT", "RIGHT", "FULL"):
                raise _error(
                    "unwindowed_outer_join",
                    f"a {side} JOIN needs both inputs windowed the same way; "
                    f"without windows only inner joins are supported",
                    _span_of(self.text, join),
                )
            on = join.args.get("on")
            equalities = [
                eq
                for eq in (on.find_all(exp.EQ) if on is not None else [])
                if isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Column)
            ]
            if not equalities and not join.args.get("using"):
                raise _error(
                    "join_without_equality",
                    "a join without windows needs an equality between the inputs' columns "
                    "(ON a.k = b.k)",
                    _span_of(self.text, join),
                )

    def _relations(self, select: exp.Select) -> list[_Relation]:
        sources: list[exp.Expression] = []
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is not None:
            sources.append(from_.this)
        for join in select.args.get("joins") or []:
            sources.append(join.this)
        relations = []
        for source in sources:
            if isinstance(source, exp.Table):
                relations.append(self._table_relation(source))
            elif isinstance(source, exp.Subquery):
                planned = self._nested(source.this)
                source.set("this", planned.node)
                alias = source.alias or f"__subquery{next(self.state.counter)}"
                if not source.alias:
                    source.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
                schema = self.planner.analyse(self.state, planned.node.sql(dialect="spark"), source)
                relations.append(
                    _Relation(
                        alias,
                        _columns(schema),
                        planned.window,
                        planned.updating,
                        planned.batch_input,
                        planned.static,
                    )
                )
            else:
                raise _error(
                    "unsupported_query",
                    f"unsupported FROM item: {source.key}",
                    _span_of(self.text, source),
                )
        return relations

    def _table_relation(self, table: exp.Table) -> _Relation:
        name = table.name
        span = _span_of(self.text, table)
        known = self.state.tables.get(name)
        if known is not None and known.spec.role == "sink":
            raise _error("read_from_sink", f"cannot read from '{name}': it is a sink table", span)
        if name in self.state.memory and name not in self.state.memory_written:
            raise _error(
                "memory_table_read_before_write",
                f"memory table '{name}' is read before any INSERT INTO it",
                span,
            )
        if known is None and name not in self.state.view_windows:
            raise _error("unknown_table", f"no table or view named '{name}'", span)

        schema = self.planner.spark.table(quote_name(name)).schema
        return _Relation(
            table.alias_or_name,
            _columns(schema),
            self.state.view_windows.get(name),
            self.state.view_updating.get(name),
            static=name in self.state.static,
            time_fields=_time_fields(known.spec) if known is not None else frozenset(),
        )

    def _expand_stars(self, select: exp.Select, relations: list[_Relation]) -> None:
        expanded: list[exp.Expression] = []
        for projection in select.expressions:
            if isinstance(projection, exp.Star):
                targets = relations
            elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
                targets = [r for r in relations if r.alias == projection.table]
                if not targets:
                    raise _error(
                        "unknown_table",
                        f"no relation named '{projection.table}'",
                        _span_of(self.text, projection),
                    )
            else:
                expanded.append(projection)
                continue
            qualify = len(relations) > 1
            for rel in targets:
                for name, _ in rel.columns:
                    if name not in _HIDDEN:
                        expanded.append(
                            exp.column(name, table=rel.alias if qualify else None, quoted=True)
                        )
        select.set("expressions", expanded)

    def _event_time(self, relations: list[_Relation]) -> exp.Expression:
        with_time = [r for r in relations if r.has_event_time]
        if not with_time:
            raise _error("no_event_time", "this input has no event time to window on", None)
        table = with_time[0].alias if len(relations) > 1 else None
        return exp.column(EVENT_TIME, table=table)

    def _rewrite_windows(
        self, select: exp.Select, relations: list[_Relation]
    ) -> tuple[exp.Expression, WindowSpec] | None:
        """Replace window calls with Spark's; returns the grouping window if there is one."""
        group = select.args.get("group")
        found: list[tuple[exp.Anonymous, WindowSpec]] = []
        for node in list(select.find_all(exp.Anonymous)):
            kind = window_name(node)
            if kind is None or node.find_ancestor(exp.Select) is not select:
                continue
            spec = self._window_spec(node, kind)
            found.append((node, spec))
        if not found:
            return None
        for node, _ in found:
            clause = node.find_ancestor(exp.Group, exp.Where, exp.Having, exp.Join, exp.Order)
            if group is None or (clause is not None and not isinstance(clause, exp.Group)):
                raise _error(
                    "window_outside_group_by",
                    f"window function {window_name(node)}() can only be used in "
                    f"GROUP BY (or selected and grouped by)",
                    _span_of(self.text, node),
                )
        input_window = next((r.window for r in relations if r.window), None)
        specs = {spec for _, spec in found}
        if len(specs) > 1:
            raise _error(
                "mismatched_windows",
                "a query can group by only one window",
                _span_of(self.text, found[1][0]),
            )
        spec = found[0][1]
        if input_window is not None:
            name, in_spec = input_window
            if in_spec != spec:
                raise _error(
                    "mismatched_windows",
                    f"the input is already windowed by {in_spec.describe()} "
                    f"(column '{name}'), which does not match {spec.describe()}; "
                    f"group by '{name}' instead",
                    _span_of(self.text, found[0][0]),
                )
            rel = next(r for r in relations if r.window)
            replacement: exp.Expression = exp.column(name, table=rel.alias, quoted=True)
        else:
            replacement = spec.spark_call(self._event_time(relations))
        for node, _ in found:
            node.replace(replacement.copy())
        return replacement, spec

    def _window_spec(self, node: exp.Anonymous, kind: str) -> WindowSpec:
        span = _span_of(self.text, node)
        args = node.expressions
        expected = 2 if kind == "hop" else 1
        if len(args) != expected:
            raise _error("bad_window", f"{kind}() takes {expected} interval argument(s)", span)
        try:
            values = [interval_us(a) for a in args]
        except DurationError as err:
            raise _error("bad_window", f"{kind}(): {err}", span) from err
        if any(v <= 0 for v in values):
            raise _error("bad_window", f"{kind}() intervals must be positive", span)
        if kind == "hop":
            slide, width = values
            if width % slide != 0:
                raise _error(
                    "bad_hop",
                    f"hop() width ({args[1].sql('postgres')}) must be a multiple of "
                    f"its slide ({args[0].sql('postgres')})",
                    span,
                )
            return WindowSpec("hop", width, slide)
        return WindowSpec(kind, values[0], values[0])  # type: ignore[arg-type]

    def _grouped_input_window(
        self, select: exp.Select, relations: list[_Relation]
    ) -> tuple[exp.Expression, WindowSpec] | None:
        """An aggregate grouping by the window column of an already windowed input."""
        group = select.args.get("group")
        if group is None:
            return None
        for rel in relations:
            if rel.window is None:
                continue
            name, spec = rel.window
            for g in group.expressions:
                target = _resolve_group_item(select, g)
                if isinstance(target, exp.Column) and target.name == name:
                    return target.copy(), spec
        return None

    def _windowed_aggregate(
        self, select: exp.Select, window: tuple[exp.Expression, WindowSpec]
    ) -> _Planned:
        """SELECT <user columns>, window_time(w) AS _timestamp FROM (agg + w) — Spark refuses
        window_time beside the aggregate itself."""
        call, spec = window
        inner = select.copy()
        inner.append("expressions", exp.alias_(call.copy(), _WINDOW_HELPER))
        schema = self.planner.analyse(self.state, inner.sql(dialect="spark"), select)
        names = [f.name for f in schema.fields if f.name != _WINDOW_HELPER]
        out_window = None
        for p in select.expressions:
            target = p.unalias()
            if target == call or (
                isinstance(target, exp.Column)
                and isinstance(call, exp.Column)
                and target.name == call.name
            ):
                out_window = (p.alias_or_name, spec)
        alias = f"__agg{next(self.state.counter)}"
        outer = exp.select(
            *[exp.column(n, table=alias, quoted=True) for n in names],
            exp.alias_(
                exp.Anonymous(
                    this="window_time", expressions=[exp.column(_WINDOW_HELPER, table=alias)]
                ),
                EVENT_TIME,
            ),
        ).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        return _Planned(outer, out_window)

    def _unwindowed_top_n(self, select: exp.Select) -> bool:
        """``SELECT .. FROM (SELECT .., ROW_NUMBER() OVER (PARTITION BY k ORDER BY o DESC) AS rn
        FROM t) WHERE rn <= N`` over input without windows (the last bid of each bidder, the ten
        highest bids of each auction): the N rows of each key with the largest (or smallest) o,
        which change as input arrives. Rewritten to the updating aggregate it is: GROUP BY k,
        and for N = 1 each other column ``max_by(row, o)`` (``min_by`` for ascending order);
        for N > 1, ``max_by(row, o, N)`` (Spark keeps a bounded heap per key) turned into one
        row per rank, keyed by k and rn. Returns whether ``select`` had that form; it is
        rewritten in place. Forms it cannot state as an aggregate are refused."""
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None or not isinstance(from_.this, exp.Subquery):
            return False
        inner = from_.this.this
        if not isinstance(inner, exp.Select) or inner.args.get("group") is not None:
            return False
        ranked = [p for p in inner.expressions if isinstance(p.unalias(), exp.Window)]
        if len(ranked) != 1 or not isinstance(ranked[0].unalias().this, exp.RowNumber):
            return False
        window = ranked[0].unalias()
        rank = ranked[0].alias_or_name
        span = _span_of(self.text, window)
        original = [p.alias_or_name for p in inner.expressions]
        where = select.args.get("where")
        conditions = _conjuncts(where.this) if where is not None else []
        bound = next((c for c in conditions if _rank_limit(c, rank) is not None), None)
        if bound is None:
            return False
        n = _rank_limit(bound, rank) or 0
        if not 1 <= n <= _MAX_TOP_N:
            raise _error(
                "unwindowed_top_n",
                f"a top-N over input without windows takes N from 1 to {_MAX_TOP_N:,}",
                _span_of(self.text, bound.this) or span,
            )
        order = window.args.get("order")
        ordered = order.expressions if order is not None else []
        directions = {bool(o.args.get("desc")) for o in ordered}
        if not ordered or len(directions) != 1:
            raise _error(
                "unwindowed_top_n",
                "ROW_NUMBER() over input without windows needs an ORDER BY, all in one "
                "direction (ASC or DESC)",
                span,
            )
        if self._reads_changelog(inner):
            raise _error(
                "window_function_input",
                "ROW_NUMBER() over a changelog (updating) input is not supported",
                span,
            )
        keys = window.args.get("partition_by") or []
        projected = {p.unalias() for p in inner.expressions if p is not ranked[0]}
        if not keys or any(k not in projected for k in keys):
            raise _error(
                "unwindowed_top_n",
                "ROW_NUMBER() over input without windows must be PARTITION BY columns that "
                "the query also selects (they become the keys of its updating result)",
                span,
            )
        by = (
            ordered[0].this
            if len(ordered) == 1
            else exp.Struct(expressions=[o.this.copy() for o in ordered])
        )
        values = [p for p in inner.expressions if p is not ranked[0] and p.unalias() not in keys]
        row = exp.Struct(
            expressions=[
                exp.PropertyEQ(this=exp.to_identifier(f"c{i}"), expression=p.unalias().copy())
                for i, p in enumerate(values)
            ]
        )
        descending = directions == {True}
        rest = [c for c in conditions if c is not bound]
        select.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        inner.set("group", exp.Group(expressions=[k.copy() for k in keys]))
        # max_by/min_by pass over rows whose order is NULL: say so in the query, so that a key
        # with only such rows has no row (rather than one of NULLs).
        ranked_only = exp.and_(
            *[exp.Not(this=exp.Is(this=o.this.copy(), expression=exp.Null())) for o in ordered]
        )
        inner_where = inner.args.get("where")
        inner.set(
            "where",
            exp.Where(
                this=exp.and_(exp.paren(inner_where.this.copy()), ranked_only)
                if inner_where is not None
                else ranked_only
            ),
        )
        # SELECT * keeps the inner query's column order (the rewrite moves the keys first).
        alias = from_.this.alias_or_name
        for star in [p for p in select.expressions if p.is_star]:
            star.replace(
                exp.Tuple(expressions=[exp.column(n, table=alias or None) for n in original])
            )
        select.set(
            "expressions",
            [
                e
                for p in select.expressions
                for e in (p.expressions if isinstance(p, exp.Tuple) else [p])
            ],
        )
        if n == 1:
            pick = exp.ArgMax if descending else exp.ArgMin
            for i, p in enumerate(values):
                chosen = pick(this=row.copy(), expression=by.copy())
                field_ = exp.Dot(this=chosen, expression=exp.to_identifier(f"c{i}"))
                p.replace(exp.alias_(field_, p.alias_or_name))
            inner.set("expressions", [p for p in inner.expressions if p is not ranked[0]])
            for col in list(select.find_all(exp.Column)):
                if col.name == rank and col.table in ("", from_.this.alias_or_name):
                    one = exp.Literal.number(1)
                    col.replace(exp.alias_(one, rank) if col.parent is select else one)
            return True
        # N rows per key: inline(transform(max_by(row, o, N), (x, i) -> (x.c0 AS v0, ..,
        # i + 1 AS rn))) beside the keys, a generator over the aggregate, keyed by k and rn.
        top = exp.Anonymous(
            this="max_by" if descending else "min_by",
            expressions=[row, by.copy(), exp.Literal.number(n)],
        )
        item, index = exp.to_identifier("__x"), exp.to_identifier("__i")
        fields = [
            exp.PropertyEQ(
                this=exp.to_identifier(p.alias_or_name),
                expression=exp.Dot(
                    this=exp.column(item.copy()), expression=exp.to_identifier(f"c{i}")
                ),
            )
            for i, p in enumerate(values)
        ]
        fields.append(
            exp.PropertyEQ(
                this=exp.to_identifier(rank),
                expression=exp.Add(this=exp.column(index.copy()), expression=exp.Literal.number(1)),
            )
        )
        rows = exp.Anonymous(
            this="inline",
            expressions=[
                exp.Anonymous(
                    this="transform",
                    expressions=[
                        top,
                        exp.Lambda(this=exp.Struct(expressions=fields), expressions=[item, index]),
                    ],
                )
            ],
        )
        rows.meta[_RANKED_ROWS] = True
        inner.set(
            "expressions",
            [p for p in inner.expressions if p.unalias() in keys] + [rows],
        )
        inner.meta[_RANKED_ROWS] = rank
        return True

    def _per_window_ranking(
        self, select: exp.Select, relations: list[_Relation], over: list[exp.Window]
    ) -> _Planned:
        """ROW_NUMBER() / RANK() / DENSE_RANK() OVER (PARTITION BY window ...) over windowed
        input. Every row of a window is emitted in the same micro-batch (the one in which the
        watermark passes its end), so ranking each batch ranks each window completely: the
        query runs per batch, over the batch of its (streaming) input."""
        span = _span_of(self.text, over[0])
        if len(relations) != 1 or relations[0].window is None or relations[0].updating:
            raise _error(
                "window_function_input",
                "window functions such as ROW_NUMBER() need windowed input: the result of a "
                "GROUP BY tumble(...), hop(...) or session(...), partitioned by its window",
                span,
            )
        relation = relations[0]
        assert relation.window is not None
        window_column = relation.window[0]
        for w in over:
            parts = w.args.get("partition_by") or []
            if not any(isinstance(p, exp.Column) and p.name == window_column for p in parts):
                raise _error(
                    "window_function_partition",
                    f"a window function over windowed input must be partitioned by its window "
                    f"column: PARTITION BY {window_column}",
                    _span_of(self.text, w) or span,
                )
        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        source = from_.this
        if isinstance(source, exp.Subquery):
            view = f"__ranked_input{next(self.state.counter)}"
            self._add_view(view, source.this.sql(dialect="spark"), source.this, relation)
        else:
            assert isinstance(source, exp.Table)
            view = source.name
        self._register_batch_view(view)
        source.replace(
            exp.Table(
                this=exp.to_identifier(batch_view_name(view)),
                alias=exp.TableAlias(this=exp.to_identifier(relation.alias)),
            )
        )
        return _Planned(select, None, None, view)

    def _register_batch_view(self, view: str) -> None:
        """An empty stand-in for the micro-batch of ``view`` that per-batch queries read, so
        that they can be analysed while planning (the runner registers each real batch)."""
        schema = self.planner.spark.table(quote_name(view)).schema
        empty = self.planner.spark.createDataFrame([], schema)
        empty.createOrReplaceTempView(batch_view_name(view))

    def _add_view(self, name: str, sql: str, original: exp.Expr, relation: _Relation) -> None:
        from arroyo.engine.build import register_view

        view = ViewSpec(name, sql)
        self.planner.analyse(self.state, view.sql, original)
        register_view(self.planner.spark, view)
        self.state.views.append(view)
        self.state.view_windows[name] = relation.window
        self.state.view_updating[name] = relation.updating

    def _updating_aggregate(self, select: exp.Select, relations: list[_Relation]) -> _Planned:
        """A GROUP BY without a window (or a global aggregate): one row per key, changing as
        input arrives. The keys are the selected non-aggregate columns."""
        if sum(not r.static for r in relations) > 1:
            relations = [self._stage_join(select, relations)]
        keys = [
            p.alias_or_name
            for p in select.expressions
            if not _has_aggregate(p)
            and p.alias_or_name != EVENT_TIME
            and not p.meta.get(_RANKED_ROWS)
        ]
        if rank := select.meta.get(_RANKED_ROWS):
            keys.append(rank)  # a top-N's rows, one per rank: _unwindowed_top_n
        having = select.args.get("having")
        if having is not None:
            select.set("having", None)
            select.append("expressions", exp.alias_(having.this.copy(), KEEP))
        # The time of the batch that last updated the key, for updating_ttl: last among the
        # aggregates, since the engine reads it as the last field of each key's state. Spark
        # takes no batch time inside an aggregate, so the input carries it as a column.
        from_ = select.args.get("from_") or select.args.get("from")
        alias = relations[0].alias
        if from_ is not None:
            timed = exp.select(exp.Star(), exp.alias_(exp.CurrentTimestamp(), TOUCHED))
            from_.set(
                "this",
                exp.Subquery(
                    this=timed.from_(from_.this.copy()),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                ),
            )
            touched = exp.Max(this=exp.column(TOUCHED, table=alias))
            select.append("expressions", exp.alias_(touched, TOUCHED))
        return _Planned(select, None, keys)

    def _stage_join(self, select: exp.Select, relations: list[_Relation]) -> _Relation:
        """An aggregate over a join of streams without windows. Spark runs such a join in
        append mode only and such an aggregate in update mode only, never both in one query,
        so the join runs as a query of its own: it writes its rows into a stage (the
        pipeline's internal stream, arroyo.connectors.stage), which the aggregate reads. Each
        column the aggregate uses becomes one of the stage's columns (the join computes
        ``A.auction.id``; the aggregate reads ``__c0``), so the stage holds only those.
        ``select`` is rewritten in place to read the stage; returns the stage's relation.
        An interval join needs no stage: the aggregate reads the join's columns from a
        subquery of its own query (see below)."""
        from arroyo.connectors.stage import STAGE_CONNECTOR

        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        spark = self.planner.spark
        # The result's column names stay what Spark names them now (``A.auction.category``
        # is ``category``, ``max(B.bid.price)`` is ``max(bid.price)``), not after the
        # rewrite below.
        names = spark.sql(select.sql(dialect="spark")).schema.fieldNames()
        for p, name in zip(select.expressions, names, strict=False):
            if p.meta.get(_RANKED_ROWS):
                break  # a generator of several columns: the names no longer line up
            if not isinstance(p, exp.Alias):
                p.replace(exp.alias_(p.copy(), name, quoted=True))
        name = f"__stage{next(self.state.counter)}"
        alias = "__staged"
        # Names are matched as Spark matches them, ignoring case. An unqualified column is
        # keyed by the relation that has it, so that ``customer`` and ``o.customer`` are one
        # stage column.
        aliases = {r.alias.lower() for r in relations}
        owners = {c.lower(): r.alias.lower() for r in relations for c, _ in r.columns}
        outputs = {p.alias_or_name.lower() for p in select.expressions}
        having = select.args.get("having")
        computed: dict[str, exp.Expression] = {}
        for part in [*select.expressions, select.args.get("group"), having]:
            for col in list(part.find_all(exp.Column)) if part is not None else []:
                if col.find_ancestor(exp.Select) is not select or col.is_star:
                    continue
                qualifier = col.args.get("db") or col.args.get("table")
                head = (qualifier.name if qualifier is not None else col.name).lower()
                if head not in aliases and head not in owners:
                    continue  # a projection's alias, a lambda's variable
                if part is having and qualifier is None and head in outputs:
                    continue  # HAVING names the select list's columns first
                key = col.sql(dialect="spark").lower().replace("`", "")
                if qualifier is None or head not in aliases:
                    key = f"{owners.get(head, '')}.{key}"
                if key not in computed:
                    computed[key] = col.copy()
                stage_column = f"__c{list(computed).index(key)}"
                col.replace(exp.column(stage_column, table=alias, quoted=True))
        join = exp.select(
            *[exp.alias_(e, f"__c{i}", quoted=True) for i, e in enumerate(computed.values())]
        ).from_(from_.this.copy())
        join.set("joins", [j.copy() for j in select.args.get("joins") or []])
        where = select.args.get("where")
        if where is not None:
            join.set("where", where.copy())
        self._check_unwindowed_joins(join, relations)
        self._bound_unwindowed_joins(join, relations)
        interval_join = self._interval_join(join, relations)
        join_sql = self._projection(join, relations).node.sql(dialect="spark")
        schema = self.planner.analyse(self.state, join_sql, select)
        if interval_join is not None:
            # Arroyo's interval join runs in append mode as Spark's flatMapGroupsWithState,
            # which Spark lets an update-mode aggregate follow in the same query: no stage,
            # so the pairs go straight to the aggregate's partial aggregation rather than
            # through Parquet files and a second query (Nexmark q4 and q9).
            self.state.fused_views.add(interval_join)
            from_.set(
                "this",
                exp.Subquery(
                    this=sqlglot.parse_one(join_sql, read="spark"),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                ),
            )
            select.set("joins", None)
            select.set("where", None)
            return _Relation(alias, _columns(schema), None)
        spec = TableSpec(
            name,
            STAGE_CONNECTOR,
            "source",
            {},
            [
                ColumnSpec(f.name, f.dataType.simpleString(), f.nullable)
                for f in schema.fields
                if f.name != EVENT_TIME
            ],
        )
        relation = self._add_stage(spec, SinkQuery(spec, join_sql))
        from_.set("this", exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=alias)))
        select.set("joins", None)
        select.set("where", None)
        return replace(relation, alias=alias)

    def _interval_join(self, select: exp.Select, relations: list[_Relation]) -> str | None:
        """Runs a join of two streams through Arroyo's interval join when its condition bounds
        each side's event time against the other's (after _bound_unwindowed_joins, every join
        of two streams with event times whose ON it could extend): the pairs with equal keys
        and times within the bounds, from state that holds a key's rows of both sides in one
        value (IntervalJoin.java says why that is cheaper than Spark's join). The rest of the
        condition (ON and WHERE) filters the pairs. ``select`` is rewritten in place to read
        the join's view, each input a struct column named by its alias (``A.auction.id`` reads
        as before); returns the view's name. Joins in any other form are left to Spark."""
        joins = select.args.get("joins") or []
        from_ = select.args.get("from_") or select.args.get("from")
        if len(relations) != 2 or len(joins) != 1 or from_ is None:
            return None
        join = joins[0]
        on = join.args.get("on")
        left, right = relations
        if (
            on is None
            or join.args.get("side")
            or (join.args.get("kind") or "").upper() not in ("", "INNER")
            or left.static
            or right.static
            or not (left.has_event_time and right.has_event_time)
            or left.alias.lower() == right.alias.lower()
        ):
            return None
        aliases = {left.alias.lower(): left.alias, right.alias.lower(): right.alias}
        owners: dict[str, str] = {}
        for rel in relations:
            for name, _ in rel.columns:
                owners[name.lower()] = "" if name.lower() in owners else rel.alias
        parts: list[exp.Expression] = [*select.expressions, on]
        where = select.args.get("where")
        if where is not None:
            parts.append(where)
        for part in parts:
            for col in list(part.find_all(exp.Column)):
                if col.find_ancestor(exp.Select) is not select or col.is_star:
                    continue
                head = col.parts[0].name.lower()
                if head in aliases and len(col.parts) > 1:
                    continue  # qualified (a lone name is a column, even one named as an alias)
                owner = owners.get(head)
                if owner == "":
                    return None  # ambiguous: Spark's join reports it
                if owner is not None:
                    qualified = f"{quote_name(owner)}.{col.sql(dialect='spark')}"
                    col.replace(sqlglot.parse_one(qualified, read="spark"))
        # Read again: a column qualified above may have been one of these nodes itself.
        on = join.args["on"]
        where = select.args.get("where")
        parts = [*select.expressions, on, *([where] if where is not None else [])]
        # The fields each side's rows carry through the join's state: those the query reads
        # (the join cannot see which the query drops after it, as Spark's join can).
        paths: dict[str, list[list[str]]] = {a: [[EVENT_TIME]] for a in aliases}
        for part in parts:
            for col in part.find_all(exp.Column):
                names = [p.name for p in col.parts]
                if col.find_ancestor(exp.Select) is select and names[0].lower() in aliases:
                    paths[names[0].lower()].append(names[1:])
        keys = None
        lower, upper = -math.inf, math.inf
        for conjunct in _conjuncts(on):
            if isinstance(conjunct, exp.EQ) and keys is None:
                sides = {
                    (c.parts[0].name.lower() if len(c.parts) > 1 else ""): c
                    for c in (conjunct.this, conjunct.expression)
                    if isinstance(c, exp.Column)
                }
                if set(sides) == {left.alias.lower(), right.alias.lower()}:
                    keys = (sides[left.alias.lower()], sides[right.alias.lower()])
            bound = _time_difference(conjunct, left.alias, right.alias)
            if bound is not None:
                at_least, offset = bound
                if at_least:
                    lower = max(lower, offset)
                else:
                    upper = min(upper, offset)
        if keys is None or math.isinf(lower) or math.isinf(upper):
            return None
        spark = self.planner.spark
        # Conditions on one input's columns alone filter that input before the join (as
        # Spark's optimizer would push them, which it cannot through the interval join): rows
        # they drop never reach its state. They stay in the condition on the pairs too.
        conditions = _conjuncts(on) + (_conjuncts(where.this) if where is not None else [])
        filters: dict[str, list[str]] = {a: [] for a in aliases}
        for condition in conditions:
            heads = {c.parts[0].name.lower() for c in condition.find_all(exp.Column)}
            if (
                len(heads) == 1
                and heads <= set(aliases)
                and not condition.find(exp.Subquery, exp.Rand, exp.Window, exp.AggFunc)
            ):
                filters[heads.pop()].append(f"({condition.sql(dialect='spark')})")

        def inner(source: exp.Expression) -> str:
            if isinstance(source, exp.Subquery):
                return str(source.this.sql(dialect="spark"))
            return f"SELECT * FROM {quote_name(source.name)}"

        def side(rel: _Relation, key: exp.Column, tag: str) -> tuple[str, str | None]:
            """The side's columns (key, event time, its struct) and its filter, if any."""
            alias = quote_name(rel.alias)
            mine = filters[rel.alias.lower()]
            columns = (
                f"{key.sql(dialect='spark')} AS __{tag}k, {alias}.{EVENT_TIME} AS __{tag}t, "
                f"{_fields_struct(alias, paths[rel.alias.lower()])} AS {alias}"
            )
            return columns, " AND ".join(mine) if mine else None

        def query(columns: str, source: str, alias: str, condition: str | None) -> str:
            where = f" WHERE {condition}" if condition else ""
            return f"SELECT {columns} FROM ({source}) AS {quote_name(alias)}{where}"

        (left_columns, left_filter), (right_columns, right_filter) = (
            side(left, keys[0], "l"),
            side(right, keys[1], "r"),
        )
        left_source, right_source = inner(from_.this), inner(join.this)
        left_sql = query(left_columns, left_source, left.alias, left_filter)
        right_sql = query(right_columns, right_source, right.alias, right_filter)
        shared_sql = None
        if left_source == right_source:
            # A self-join: one read of the relation gives both sides' rows. The right side's
            # columns are restated over the left's alias.
            right_columns = _requalified(right_columns, right.alias, left.alias)
            right_filter = right_filter and _requalified(right_filter, right.alias, left.alias)
            both = (
                f"{left_columns}, coalesce({left_filter or 'TRUE'}, FALSE) AS __lon, "
                f"{right_columns}, coalesce({right_filter or 'TRUE'}, FALSE) AS __ron"
            )
            either = (
                f"({left_filter}) OR ({right_filter})" if left_filter and right_filter else None
            )
            shared_sql = query(both, left_source, left.alias, either)
        key_types = [
            spark.sql(q).schema["__lk" if i == 0 else "__rk"].dataType
            for i, q in enumerate((left_sql, right_sql))
        ]
        if key_types[0] != key_types[1]:
            return None  # Spark's join coerces them to a common type

        def seconds(us: float) -> str:
            return f"INTERVAL '{us / 1_000_000:.6f}' SECOND"

        name = f"__interval_join{next(self.state.counter)}"
        view = ViewSpec(
            name,
            f"SELECT * FROM ({left_sql}) AS __l JOIN ({right_sql}) AS __r "
            f"ON __l.__lk = __r.__rk AND __r.__rt >= __l.__lt + {seconds(lower)} "
            f"AND __r.__rt <= __l.__lt + {seconds(upper)}",
            IntervalJoinSpec(left_sql, right_sql, int(lower), int(upper), shared_sql),
        )
        from arroyo.engine.build import register_view

        self.planner.analyse(self.state, view.sql, select)
        register_view(spark, view)
        self.state.views.append(view)
        self.state.view_windows[name] = None
        self.state.view_updating[name] = None
        residual = on.copy() if where is None else exp.and_(exp.paren(on.copy()), where.this)
        from_.set("this", exp.Table(this=exp.to_identifier(name)))
        select.set("joins", None)
        select.set("where", exp.Where(this=residual))
        return name

    def _fused_changes(self, select: exp.Select, input_: _Relation) -> _Relation | None:
        """An aggregate over an updating aggregate, both in one query: the inner aggregate
        runs as Arroyo's retracting aggregate (ChangesSpec), which gives its changes as signed
        rows, and ``select`` is rewritten in place to read them. Where the inner aggregate is
        not a plain GROUP BY of count, sum, avg, min and max over values the retracting
        aggregate takes (or has a HAVING), returns None: the changes go through a stage
        (_stage_changes)."""
        from pyspark.errors import IllegalArgumentException

        from arroyo.engine.build import changes

        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        source = from_.this
        if isinstance(source, exp.Subquery):
            inner = source.this
        else:
            view = next((v for v in self.state.views if v.name == source.name), None)
            if view is None or view.interval_join is not None or view.changes is not None:
                return None
            inner = sqlglot.parse_one(view.sql, read="spark")
        group = inner.args.get("group") if isinstance(inner, exp.Select) else None
        if group is None or inner.args.get("having") is not None:
            return None
        grouped = {g.sql(dialect="spark") for g in group.expressions}
        keys: list[exp.Expr] = []
        arguments: list[exp.Expr] = []
        kinds: list[str] = []
        names: list[str] = []
        ttl = False
        for projection in inner.expressions:
            name, value = projection.alias_or_name, projection.unalias()
            if name == TOUCHED:
                ttl = True
            elif name in (KEEP, EVENT_TIME):
                return None  # a HAVING's flag; an event time, which the stage's rows drop
            elif value.sql(dialect="spark") in grouped:
                keys.append(exp.alias_(value.copy(), name))
            else:
                plain = _plain_aggregate(value)
                if plain is None:
                    return None
                kind, argument = plain
                arguments.append(exp.alias_(argument.copy(), f"__a{len(arguments)}"))
                kinds.append(kind)
                names.append(name)
        named = {k.alias_or_name for k in keys}
        if len(keys) != len(grouped) or named != set(input_.updating or []):
            return None
        spark = self.planner.spark
        feed = inner.copy()
        feed.set("expressions", [*keys, *arguments])
        feed.set("group", None)
        ttl_ms = self.state.updating_ttl_us // 1000 if ttl else 0
        spec = ChangesSpec(feed.sql(dialect="spark"), len(keys), kinds, names, ttl_ms)
        try:
            fused = changes(spark, spec)
        except IllegalArgumentException:
            return None  # a function or type the retracting aggregate does not take
        # Its results must have the types Spark's aggregate gives them (the outer query reads
        # them as it would read Spark's).
        aggregate = spark.sql(inner.sql(dialect="spark")).schema
        if any(fused.schema[n].dataType != aggregate[n].dataType for n in names):
            return None
        name = f"__changes{next(self.state.counter)}"
        fused.createOrReplaceTempView(name)
        self.state.views.append(ViewSpec(name, inner.sql(dialect="spark"), changes=spec))
        self.state.view_windows[name] = None
        self.state.view_updating[name] = None
        self.state.fused_views.add(name)
        from_.set(
            "this",
            exp.Table(
                this=exp.to_identifier(name),
                alias=exp.TableAlias(this=exp.to_identifier(input_.alias)),
            ),
        )
        return _Relation(input_.alias, _columns(spark.table(name).schema), None)

    def _stage_changes(self, select: exp.Select, input_: _Relation) -> _Relation:
        """An aggregate over an updating result (Nexmark q4: the average, per category, of each
        auction's maximum bid, which changes while the auction is open). Spark cannot chain
        two aggregates in update mode, and the outer one must retract what a row contributed
        before it changed: the updating result is written into a stage as change records (a
        debezium changelog, as a sink would get it), and the aggregate reads the stage as a
        changelog source, weighing each row by its sign (_changelog_aggregate). ``select``
        is rewritten in place to read the stage; returns the stage's relation."""
        from arroyo.connectors.stage import STAGE_CONNECTOR

        assert input_.updating is not None
        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        source = from_.this
        if isinstance(source, exp.Subquery):
            query = source.this.sql(dialect="spark")
        else:
            query = f"SELECT * FROM {quote_name(source.name)}"
        fields = [f for f in self.planner.spark.sql(query).schema.fields]
        names = {f.name for f in fields}
        data = [f for f in fields if f.name not in _HIDDEN]
        columns = [ColumnSpec(f.name, f.dataType.simpleString(), f.nullable) for f in data]
        extra = [n for n in (KEEP, TOUCHED) if n in names]
        sql = (
            f"SELECT {', '.join(quote_name(n) for n in [*(f.name for f in data), *extra])} "
            f"FROM ({query}) AS `__changes`"
        )
        name = f"__stage{next(self.state.counter)}"
        spec = TableSpec(
            name,
            STAGE_CONNECTOR,
            "source",
            {},
            columns,
            FormatSpec("debezium_json"),
            primary_key=list(input_.updating),
        )
        writer = SinkQuery(
            replace(spec, role="sink"),
            sql,
            output_mode="update",
            key_columns=list(input_.updating),
            keep_column=KEEP if KEEP in names else None,
            updating_ttl_ms=self.state.updating_ttl_us // 1000 if TOUCHED in names else None,
            unchecked_chain=self.planner.reads_fused_view(self.state, sql),
        )
        relation = self._add_stage(spec, writer)
        from_.set(
            "this",
            exp.Table(
                this=exp.to_identifier(name),
                alias=exp.TableAlias(this=exp.to_identifier(input_.alias)),
            ),
        )
        return replace(relation, alias=input_.alias)

    def _add_stage(self, spec: TableSpec, writer: SinkQuery) -> _Relation:
        """Register a stage read by the query being planned, and the query that writes it."""
        from arroyo.engine.build import BuildSettings, reads_bounded_only, register_source

        spark = self.planner.spark
        spec = replace(spec, bounded=reads_bounded_only(spark.sql(writer.sql)))
        writer = replace(writer, sink=replace(spec, role="sink"))
        settings = BuildSettings(self.planner.state_dir, self.planner.parallelism, planning=True)
        register_source(spark, spec, settings)
        self.state.stages.append((spec, writer))
        return _Relation(spec.name, _columns(spark.table(spec.name).schema), None)

    def _reads_changelog(self, select: exp.Select) -> bool:
        """Whether the query reads a changelog source table directly."""
        from_ = select.args.get("from_") or select.args.get("from")
        source = from_.this if from_ is not None else None
        if not isinstance(source, exp.Table):
            return False
        known = self.state.tables.get(source.name)
        return known is not None and known.spec.is_changelog

    def _changelog_aggregate(
        self, select: exp.Select, relations: list[_Relation], *, signed: bool = False
    ) -> _Planned:
        """An aggregate over a changelog source: it reads the source's signed rows (a change
        as +1 for the row after and -1 for the row before) and weighs each by its sign, so an
        update or a delete retracts what the old row contributed. count, sum and avg retract
        this way; a group whose rows are all gone is deleted. ``signed``: the query already
        reads signed rows (_fused_changes)."""
        from_ = select.args.get("from_") or select.args.get("from")
        assert from_ is not None
        table = from_.this
        alias = table.alias_or_name
        if not signed:
            table.replace(
                exp.Table(
                    this=exp.to_identifier(signed_view(table.name)),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                )
            )
        sign = exp.column(SIGN, table=alias)
        aggregates = [n for n in select.find_all(exp.Func) if isinstance(n, exp.AggFunc)]
        for node in aggregates:
            node.replace(self._signed_aggregate(node, sign))
        present = exp.GT(this=exp.Sum(this=sign.copy()), expression=exp.Literal.number(0))
        having = select.args.get("having")
        condition = present if having is None else exp.and_(present, having.this.copy())
        select.set("having", exp.Having(this=condition))
        return self._updating_aggregate(select, relations)

    def _signed_aggregate(self, node: exp.Func, sign: exp.Expression) -> exp.Expression:
        def weight(value: exp.Expression) -> exp.Expression:
            return exp.If(
                this=exp.Is(this=value.copy(), expression=exp.Null()),
                true=exp.Literal.number(0),
                false=sign.copy(),
            )

        if isinstance(node, exp.Count):
            value = node.this
            if value is None or isinstance(value, exp.Star):
                return exp.Sum(this=sign.copy())
            return exp.Sum(this=weight(value))
        if isinstance(node, exp.Sum):
            return exp.Sum(
                this=exp.Mul(this=exp.Paren(this=node.this.copy()), expression=sign.copy())
            )
        if isinstance(node, exp.Avg):
            total = exp.Sum(
                this=exp.Mul(this=exp.Paren(this=node.this.copy()), expression=sign.copy())
            )
            count = exp.Sum(this=weight(node.this))
            return exp.Div(
                this=exp.Cast(this=total, to=exp.DataType.build("DOUBLE")),
                expression=exp.Nullif(this=count, expression=exp.Literal.number(0)),
            )
        # count(DISTINCT x) arrives here already rewritten (see arroyo.sql.functions).
        name = "count(DISTINCT ...)" if isinstance(node, exp.ArrayUniqueAgg) else f"{node.key}()"
        raise _error(
            "changelog_aggregate",
            f"{name} cannot retract rows of a changelog (updates and deletes); "
            f"over a changelog use count, sum or avg",
            _span_of(self.text, node),
        )

    def _updating_projection(self, select: exp.Select, input_: _Relation) -> _Planned:
        """A projection over an updating result: updating too, keyed the same way; its WHERE
        joins the input's qualification."""
        assert input_.updating is not None
        names = [p.alias_or_name for p in select.expressions]
        for key in input_.updating:
            if key not in names:
                raise _error(
                    "updating_key_dropped",
                    f"the updating input is keyed by '{key}', which this query must select",
                    _span_of(self.text, select),
                )
        conditions: list[exp.Expression] = []
        if any(name == KEEP for name, _ in input_.columns):
            conditions.append(exp.column(KEEP, table=input_.alias))
        where = select.args.get("where")
        if where is not None:
            select.set("where", None)
            conditions.append(exp.Coalesce(this=where.this.copy(), expressions=[exp.false()]))
        if conditions and KEEP not in names:
            select.append("expressions", exp.alias_(exp.and_(*conditions), KEEP))
        if any(name == TOUCHED for name, _ in input_.columns) and TOUCHED not in names:
            select.append("expressions", exp.column(TOUCHED, table=input_.alias))
        return _Planned(select, None, list(input_.updating))

    def _projection(self, select: exp.Select, relations: list[_Relation]) -> _Planned:
        names = {p.alias_or_name for p in select.expressions}
        with_time = [r for r in relations if r.has_event_time]
        if with_time and EVENT_TIME not in names:
            if len(relations) == 1:
                select.append("expressions", exp.column(EVENT_TIME))
            else:
                times = [exp.column(EVENT_TIME, table=r.alias) for r in with_time]
                joins = select.args.get("joins") or []
                if len(times) > 2 and not any(j.args.get("side") for j in joins):
                    # Inner joins only: the first input's time is never NULL, so it is the
                    # COALESCE. Spark takes one event-time column per input of a stream-stream
                    # join (MULTIPLE_EVENT_TIME_COLUMNS): naming the others here would keep both
                    # of the first join's times in the second join's input.
                    times = times[:1]
                select.append(
                    "expressions",
                    exp.alias_(
                        exp.Coalesce(this=times[0], expressions=times[1:])
                        if len(times) > 1
                        else times[0],
                        EVENT_TIME,
                    ),
                )
        window = None
        for rel in relations:
            if rel.window is None:
                continue
            name, spec = rel.window
            for p in select.expressions:
                target = p.unalias()
                if isinstance(target, exp.Column) and target.name == name:
                    window = (p.alias_or_name, spec)
                    break
        return _Planned(select, window)


def _time_fields(spec: TableSpec) -> frozenset[str]:
    """The columns of a table equal to its event time wherever they are set."""
    if spec.event_time_column:
        return frozenset({spec.event_time_column.lower()})
    conn = connector(spec.connector) if spec.connector else None
    if conn is None or not conn.has_source_time:
        return frozenset()
    return frozenset(f.lower() for f in conn.event_time_fields)


_TIME_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE)


def _join_time_bounds(select: exp.Select, relations: list[_Relation]) -> dict[tuple[str, str], int]:
    """Adds to ``select``'s joins, in terms of ``_timestamp``, each comparison of its ON and
    WHERE conditions between two inputs' event-time columns (a constant interval added or
    subtracted allowed), in the ON of the later input's join. Returns the bounds found:
    ``(a, b) -> c`` when input ``a``'s event time is at least ``b``'s plus ``c`` microseconds
    (the largest ``c`` where several say so)."""
    by_alias = {r.alias.lower(): r for r in relations if r.time_fields and r.has_event_time}
    if len(by_alias) < 2:
        return {}
    order = {r.alias.lower(): i for i, r in enumerate(relations)}
    joins = select.args.get("joins") or []
    where = select.args.get("where")
    conditions = [j.args.get("on") for j in joins] + [where.this if where else None]
    comparisons: list[tuple[bool, exp.Expression, exp.Expression]] = []
    for condition in conditions:
        if condition is None:
            continue
        for conjunct in _conjuncts(condition):
            if isinstance(conjunct, exp.Between):
                comparisons.append((True, conjunct.this, conjunct.args["low"]))
                comparisons.append((False, conjunct.this, conjunct.args["high"]))
            elif isinstance(conjunct, _TIME_COMPARISONS):
                at_least = isinstance(conjunct, exp.GT | exp.GTE)
                comparisons.append((at_least, conjunct.this, conjunct.expression))
    bounds: dict[tuple[str, str], int] = {}
    for at_least, left, right in comparisons:
        lt, rt = _event_time_term(left, by_alias), _event_time_term(right, by_alias)
        if lt is None or rt is None or lt[0] == rt[0]:
            continue
        (l_alias, l_expr, l_us), (r_alias, r_expr, r_us) = lt, rt
        on = joins[max(order[l_alias], order[r_alias]) - 1].args.get("on")
        if on is None:
            continue  # USING: no condition to extend
        # left >= right: l + l_us >= r + r_us, so l >= r + (r_us - l_us); left <= right: the
        # other way round. Kept non-strict: strictness makes a bound no looser.
        added: exp.Expression
        if at_least:
            key, offset = (l_alias, r_alias), r_us - l_us
            added = exp.GTE(this=l_expr, expression=r_expr)
        else:
            key, offset = (r_alias, l_alias), l_us - r_us
            added = exp.LTE(this=l_expr, expression=r_expr)
        bounds[key] = max(bounds.get(key, offset), offset)
        on.replace(exp.and_(exp.paren(on.copy()), added))
    return {(by_alias[a].alias, by_alias[b].alias): c for (a, b), c in bounds.items()}


def _event_time_term(
    node: exp.Expression, by_alias: Mapping[str, _Relation]
) -> tuple[str, exp.Expression, int] | None:
    """``(input, the same in terms of its _timestamp, interval added in microseconds)`` when
    ``node`` is an input's event-time column, perhaps plus or minus a constant interval."""
    shifted = _interval_shift(node)
    if shifted is None:
        return None
    column, offset = shifted
    if not isinstance(column, exp.Column):
        return None
    parts = [p.name for p in column.parts]
    if len(parts) < 2:
        return None
    alias = parts[0].lower()
    rel = by_alias.get(alias)
    if rel is None or ".".join(parts[1:]).lower() not in rel.time_fields:
        return None
    time = exp.column(EVENT_TIME, table=rel.alias)
    if column is node:
        return alias, time, 0
    replaced = node.copy()
    replaced.this.replace(time)
    return alias, replaced, offset


def _interval_shift(node: exp.Expression) -> tuple[exp.Expression, int] | None:
    """``(x, c)`` for ``x + INTERVAL`` / ``x - INTERVAL`` (``c`` the signed interval in
    microseconds), ``(node, 0)`` for anything else; None for an interval of no fixed length."""
    if not (isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval)):
        return node, 0
    try:
        offset = interval_us(node.expression)
    except DurationError:
        return None
    return node.this, -offset if isinstance(node, exp.Sub) else offset


def _requalified(sql: str, alias: str, to: str) -> str:
    """``sql`` (Spark SQL: a list of columns, or a condition) with the columns qualified by
    ``alias`` qualified by ``to`` instead (``B.bid.auction`` becomes ``A.bid.auction``)."""
    tree = sqlglot.parse_one(f"SELECT {sql}", read="spark")
    for col in tree.find_all(exp.Column):
        for arg in ("catalog", "db", "table"):
            head = col.args.get(arg)
            if head is not None:
                if head.name.lower() == alias.lower():
                    col.set(arg, exp.to_identifier(to))
                break
    assert isinstance(tree, exp.Select)
    return ", ".join(e.sql(dialect="spark") for e in tree.expressions)


def _fields_struct(alias: str, paths: list[list[str]]) -> str:
    """A struct of ``alias``'s fields at ``paths`` (names below it; a path that is a prefix of
    another takes its whole field), nested as they are: ``A.auction.id`` reads the same from
    it as from the relation."""
    if any(not path for path in paths):
        return f"struct({alias}.*)"  # the whole row
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for i, name in enumerate(path):
            key = name.lower()
            entry = node.setdefault(key, [name, {}, False])
            if i == len(path) - 1:
                entry[2] = True
            node = entry[1]

    def build(prefix: str, node: dict[str, Any]) -> str:
        fields = []
        for name, children, whole in node.values():
            ref = f"{prefix}.{quote_name(name)}"
            value = ref if whole or not children else build(ref, children)
            fields.append(f"{exp.Literal.string(name).sql(dialect='spark')}, {value}")
        return f"named_struct({', '.join(fields)})"

    return build(alias, tree)


def _time_difference(condition: exp.Expression, left: str, right: str) -> tuple[bool, int] | None:
    """``(True, c)`` when ``condition`` says ``right._timestamp - left._timestamp >= c``
    (microseconds), ``(False, c)`` when it says ``<= c``; None for anything else."""

    def term(node: exp.Expression) -> tuple[str, int] | None:
        shifted = _interval_shift(node.this if isinstance(node, exp.Paren) else node)
        if shifted is None:
            return None
        node, offset = shifted
        if not isinstance(node, exp.Column) or node.name != EVENT_TIME or len(node.parts) != 2:
            return None
        return node.parts[0].name.lower(), offset

    if not isinstance(condition, _TIME_COMPARISONS):
        return None
    a, b = term(condition.this), term(condition.expression)
    if a is None or b is None or {a[0], b[0]} != {left.lower(), right.lower()}:
        return None
    # a_t + a_off >= b_t + b_off (or <=); turned around so that right's time is on the left.
    at_least = isinstance(condition, exp.GT | exp.GTE)
    if a[0] == left.lower():
        (a, b), at_least = (b, a), not at_least
    # right_t - left_t >= (or <=) left_off - right_off
    return at_least, b[1] - a[1]


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    """The terms of a condition's top-level ANDs, through parentheses."""
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


def _resolve_group_item(select: exp.Select, item: exp.Expression) -> exp.Expression:
    """A GROUP BY item as the expression it groups by: a position or a select alias resolved."""
    if isinstance(item, exp.Literal) and not item.is_string:
        index = int(item.name) - 1
        if 0 <= index < len(select.expressions):
            target: exp.Expression = select.expressions[index].unalias()
            return target
    if isinstance(item, exp.Column) and not item.table:
        for p in select.expressions:
            if isinstance(p, exp.Alias) and p.alias == item.name:
                aliased: exp.Expression = p.this
                return aliased
    return item


def _per_window_extreme(
    node: exp.Query | None, view: str, window: str
) -> tuple[bool, str, str] | None:
    """If ``node`` (a windowed view's rewritten query) is ``SELECT window, max(x) AS m FROM
    view GROUP BY window`` (or min): whether max, x, and m."""
    inner = _aggregate_inner(node, window)
    if inner is None or inner.args.get("where"):
        return None
    source = inner.args["from_"].this
    if not isinstance(source, exp.Table) or source.name != view or source.args.get("db"):
        return None
    group = inner.args.get("group")
    if group is None or any(
        not (isinstance(g, exp.Column) and g.name == window) for g in group.expressions
    ):
        return None
    extremes = []
    for projection in inner.expressions:
        value = projection.unalias()
        if isinstance(value, exp.Max | exp.Min) and isinstance(value.this, exp.Column):
            if value.args.get("expressions"):
                return None
            extremes.append((isinstance(value, exp.Max), value.this.name, projection.alias_or_name))
        elif not (isinstance(value, exp.Column) and value.name == window):
            return None
    return extremes[0] if len(extremes) == 1 else None


def _distinct_windowed(
    node: exp.Query | None, window: str
) -> tuple[exp.Select, dict[str, exp.Expression]] | None:
    """If ``node`` (a windowed view's rewritten query) groups by exactly the columns it selects
    and aggregates nothing (its rows are the distinct rows of each window): its inner
    aggregate query, and its grouped columns other than the window's, by name."""
    inner = _aggregate_inner(node, window)
    group = inner.args.get("group") if inner is not None else None
    if inner is None or group is None or any(_has_aggregate(p) for p in inner.expressions):
        return None
    keys = {_resolve_group_item(inner, g).sql() for g in group.expressions}
    if keys != {p.unalias().sql() for p in inner.expressions}:
        return None
    windows = {window, _WINDOW_HELPER}
    payload = {
        p.alias_or_name: p.unalias() for p in inner.expressions if p.alias_or_name not in windows
    }
    return (inner, payload) if payload else None


def _aggregate_inner(node: exp.Query | None, window: str) -> exp.Select | None:
    """The aggregate query inside a windowed aggregate view's rewritten query (``SELECT ...
    FROM (aggregate) AS __aggN``), if ``node`` is one with nothing else around it."""
    if not isinstance(node, exp.Select) or node.args.get("joins") or node.args.get("where"):
        return None
    from_ = node.args.get("from_")
    subquery = from_.this if from_ is not None else None
    if not isinstance(subquery, exp.Subquery) or not isinstance(subquery.this, exp.Select):
        return None
    inner = subquery.this
    for clause in ("having", "qualify", "joins", "distinct", "with_"):
        if inner.args.get(clause):
            return None
    if window not in {p.alias_or_name for p in inner.expressions}:
        return None
    return inner


def _joined(
    select: exp.Select, relations: list[_Relation]
) -> list[tuple[exp.Join, _Relation, bool]]:
    """Each join of ``select`` with the relation it adds, and whether the relations it joins
    that one to (those before it) include a stream."""
    joined = []
    streaming = not relations[0].static
    for join, rel in zip(select.args.get("joins") or [], relations[1:], strict=False):
        joined.append((join, rel, streaming))
        streaming = streaming or not rel.static
    return joined


def _rank_limit(condition: exp.Expression, rank: str) -> int | None:
    """N, if ``condition`` is ``rank <= N``, ``rank < N + 1`` or ``rank = N`` for N = 1."""
    if not isinstance(condition, exp.LTE | exp.LT | exp.EQ):
        return None
    column, limit = condition.this, condition.expression
    if not (isinstance(column, exp.Column) and column.name == rank):
        return None
    if not (isinstance(limit, exp.Literal) and not limit.is_string and limit.name.isdigit()):
        return None
    n = int(limit.name) - (1 if isinstance(condition, exp.LT) else 0)
    if isinstance(condition, exp.EQ) and n != 1:
        return None
    return n


def _note_window_root(state: _State, view: ViewSpec, planned: _Planned) -> None:
    """Record the view's root if it is window-local (see _Rewriter._window_local_join): a
    windowed aggregate over unwindowed input is its own root; a windowed query over exactly one
    window-local view shares that view's root."""
    if planned.window is None or planned.updating is not None or planned.batch_input is not None:
        return
    tables = {t.name for t in planned.node.find_all(exp.Table)}
    if len(tables) != 1:
        return
    (table,) = tables
    if table in state.view_roots:
        state.view_roots[view.name] = state.view_roots[table]
    elif state.view_windows.get(table) is None and state.view_updating.get(table) is None:
        state.view_roots[view.name] = view.name
    else:
        return
    state.view_nodes[view.name] = planned.node.copy()


def batch_view_name(view: str) -> str:
    """The name under which a streaming view's micro-batch is seen by per-batch queries."""
    return f"{view}__batch"


# The aggregates Arroyo's retracting aggregate runs (_Rewriter._fused_changes).
_RETRACTING_KINDS: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


def _plain_aggregate(value: exp.Expression) -> tuple[str, exp.Expression] | None:
    """A call of count, sum, avg, min or max over a plain argument (``count(*)`` counting a
    constant) as its kind and argument; None for any other expression (DISTINCT, FILTER,
    several arguments, an aggregate or window inside)."""
    kind = _RETRACTING_KINDS.get(type(value))
    argument = value.this if kind else None
    if kind == "count" and (argument is None or isinstance(argument, exp.Star)):
        argument = exp.Literal.number(1)
    if (
        kind is None
        or argument is None
        or value.args.get("expressions")
        or isinstance(argument, exp.Distinct)
        or argument.find(exp.AggFunc, exp.Window)
    ):
        return None
    return kind, argument


def _columns(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _has_aggregate(node: exp.Expression) -> bool:
    return any(agg.find_ancestor(exp.Window) is None for agg in node.find_all(exp.AggFunc))
