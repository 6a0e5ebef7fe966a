"""What the planner tells a user about their SQL: one catalogue of error codes, and diagnostics
pointing into the script (Spark's analysis errors among them).

A code is a contract: tests, the API and its clients match on it, so a code once given keeps
its spelling; the message beside it is free text and may change.
"""

from __future__ import annotations

import enum
from typing import Any

from sqlglot import exp

from arroyo.errors import Diagnostic, PlanningError, Span
from arroyo.sql.text import SourceText


class ErrorCode(enum.StrEnum):
    """Every code a planning diagnostic carries, each with what it means."""

    description: str

    def __new__(cls, code: str, description: str) -> ErrorCode:
        member = str.__new__(cls, code)
        member._value_ = code
        member.description = description
        return member

    # -- the script --------------------------------------------------------------------------
    DUPLICATE_TABLE = "duplicate_table", "a table or view of that name is already defined"
    UNKNOWN_TABLE = "unknown_table", "no table, view or relation of that name"
    UNKNOWN_SETTING = "unknown_setting", "SET of a setting the planner does not know"
    BAD_SETTING = "bad_setting", "SET of a known setting to a value it cannot take"
    INSERT_INTO_SOURCE = "insert_into_source", "INSERT INTO a source table"
    READ_FROM_SINK = "read_from_sink", "a query reads a sink table"
    NO_SINK = "no_sink", "the script writes nowhere: no INSERT INTO and no SELECT"
    RESERVED_NAME = "reserved_name", "a column named with the reserved prefix __arroyo"

    # -- tables ------------------------------------------------------------------------------
    UNKNOWN_CONNECTOR = "unknown_connector", "connector names no connector"
    UNKNOWN_CONNECTION_PROFILE = (
        "unknown_connection_profile",
        "connection_profile names no saved connection profile",
    )
    MISSING_OPTION = "missing_option", "a table lacks an option it needs (or has no connector)"
    UNKNOWN_OPTION = "unknown_option", "an option the table's connector does not take"
    BAD_OPTION = "bad_option", "an option's value is not one its connector or format takes"
    UNKNOWN_FORMAT = "unknown_format", "a format that does not exist or the connector cannot use"
    UNKNOWN_METADATA = "unknown_metadata", "METADATA FROM a key the connector does not give"
    BAD_METADATA_TYPE = "bad_metadata_type", "a metadata column of a type its key does not have"
    BAD_WATERMARK = "bad_watermark", "WATERMARK FOR not over a TIMESTAMP as `ts - INTERVAL ...`"
    CHANGELOG_NEEDS_PRIMARY_KEY = (
        "changelog_needs_primary_key",
        "a table of change records (debezium_json) without its PRIMARY KEY",
    )
    LOOKUP_TABLE = "lookup_table", "a lookup table with an event time, change records or no rows"
    MEMORY_TABLE_COLUMNS = "memory_table_columns", "a memory table that declares no columns"
    MEMORY_TABLE_WRITTEN_TWICE = (
        "memory_table_written_twice",
        "a second INSERT INTO a memory table",
    )
    MEMORY_TABLE_READ_BEFORE_WRITE = (
        "memory_table_read_before_write",
        "a memory table read before its INSERT",
    )
    COLUMN_COUNT_MISMATCH = (
        "column_count_mismatch",
        "an INSERT gives another number of columns than its table has",
    )

    # -- queries -----------------------------------------------------------------------------
    INVALID_QUERY = "invalid_query", "Spark's analysis refused the query (its message says why)"
    UNKNOWN_COLUMN = "unknown_column", "a column that does not exist where it is named"
    UNKNOWN_FUNCTION = "unknown_function", "a function neither Spark nor the UDFs define"
    BAD_FUNCTION_CALL = "bad_function_call", "a function called with arguments it cannot take"
    UNSUPPORTED_QUERY = "unsupported_query", "a kind of query or FROM item streams cannot run"
    UNSUPPORTED_ORDER = "unsupported_order", "ORDER BY over an unbounded stream"
    UNSUPPORTED_LIMIT = "unsupported_limit", "LIMIT over an unbounded stream"
    UNSUPPORTED_UNION = "unsupported_union", "UNION without ALL"
    NO_EVENT_TIME = "no_event_time", "a window over input without an event time"

    # -- windows -----------------------------------------------------------------------------
    BAD_WINDOW = "bad_window", "tumble, hop or session with wrong or non-positive intervals"
    BAD_HOP = "bad_hop", "a hop whose width is not a multiple of its slide"
    WINDOW_OUTSIDE_GROUP_BY = "window_outside_group_by", "a window call outside GROUP BY"
    MISMATCHED_WINDOWS = "mismatched_windows", "two different windows in one query"
    AGGREGATE_WITHOUT_WINDOW = (
        "aggregate_without_window",
        "an aggregate over windowed input that neither groups by its window nor windows again",
    )

    # -- window functions (ROW_NUMBER and the like) ------------------------------------------
    WINDOW_FUNCTION_INPUT = (
        "window_function_input",
        "a window function over input it cannot rank, or an aggregate or join after one",
    )
    WINDOW_FUNCTION_PARTITION = (
        "window_function_partition",
        "a window function over windowed input not partitioned by its window",
    )
    WINDOW_FUNCTION_UNION = "window_function_union", "UNION ALL of window-function results"
    WINDOW_FUNCTION_SINK = (
        "window_function_sink",
        "a window function's result into a sink that cannot take it",
    )
    UNWINDOWED_TOP_N = "unwindowed_top_n", "a top-N without windows in a form it cannot take"

    # -- joins and lookup tables -------------------------------------------------------------
    UNWINDOWED_OUTER_JOIN = "unwindowed_outer_join", "an outer join of streams without windows"
    JOIN_WITHOUT_EQUALITY = (
        "join_without_equality",
        "a join of streams without windows and without an equality of columns",
    )
    LOOKUP_OUTER_JOIN = (
        "lookup_outer_join",
        "a join that would keep or decide a lookup table's rows on a stream's",
    )
    LOOKUP_UNION = "lookup_union", "UNION ALL of a stream and a lookup table"
    LOOKUP_ONLY = "lookup_only", "a query into a sink that reads lookup tables alone"

    # -- updating results --------------------------------------------------------------------
    UPDATING_INPUT = (
        "updating_input",
        "an aggregate or a join over an updating result that it cannot run",
    )
    UPDATING_UNION = "updating_union", "an updating result beside other rows into one sink"
    UPDATING_INTO_APPEND_SINK = (
        "updating_into_append_sink",
        "an updating result into a sink whose format cannot carry updates",
    )
    UPDATING_UNSUPPORTED_SINK = (
        "updating_unsupported_sink",
        "an updating result into a connector that cannot write one",
    )
    UPDATING_JOIN_SHARED = (
        "updating_join_shared",
        "two queries read one staged aggregate input (a stage has one reader)",
    )
    CHANGELOG_AGGREGATE = (
        "changelog_aggregate",
        "an aggregate over a changelog that cannot retract rows (only count, sum and avg can)",
    )


def diagnostic(code: ErrorCode, message: str, span: Span | None) -> Diagnostic:
    """A diagnostic carrying ``code`` as the plain string clients see."""
    return Diagnostic(code.value, message, span)


def error(code: ErrorCode, message: str, span: Span | None) -> PlanningError:
    """A planning error of one diagnostic; raise it."""
    return PlanningError([diagnostic(code, message, span)])


def span_of(text: SourceText, node: exp.Expr) -> Span | None:
    """Where ``node`` starts in the script: its own position, else its first child's that has
    one (nodes the planner makes have none)."""
    for candidate in (node, node.this if isinstance(node.this, exp.Expression) else None):
        if candidate is not None and "start" in candidate.meta:
            return text.span(int(candidate.meta["start"]))
    for child in node.walk():
        if isinstance(child, exp.Expression) and "start" in child.meta:
            return text.span(int(child.meta["start"]))
    return None


def spark_diagnostic(text: SourceText, err: Any, original: exp.Expr) -> PlanningError:
    """Spark's AnalysisException or ParseException, raised by analysing the rewritten form of
    ``original``, as a diagnostic on ``original``: an unknown column or function is pointed
    at by name; anything else keeps the first line of Spark's message."""
    condition = (err.getCondition() if hasattr(err, "getCondition") else None) or ""
    params = err.getMessageParameters() or {}
    span = span_of(text, original)
    # The first line that says something: a ParseException's text starts with a newline.
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    message = lines[0].split(" SQLSTATE")[0] if lines else condition or "Spark refused it"
    if condition.startswith("UNRESOLVED_COLUMN"):
        name = params.get("objectName", "").split(".")[-1].strip("`")
        for col in original.find_all(exp.Column):
            if col.name == name:
                span = span_of(text, col) or span
                break
        proposal = params.get("proposal", "")
        hint = f" (did you mean one of: {proposal}?)" if proposal else ""
        return error(ErrorCode.UNKNOWN_COLUMN, f"unknown column '{name}'{hint}", span)
    if condition.startswith("UNRESOLVED_ROUTINE"):
        return error(
            ErrorCode.UNKNOWN_FUNCTION, f"unknown function {params.get('routineName', '')}", span
        )
    return error(ErrorCode.INVALID_QUERY, message, span)
