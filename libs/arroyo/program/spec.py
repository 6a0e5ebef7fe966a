"""The pipeline program: what the compiler hands to a worker.

Plain, JSON-serialisable values only: Spark SQL text, connector options and column schemas. A
worker rebuilds the same streaming queries from it in any process, so nothing here refers to live
Spark objects.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# A lookup table is read whole, as a static (batch) table, for joins with streams: a dimension
# or side input (see Connector.read_static).
Role = Literal["source", "sink", "lookup"]
BadData = Literal["fail", "drop"]


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    name: str
    spark_type: str
    nullable: bool = True
    metadata_key: str | None = None
    generated_sql: str | None = None

    @property
    def physical(self) -> bool:
        return self.generated_sql is None and self.metadata_key is None


@dataclass(frozen=True, slots=True)
class FormatSpec:
    name: str
    options: dict[str, str] = field(default_factory=dict)
    bad_data: BadData = "fail"
    # ``framing = 'newline'``: a source's message holds records one per line, each cut to
    # ``framing.newline.max_length`` characters where set.
    framing: str | None = None
    framing_max_length: int | None = None


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A connector table as a source or a sink of this pipeline."""

    name: str
    connector: str
    role: Role
    options: dict[str, Any]
    columns: list[ColumnSpec]
    format: FormatSpec | None = None
    event_time_column: str | None = None
    watermark_delay_ms: int = 1000
    bounded: bool = False
    primary_key: list[str] = field(default_factory=list)

    @property
    def is_lookup(self) -> bool:
        return self.role == "lookup"

    @property
    def is_changelog(self) -> bool:
        """A source of debezium change records: an updating table keyed by its primary key."""
        return (
            self.role == "source"
            and self.format is not None
            and (self.format.name == "debezium_json")
        )


@dataclass(frozen=True, slots=True)
class IntervalJoinSpec:
    """A join of two streams run by Arroyo's interval join (libs/arroyo/java/arroyo/sql/
    IntervalJoin.java) rather than Spark's: the pairs of a ``left_sql`` row and a
    ``right_sql`` row with ``__lk = __rk`` and ``lower_us <= __rt - __lt <= upper_us``. The
    left query's columns are ``__lk`` (the key), ``__lt`` (its event time, with the
    watermark) and the rest; the right's ``__rk``, ``__rt`` and the rest.

    ``shared_sql``, when both inputs read the same relation (a self-join: Nexmark's auctions
    and bids are one stream): one query giving both sides' columns for each of its rows, with
    ``__lon`` and ``__ron`` saying which sides the row belongs to, so that the relation is
    read once rather than once per side."""

    left_sql: str
    right_sql: str
    lower_us: int
    upper_us: int
    shared_sql: str | None = None


@dataclass(frozen=True, slots=True)
class ChangesSpec:
    """The changes of an updating aggregate as signed rows (``SIGN``), run by Arroyo's
    retracting aggregate (libs/arroyo/java/arroyo/sql/RetractingAggregate.java) so that an
    aggregate over it can run in the same query. ``input_sql`` gives the group's keys (its
    first ``keys`` columns, named as the result's) and then one argument per function of
    ``kinds`` (count, sum, avg, min, max), whose results are named ``names``. A key no batch
    updates for ``ttl_ms`` (processing time; 0: never) is dropped."""

    input_sql: str
    keys: int
    kinds: list[str]
    names: list[str]
    ttl_ms: int = 0


@dataclass(frozen=True, slots=True)
class WindowAggregateSpec:
    """A keyed tumbling or hopping window aggregate run by Arroyo's window aggregate
    (libs/arroyo/java/arroyo/sql/WindowAggregate.java: state per pane of time, bucket of keys
    and micro-batch, rather than per key and window). ``input_sql`` gives the group's keys (its
    first ``keys`` columns), the event time (``_timestamp``, carrying the watermark) and one
    argument per function of ``kinds`` (count, sum, avg, min, max), whose results are named
    ``names``; the window column is named ``window``; ``columns`` are the aggregate's, in its
    order. Its state is split among ``buckets`` buckets of keys. The view gives partial
    results, which each micro-batch sums into the aggregate's rows (SinkQuery.batch_merge)."""

    input_sql: str
    keys: int
    kinds: list[str]
    names: list[str]
    window: str
    width_us: int
    slide_us: int
    columns: list[str]
    buckets: int


@dataclass(frozen=True, slots=True)
class ViewSpec:
    name: str
    # With ``interval_join``, the same join in Spark SQL (what the view reads, and its rows);
    # with ``changes`` or ``window_aggregate``, the aggregate in Spark SQL.
    sql: str
    interval_join: IntervalJoinSpec | None = None
    changes: ChangesSpec | None = None
    window_aggregate: WindowAggregateSpec | None = None


@dataclass(frozen=True, slots=True)
class AggregateSpec:
    """An aggregate function of Arroyo's own that the views call by ``name``, registered in
    every session that runs the program, before its views. ``kind``:

    - ``extreme_rows``: the distinct rows of ``input_ddl`` holding the largest (``largest``)
      or smallest value of column ``key`` (libs/arroyo/java/arroyo/sql/ExtremeRows.java);
    - ``min``, ``max``, ``count_distinct``: over a changelog's signed rows, ``f(value,
      sign)`` with ``input_ddl`` the value's type as Spark's JSON writes it, keeping each
      group's multiset so that a retraction forgets its value
      (libs/arroyo/java/arroyo/sql/SignedMultiset.java);
    - ``top_n``: the ``key`` rows with the largest (``largest``) or smallest order value, over
      rows whose type ``input_ddl`` gives as Spark's JSON (the order value first)
      (libs/arroyo/java/arroyo/sql/TopN.java)."""

    name: str
    input_ddl: str
    key: int = 0
    largest: bool = True
    kind: Literal["extreme_rows", "min", "max", "count_distinct", "top_n"] = "extreme_rows"


@dataclass(frozen=True, slots=True)
class SinkQuery:
    """One streaming query: the SQL that feeds a sink table."""

    sink: TableSpec
    sql: str
    output_mode: Literal["append", "update"] = "append"
    # Updating results: the columns that identify a row, and the column (if any) that says
    # whether the row still qualifies.
    key_columns: list[str] | None = None
    keep_column: str | None = None
    # Updating aggregates: state not updated for this long is dropped (``SET updating_ttl``).
    updating_ttl_ms: int | None = None
    # Queries that run per micro-batch (window functions): ``sql`` is the streaming input,
    # registered for each batch as ``batch_view``, which ``batch_sql`` reads.
    batch_sql: str | None = None
    batch_view: str | None = None
    # Spark checks the chain of stateful operators in a query: it refuses one that reads the
    # rows of an operator that may emit them behind the watermark (they could be dropped as
    # late), and more than one flatMapGroupsWithState unless the sink takes appended rows
    # only. The planner sets this where both checks are off for the query, as it built the
    # chain to be safe: an aggregate without event-time keys (which drops no late rows)
    # reading an interval join, or an updating aggregate's signed changes, in the same query
    # (both flatMapGroupsWithState in append mode, whose rows are only ever appended).
    unchecked_chain: bool = False
    # The view of Arroyo's window aggregate that ``sql`` reads, whose partial results each
    # batch sums into the rows ``batch_view`` holds (arroyo.engine.build.window_aggregate).
    batch_merge: str | None = None


@dataclass(frozen=True, slots=True)
class PipelineProgram:
    sources: list[TableSpec]
    views: list[ViewSpec]
    queries: list[SinkQuery]
    parallelism: int = 1
    # The UDF file's text and name: workers load the UDFs from the program, not from a path.
    udfs: str | None = None
    udfs_path: str | None = None
    aggregates: list[AggregateSpec] = field(default_factory=list)
    # The values of the secret options its tables refer to (``${secret:<table>.<option>}``),
    # from the compiler to the store only: a worker's program has none
    # (``arroyo.connectors.secrets``).
    secrets: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PipelineProgram:
        raw = json.loads(text)

        def table(t: dict[str, Any]) -> TableSpec:
            fmt = t.pop("format")
            return TableSpec(
                **{k: v for k, v in t.items() if k != "columns"},
                columns=[ColumnSpec(**c) for c in t["columns"]],
                format=FormatSpec(**fmt) if fmt else None,
            )

        return cls(
            sources=[table(s) for s in raw["sources"]],
            views=[
                ViewSpec(
                    v["name"],
                    v["sql"],
                    IntervalJoinSpec(**v["interval_join"]) if v.get("interval_join") else None,
                    ChangesSpec(**v["changes"]) if v.get("changes") else None,
                    (
                        WindowAggregateSpec(**v["window_aggregate"])
                        if v.get("window_aggregate")
                        else None
                    ),
                )
                for v in raw["views"]
            ],
            queries=[
                SinkQuery(
                    sink=table(q["sink"]),
                    sql=q["sql"],
                    output_mode=q["output_mode"],
                    key_columns=q.get("key_columns"),
                    keep_column=q.get("keep_column"),
                    updating_ttl_ms=q.get("updating_ttl_ms"),
                    batch_sql=q.get("batch_sql"),
                    batch_view=q.get("batch_view"),
                    unchecked_chain=q.get("unchecked_chain", False),
                    batch_merge=q.get("batch_merge"),
                )
                for q in raw["queries"]
            ],
            parallelism=raw["parallelism"],
            udfs=raw.get("udfs"),
            udfs_path=raw.get("udfs_path"),
            aggregates=[AggregateSpec(**a) for a in raw.get("aggregates", [])],
            secrets=dict(raw.get("secrets", {})),
        )

    @property
    def bounded(self) -> bool:
        """True when every streaming source ends by itself, so the whole run does (lookup
        tables are read whole for each micro-batch, never to an end)."""
        return all(s.bounded for s in self.sources if not s.is_lookup)
