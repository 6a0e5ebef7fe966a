"""What a planned pipeline's sinks are guaranteed, as far as its sources let them: a warning
for each source that cannot replay its input feeding an exactly-once sink (a NATS core
subject, MQTT at QoS 0), whose rows a failure may lose however exactly the sink writes.

Warnings do not stop a query: ``arroyo validate`` prints them, and the compiler returns them
beside the program (``CompileResponse.warnings``), which the API's ``validate_query`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import sqlglot
from sqlglot import exp

from arroyo.connectors import connector
from arroyo.connectors.stage import STAGE_CONNECTOR
from arroyo.program.spec import PipelineProgram, TableSpec


@dataclass(frozen=True, slots=True)
class ReplayWarning:
    """Source table ``source`` (of connector ``connector``) cannot replay its input and feeds
    the exactly-once sink table ``sink``."""

    code: ClassVar[str] = "unreplayable_source"

    source: str
    connector: str
    sink: str

    @property
    def message(self) -> str:
        return (
            f"source '{self.source}' ({self.connector}) cannot replay its input: after a "
            f"failure the exactly-once sink '{self.sink}' may miss rows"
        )


def replay_warnings(program: PipelineProgram) -> list[ReplayWarning]:
    """A warning for each pair of a source that cannot replay (``Connector.replayable`` of its
    options) and an exactly-once sink (``Connector.delivery``) it feeds, through views and
    stages; sinks in the program's order, each one's sources by name."""
    unreplayable = {
        s.name.lower(): s
        for s in program.sources
        if not s.is_lookup and s.connector != STAGE_CONNECTOR and not _replayable(s)
    }
    if not unreplayable:
        return []
    lineage = _Lineage(program)
    warnings = []
    for query in program.queries:
        sink = query.sink
        if sink.connector == STAGE_CONNECTOR or _delivery(sink) != "exactly_once":
            continue
        for name in sorted(lineage.reads(query.sql) & unreplayable.keys()):
            source = unreplayable[name]
            warnings.append(ReplayWarning(source.name, source.connector, sink.name))
    return warnings


def _replayable(table: TableSpec) -> bool:
    conn = connector(table.connector)
    return conn is None or conn.replayable(conn.table_options(table))


def _delivery(table: TableSpec) -> str | None:
    conn = connector(table.connector)
    return None if conn is None else conn.delivery(conn.table_options(table))


class _Lineage:
    """The tables a query reads, through the program's views and stages (by the names in its
    SQL, lower-cased, as Spark resolves them)."""

    def __init__(self, program: PipelineProgram) -> None:
        self.views = {v.name.lower(): v.sql for v in program.views}
        self.stages = {
            q.sink.name.lower(): q.sql
            for q in program.queries
            if q.sink.connector == STAGE_CONNECTOR
        }
        self._done: dict[str, frozenset[str]] = {}

    def reads(self, sql: str) -> frozenset[str]:
        found: set[str] = set()
        for name in _names(sql):
            found.add(name)
            found |= self._through(name)
        return frozenset(found)

    def _through(self, name: str) -> frozenset[str]:
        """What the view or stage ``name`` reads (nothing for a table)."""
        if name in self._done:
            return self._done[name]
        self._done[name] = frozenset()  # a name read again while it is resolved adds nothing
        sql = self.views.get(name) or self.stages.get(name)
        if sql is not None:
            self._done[name] = self.reads(sql)
        return self._done[name]


def _names(sql: str) -> set[str]:
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return set()
    return {t.name.lower() for t in tree.find_all(exp.Table)}
