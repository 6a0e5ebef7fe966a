"""What a query's analysed plan says about it, read from Spark's plan objects.

Every question the engine and the planner ask of a plan is answered here, from the analysed
LogicalPlan (``queryExecution().analyzed()``, reached through py4j): its nodes by class name,
walked in the order Spark prints them (a node, the plans inside its expressions, then its
children), and their fields (a view's name, an observer's name). Nothing reads the printed
plan: its text is not an interface, and it quotes user SQL that could look like a node.

Called on the driver, on a query that Spark has analysed (``spark.sql`` or a DataFrame).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from arroyo.engine.build import EOI_METRIC

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Logical plan nodes that keep state across rows.
_STATEFUL_NODES = frozenset({"Aggregate", "Join", "FlatMapGroupsWithState", "Window"})
_STATEFUL_NODE_FAMILIES = ("Deduplicate", "TransformWithState", "SessionWindowing")


def end_of_input_sources(df: DataFrame) -> set[str]:
    """Names of the bounded-capable sources a query reads (each observes its end-of-input
    marker under ``eoi:<table>``: arroyo.engine.build.build_source)."""
    return {name[len(EOI_METRIC) :] for name in _end_of_input_observers(df)}


def declare_column_use(df: DataFrame, checkpoint: str) -> None:
    """Tell the query's Parquet file sources which of their columns it uses, so that they
    decode only those (Spark pushes no column pruning into a streaming source):
    libs/arroyo/java/arroyo/files/ColumnUse.java. ``checkpoint``: the query's checkpoint
    directory, absolute, before the query starts."""
    jvm = df.sparkSession._jvm
    assert jvm is not None
    jvm.arroyo.files.ColumnUse.require(_analysed(df), checkpoint)


def without_event_time(df: DataFrame) -> DataFrame | None:
    """A stateless query that reads only file sources, without their watermark operators and
    end-of-input observers (which make Spark copy every row, whole, out of the columnar scan);
    None if it reads another kind of stream. Its end is then read from its sources' offsets
    (``offsets_ended``). None too for a query that keeps state: its windows close on the
    watermark. libs/arroyo/java/arroyo/files/EndByOffsets.java."""
    from pyspark.sql import DataFrame as _DataFrame

    if stateful_operator(df) is not None:
        return None
    jvm = df.sparkSession._jvm
    assert jvm is not None
    stripped = jvm.arroyo.files.EndByOffsets.stateless(df._jdf)
    return None if stripped is None else _DataFrame(stripped, df.sparkSession)


def offsets_ended(end_offsets: Iterable[str | None]) -> bool:
    """Whether every file source of a batch's progress has read its end-of-input marker: its
    offset (``{"file": i, "pos": p, "eoi": n}``, BoundedFilesSource.java) counts one."""
    ended = [_eoi_count(offset) > 0 for offset in end_offsets]
    return bool(ended) and all(ended)


def offset_json(offset: str | None) -> str | None:
    """A source's offset in a progress record, as JSON. PySpark 4.1 spells the offsets of a
    query's own records (``recentProgress``, ``lastProgress``) as Python's repr of the parsed
    JSON (``{'eoi': 1}``); those of its listener's events are Spark's JSON."""
    if not offset:
        return offset
    try:
        json.loads(offset)
        return offset
    except ValueError:
        pass
    try:
        return json.dumps(ast.literal_eval(offset))
    except (ValueError, SyntaxError):
        return offset


def _eoi_count(offset: str | None) -> int:
    try:
        parsed = json.loads(offset_json(offset) or "{}")
    except ValueError:
        return 0
    return int(parsed.get("eoi", 0)) if isinstance(parsed, dict) else 0


def reads_bounded_only(df: DataFrame) -> bool:
    """Whether every stream a query reads ends by itself: each bounded source observes its
    end-of-input marker once per read, so the plan has as many observers as streams."""
    leaves = _analysed(df).collectLeaves()
    streams = sum(1 for leaf in _items(leaves) if leaf.isStreaming())
    return streams == len(_end_of_input_observers(df))


def stateful_operator(df: DataFrame) -> str | None:
    """The first operator of a query's plan that keeps state across rows, if any: one of the
    kinds that do, over a stream (a join, over streams on both sides: a stream's join with a
    lookup table keeps none)."""
    for node in _nodes(df):
        name = str(node.nodeName())
        if not (name in _STATEFUL_NODES or name.startswith(_STATEFUL_NODE_FAMILIES)):
            continue
        inputs = list(_items(node.children())) if name == "Join" else [node]
        if all(plan.isStreaming() for plan in inputs):
            return name
    return None


def reads_views(df: DataFrame, views: Collection[str]) -> bool:
    """Whether a query reads, through any views, one of the temporary ``views``."""
    wanted = set(views)
    return any(
        str(node.nodeName()) == "View" and str(node.desc().identifier().table()) in wanted
        for node in _nodes(df)
    )


def _end_of_input_observers(df: DataFrame) -> list[str]:
    names = (str(node.name()) for node in _nodes(df) if str(node.nodeName()) == "CollectMetrics")
    return [name for name in names if name.startswith(EOI_METRIC)]


def _analysed(df: DataFrame) -> Any:
    return df._jdf.queryExecution().analyzed()


def _nodes(df: DataFrame) -> Iterator[Any]:
    """The analysed plan's nodes (JVM objects), in the order Spark prints them: each node,
    then the plans inside its expressions (subqueries), then its children."""
    pending = [_analysed(df)]
    while pending:
        node = pending.pop()
        yield node
        below = [*_items(node.innerChildren()), *_items(node.children())]
        pending.extend(reversed(below))


def _items(seq: Any) -> Iterator[Any]:
    """The elements of a Scala Seq."""
    for i in range(seq.size()):
        yield seq.apply(i)
