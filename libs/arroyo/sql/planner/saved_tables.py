"""Saved connection tables: tables a query names without declaring them, planned from the
statement the api keeps for each (``CREATE TABLE name (...) WITH (...)``), before the query's
own statements, as if the query began with them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from arroyo.errors import Diagnostic, PlanningError
from arroyo.sql.planner.context import PlanContext
from arroyo.sql.statements import CreateTable, CreateView, Insert, Query, Statement, parse_script


def named_tables(statements: list[Statement]) -> dict[str, int]:
    """The tables a script reads or writes and does not declare, each with the offset of
    its first mention (an INSERT's target, a FROM or JOIN; never a WITH query's name)."""
    declared = {s.name for s in statements if isinstance(s, CreateTable | CreateView)}
    named: dict[str, int] = {}
    for stmt in statements:
        if isinstance(stmt, Insert):
            named.setdefault(stmt.table, stmt.offset)
        query = None
        if isinstance(stmt, Insert | CreateView | Query):
            query = stmt.query
        elif isinstance(stmt, CreateTable):
            query = stmt.as_query
        if query is None:
            continue
        ctes = {cte.alias for cte in query.find_all(exp.CTE)}
        for table in query.find_all(exp.Table):
            if table.name and not table.db and table.name not in ctes:
                named.setdefault(table.name, _start(table, stmt.offset))
    return {name: at for name, at in named.items() if name not in declared}


def _start(table: exp.Table, default: int) -> int:
    """Where the script names ``table`` (the parser marks it, or its identifier)."""
    for node in (table, table.this):
        if isinstance(node, exp.Expression) and "start" in node.meta:
            return int(node.meta["start"])
    return default


def declare_saved_tables(
    ctx: PlanContext,
    saved: Mapping[str, str],
    statements: list[Statement],
    plan: Callable[[Statement], None],
) -> list[Diagnostic]:
    """Plan (with ``plan``, the planner's step for one statement) the saved table of each name
    the script uses and does not declare. A saved table that does not plan is reported where
    the script names it, its own diagnostics' messages prefixed with its name."""
    diagnostics: list[Diagnostic] = []
    if not saved:
        return diagnostics
    script = ctx.text
    for name, at in sorted(named_tables(statements).items(), key=lambda item: item[1]):
        ddl = saved.get(name)
        if ddl is None:
            continue
        try:
            ctx.text, declared = parse_script(ddl)
            for stmt in declared:
                plan(stmt)
        except PlanningError as err:
            diagnostics.extend(
                Diagnostic(d.code, f"saved connection table '{name}': {d.message}", script.span(at))
                for d in err.diagnostics
            )
        finally:
            ctx.text = script
    return diagnostics
