"""Arroyo SQL scripts from a small grammar: CREATE TABLE, CREATE VIEW, INSERT ... SELECT with
identifiers, literals, functions, windows, joins and aggregates, valid and not (unknown names,
wrong types and arities, broken tokens). ``plan_outcome`` plans one: a program, or a
PlanningError with diagnostics; anything else is a bug of the planner.

Shared by ``tests/fuzz/test_sql.py`` (few scripts, for CI) and ``bench/fuzz.py`` (more)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st

from arroyo.errors import PlanningError

if TYPE_CHECKING:
    from arroyo.sql.planner.script import Planner

PRELUDE = """CREATE TABLE src (id BIGINT, name TEXT, score DOUBLE, ts TIMESTAMP NOT NULL,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '/nonexistent/in.json', format = 'json', type = 'source');
CREATE TABLE imp WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
"""
COLUMNS = ["id", "name", "score", "ts", "counter", "subtask_index", "nope"]
FUNCTIONS = [
    "count", "sum", "avg", "min", "max", "upper", "lower", "length", "abs", "round", "concat",
    "coalesce", "date_trunc", "to_timestamp", "regexp_replace", "json_get", "array_agg",
    "row_number", "no_such_function", "hop", "tumble", "session", "unnest",
]  # fmt: skip
TYPES = ["BIGINT", "INT", "TEXT", "DOUBLE", "BOOLEAN", "TIMESTAMP", "DECIMAL(10, 2)", "BLOB", "X"]
CONNECTORS = ["impulse", "blackhole", "single_file", "kafka", "nowhere"]

identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True) | st.sampled_from(
    ["src", "imp", "out", "select", '"Quoted id"', "`tick`", "__arroyo_x"]
)
literals = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(st.characters(codec="ascii", exclude_characters="\x00"), max_size=6).map(
        lambda t: "'" + t.replace("'", "''") + "'"
    ),
    st.sampled_from(["NULL", "TRUE", "INTERVAL '1' MINUTE", "INTERVAL '5 seconds'", "1e999"]),
)
intervals = st.sampled_from(["interval '1 minute'", "interval '10 second'", "interval '0 s'", "1"])


def expressions() -> st.SearchStrategy[str]:
    leaves = st.sampled_from(COLUMNS) | literals
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
            st.tuples(
                inner, st.sampled_from(["+", "-", "*", "/", "=", "<", "AND", "||"]), inner
            ).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, st.sampled_from(TYPES)).map(lambda t: f"CAST({t[0]} AS {t[1]})"),
        ),
        max_leaves=5,
    )


def windows() -> st.SearchStrategy[str]:
    return st.one_of(
        intervals.map(lambda i: f"tumble({i})"),
        st.tuples(intervals, intervals).map(lambda t: f"hop({t[0]}, {t[1]})"),
        intervals.map(lambda i: f"session({i})"),
    )


@st.composite
def selects(draw: st.DrawFn) -> str:
    named = st.tuples(expressions(), st.none() | identifiers).map(
        lambda t: t[0] if t[1] is None else f"{t[0]} AS {t[1]}"
    )
    columns = ", ".join(draw(st.lists(named | st.just("*"), min_size=1, max_size=4)))
    source = draw(st.sampled_from(["src", "imp", "out", "missing"]) | identifiers)
    text = f"SELECT {columns} FROM {source}"
    if draw(st.booleans()):
        other = draw(st.sampled_from(["src", "imp"]))
        kind = draw(st.sampled_from(["JOIN", "LEFT JOIN", "FULL OUTER JOIN", "CROSS JOIN"]))
        text += f" AS a {kind} {other} AS b ON {draw(expressions())}"
    if draw(st.booleans()):
        text += f" WHERE {draw(expressions())}"
    if draw(st.booleans()):
        keys = draw(st.lists(windows() | st.sampled_from([*COLUMNS[:5], "1"]), max_size=3))
        text += " GROUP BY " + (", ".join(keys) or "()")
    return text


@st.composite
def creates(draw: st.DrawFn) -> str:
    name = draw(identifiers)
    columns = draw(st.lists(st.tuples(identifiers, st.sampled_from(TYPES)), max_size=3))
    body = f" ({', '.join(f'{c} {t}' for c, t in columns)})" if columns else ""
    options = [f"connector = '{draw(st.sampled_from(CONNECTORS))}'"] if draw(st.booleans()) else []
    for key in draw(st.lists(st.sampled_from(["event_rate", "type", "format", "path", "x"]))):
        options.append(f"{key} = {draw(literals)}")
    with_clause = f" WITH ({', '.join(options)})" if options else ""
    return f"CREATE TABLE {name}{body}{with_clause}"


@st.composite
def scripts(draw: st.DrawFn) -> str:
    """A script: the prelude's tables, then one to three statements, maybe a broken one."""
    statement = st.one_of(
        selects().map(lambda s: f"INSERT INTO out {s}"),
        selects(),
        creates(),
        st.tuples(identifiers, selects()).map(lambda t: f"CREATE VIEW {t[0]} AS {t[1]}"),
        st.sampled_from(["SET updating_ttl = '1 hour'", "SET x = 1", "DROP TABLE src", ";;"]),
    )
    body = ";\n".join(draw(st.lists(statement, min_size=1, max_size=3))) + ";"
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from(["(", ")", "'", ",", "SELECT", "\\"])) + body[at:]
    return PRELUDE + body


def plan_outcome(planner: Planner, sql: str) -> str:
    """``"planned"`` or the first diagnostic's code; any other exception propagates."""
    try:
        planner.plan(sql)
    except PlanningError as err:
        assert err.diagnostics, sql
        assert all(d.code and d.message for d in err.diagnostics), sql
        return err.diagnostics[0].code
    return "planned"
