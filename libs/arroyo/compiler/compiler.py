"""Compiling queries for the control plane, in a process that hosts a SparkSession.

Stateless between calls: each ``compile`` plans from scratch, with the connection profiles its
request carries (the compiler owns no database). Planning uses the one SparkSession of the
process for analysis only (no query runs, no external system is contacted); it clears the
session's temporary views, so calls are serialised.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import sqlglot
import structlog
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer

from arroyo.connectors import secrets
from arroyo.connectors.base import ConnectionProfile
from arroyo.connectors.stage import STAGE_CONNECTOR
from arroyo.errors import ArroyoError, Diagnostic, PlanningError
from arroyo.program.spec import PipelineProgram
from arroyo.sql.planner.delivery import replay_warnings
from arroyo_rpc.v1 import common_pb2 as common
from arroyo_rpc.v1 import compiler_pb2 as pb

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)

UDFS_PATH = "udfs.py"


def _diagnostic(d: Diagnostic) -> common.Diagnostic:
    return common.Diagnostic(
        code=d.code,
        message=d.message,
        line=d.span.line if d.span else 0,
        column=d.span.column if d.span else 0,
    )


def dataflow_graph(program: PipelineProgram) -> tuple[list[pb.GraphNode], list[pb.GraphEdge]]:
    """Sources, views and sinks, with an edge from each table a query reads."""
    nodes = [
        pb.GraphNode(
            id=s.name,
            kind="source",
            label=(
                "stage"
                if s.connector == STAGE_CONNECTOR
                else f"{s.connector} (lookup)"
                if s.is_lookup
                else s.connector
            ),
        )
        for s in program.sources
    ]
    nodes += [pb.GraphNode(id=v.name, kind="view", label="view") for v in program.views]
    edges: list[pb.GraphEdge] = []
    known = {n.id for n in nodes}
    for view in program.views:
        edges += [pb.GraphEdge(source=t, target=view.name) for t in _reads(view.sql) & known]
    for q in program.queries:
        if q.sink.connector == STAGE_CONNECTOR:
            # The query writing a stage feeds the stage's node (a source of the query after it).
            sink = q.sink.name
        else:
            sink = f"sink:{q.sink.name}"
            nodes.append(pb.GraphNode(id=sink, kind="sink", label=q.sink.connector))
        edges += [pb.GraphEdge(source=t, target=sink) for t in _reads(q.sql) & known]
    return nodes, edges


def _reads(sql: str) -> set[str]:
    """The tables ``sql`` reads. Where sqlglot cannot parse Spark's SQL (it takes a column
    named ``window`` in a GROUP BY for a window clause), the names after each FROM and JOIN."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return _names_after_from(sql)
    return {t.name for t in tree.find_all(exp.Table)}


def _names_after_from(sql: str) -> set[str]:
    try:
        tokens = Tokenizer().tokenize(sql)
    except sqlglot.errors.TokenError:
        return set()
    return {
        token.text
        for before, token in itertools.pairwise(tokens)
        if before.token_type in (TokenType.FROM, TokenType.JOIN)
        and token.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
    }


# A function's name as a query writes it (Spark also lists operators, such as `%` and `&&`).
_FUNCTION_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
# Arroyo's window functions, planned by the planner itself.
_WINDOWS = ("tumble", "hop", "session")


class Compiler:
    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._lock = threading.Lock()
        self._builtins: frozenset[str] | None = None

    async def readiness(self) -> dict[str, str | None]:
        """Ready while its Spark session's JVM answers (a trivial call, off the loop)."""
        try:
            tracker = self.spark.sparkContext.statusTracker()
            await asyncio.to_thread(tracker.getJobIdsForGroup)
        except Exception as err:
            return {"spark": f"the compiler's Spark session does not answer: {err}"}
        return {"spark": None}

    def _functions(self, udfs: Iterable[str]) -> list[str]:
        """Every function a query may call: Spark's built-in ones (read once from its
        catalog), Arroyo's (the planner's rewrites), the windows, and ``udfs``."""
        if self._builtins is None:
            from arroyo.sql.functions import REWRITES

            # Spark's own (not the UDFs earlier compiles registered in this session).
            spark = {r[0] for r in self.spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
            named = {n.lower() for n in (*spark, *REWRITES, *_WINDOWS)}
            self._builtins = frozenset(n for n in named if _FUNCTION_NAME.match(n))
        return sorted(self._builtins | set(udfs))

    def compile(
        self,
        query: str,
        udfs: str,
        parallelism: int,
        profiles: Iterable[pb.ConnectionProfile] = (),
        saved: Iterable[pb.ConnectionTable] = (),
    ) -> pb.CompileResponse:
        """Blocking (Spark analysis): call it from a thread. ``profiles`` are those a table may
        name with ``connection_profile``, ``saved`` the saved connection tables a query may
        name without declaring them; a name given twice takes the last."""
        from arroyo.engine.catalog import spark_planner
        from arroyo.udfs import load

        by_name = {
            p.name: ConnectionProfile(name=p.name, connector=p.connector, config=dict(p.config))
            for p in profiles
        }
        library = None
        with self._lock:
            try:
                library = load(udfs, UDFS_PATH) if udfs.strip() else None
                with tempfile.TemporaryDirectory(prefix="arroyo-compile-") as tmp:
                    planner = spark_planner(
                        self.spark,
                        parallelism=parallelism,
                        state_dir=Path(tmp),
                        udfs=library,
                        profiles=by_name,
                        saved_tables={t.name: t.ddl for t in saved},
                    )
                    # Secret options out of the tables, into the program's ``secrets``: the
                    # store seals them, and workers fetch them (arroyo.connectors.secrets).
                    program = secrets.take(planner.plan(query))
            except PlanningError as err:
                return pb.CompileResponse(
                    diagnostics=[_diagnostic(d) for d in err.diagnostics],
                    functions=self._functions(library.udfs if library else ()),
                )
            except ArroyoError as err:
                return pb.CompileResponse(
                    diagnostics=[common.Diagnostic(code=err.code, message=err.message)],
                    functions=self._functions(library.udfs if library else ()),
                )
            functions = self._functions(library.udfs if library else ())
        nodes, edges = dataflow_graph(program)
        tables = [
            pb.TableSchema(
                name=t.name,
                role=t.role,
                connector=t.connector,
                columns=[
                    pb.Column(name=c.name, type=c.spark_type, nullable=c.nullable)
                    for c in t.columns
                ],
            )
            for t in [*program.sources, *(q.sink for q in program.queries)]
            if t.connector != STAGE_CONNECTOR  # internal: the pipeline's own
        ]
        return pb.CompileResponse(
            program_json=program.to_json(),
            nodes=nodes,
            edges=edges,
            tables=tables,
            warnings=[w.message for w in replay_warnings(program)],
            functions=functions,
        )

    def validate_udfs(self, udfs: str) -> pb.ValidateUdfsResponse:
        from arroyo.udfs import load

        try:
            # Read, never run: no user code runs in the compiler (arroyo.udf_static).
            library = load(udfs, UDFS_PATH)
        except PlanningError as err:
            return pb.ValidateUdfsResponse(diagnostics=[_diagnostic(d) for d in err.diagnostics])
        return pb.ValidateUdfsResponse(
            udfs=[
                pb.Udf(
                    name=u.name,
                    kind=u.kind,
                    signature=f"({', '.join(a.spark for a in u.args)}) -> {u.returns.spark}",
                )
                for u in library.udfs.values()
            ]
        )
