"""Window functions (ROW_NUMBER, RANK, DENSE_RANK), which Spark cannot run on a stream.

Over windowed input, a window is ranked whole in the micro-batch that closes it, so the query
runs per batch (per_window_ranking). Over input without windows, a top-N is the updating
aggregate it amounts to (unwindowed_top_n).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.program.names import EVENT_TIME
from arroyo.program.spec import AggregateSpec, ViewSpec
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.relations import Planned, Relation, batch_view_name, reads_changelog
from arroyo.sql.planner.syntax import RANKED_ROWS, conjuncts, from_clause

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

    from arroyo.sql.planner.context import PlanContext

# A top-N without windows takes N up to this.
_MAX_TOP_N = 100_000
# The meta key of a TopN call awaiting its types: (N, descending, span).
_TOP_N = "arroyo_top_n"


def unwindowed_top_n(ctx: PlanContext, select: exp.Select) -> bool:
    """``SELECT .. FROM (SELECT .., ROW_NUMBER() OVER (PARTITION BY k ORDER BY o DESC) AS rn
    FROM t) WHERE rn <= N`` over input without windows (the last bid of each bidder, the ten
    highest bids of each auction): the N rows of each key with the largest (or smallest) o,
    which change as input arrives. Rewritten to the updating aggregate it is: GROUP BY k,
    and for N = 1 each other column ``max_by(row, o)`` (``min_by`` for ascending order);
    for N > 1, our TopN aggregate (a bounded heap per key) turned into one row per rank,
    keyed by k and rn. Returns whether ``select`` had that form; it is
    rewritten in place. Forms it cannot state as an aggregate are refused."""
    from_ = from_clause(select)
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
    span = span_of(ctx.text, window)
    original = [p.alias_or_name for p in inner.expressions]
    where = select.args.get("where")
    conditions = conjuncts(where.this) if where is not None else []
    bound = next((c for c in conditions if _rank_limit(c, rank) is not None), None)
    if bound is None:
        return False
    n = _rank_limit(bound, rank) or 0
    if not 1 <= n <= _MAX_TOP_N:
        raise error(
            ErrorCode.UNWINDOWED_TOP_N,
            f"a top-N over input without windows takes N from 1 to {_MAX_TOP_N:,}",
            span_of(ctx.text, bound.this) or span,
        )
    order = window.args.get("order")
    ordered = order.expressions if order is not None else []
    directions = {bool(o.args.get("desc")) for o in ordered}
    if not ordered or len(directions) != 1:
        raise error(
            ErrorCode.UNWINDOWED_TOP_N,
            "ROW_NUMBER() over input without windows needs an ORDER BY, all in one "
            "direction (ASC or DESC)",
            span,
        )
    if reads_changelog(ctx, inner):
        raise error(
            ErrorCode.WINDOW_FUNCTION_INPUT,
            "ROW_NUMBER() over a changelog (updating) input is not supported",
            span,
        )
    keys = window.args.get("partition_by") or []
    projected = {p.unalias() for p in inner.expressions if p is not ranked[0]}
    if not keys or any(k not in projected for k in keys):
        raise error(
            ErrorCode.UNWINDOWED_TOP_N,
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
        star.replace(exp.Tuple(expressions=[exp.column(n, table=alias or None) for n in original]))
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
    # N rows per key: inline(transform(top.rows, (x, i) -> (x.c0 AS v0, .., i + 1 AS rn)))
    # beside the keys, a generator over the aggregate, keyed by k and rn. top is our TopN
    # aggregate (libs/arroyo/java/arroyo/sql/TopN.java: a bounded heap per key, the
    # max_by(row, o, N) of later Spark), registered once the query's types are known
    # (register_top_n, after its functions are in Spark's terms).
    call = exp.Anonymous(
        this=ctx.fresh_name("__arroyo_top_n"),
        expressions=[by.copy(), *(f.expression.copy() for f in row.expressions)],
    )
    call.meta[_TOP_N] = (n, descending, span)
    top = exp.Dot(this=call, expression=exp.to_identifier("rows"))
    item, index = exp.to_identifier("__x"), exp.to_identifier("__i")
    fields = [
        exp.PropertyEQ(
            this=exp.to_identifier(p.alias_or_name),
            expression=exp.Dot(this=exp.column(item.copy()), expression=exp.to_identifier(f"c{i}")),
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
    rows.meta[RANKED_ROWS] = True
    inner.set(
        "expressions",
        [p for p in inner.expressions if p.unalias() in keys] + [rows],
    )
    inner.meta[RANKED_ROWS] = rank
    return True


def _orders_as_top_n(data_type: DataType) -> bool:
    """Whether the TopN aggregate orders values of this type as Spark does: numbers, strings
    compared by code point (not under another collation), dates, timestamps, booleans, and
    structs of them."""
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        NumericType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if isinstance(data_type, StructType):
        return all(_orders_as_top_n(f.dataType) for f in data_type.fields)
    if isinstance(data_type, StringType):
        return data_type.collation == "UTF8_BINARY"
    return isinstance(
        data_type, NumericType | DateType | TimestampType | TimestampNTZType | BooleanType
    )


def register_top_n(ctx: PlanContext, select: exp.Select) -> None:
    """Register the TopN aggregate of each top-N that unwindowed_top_n wrote into ``select``
    (its functions now in Spark's terms): its input types are those of the order and the row
    in the query's FROM, as Spark analyses them."""
    from pyspark.sql.types import StructField, StructType

    for call in [c for c in select.find_all(exp.Anonymous) if _TOP_N in c.meta]:
        n, descending, span = call.meta.pop(_TOP_N)
        probe = select.copy()
        for clause in ("group", "having", "order", "limit", "qualify"):
            probe.set(clause, None)
        probe.set(
            "expressions",
            [exp.alias_(a.copy(), f"__a{i}") for i, a in enumerate(call.expressions)],
        )
        fields = ctx.analyse(probe.sql(dialect="spark"), select).fields
        order_type = fields[0].dataType.simpleString()
        if not _orders_as_top_n(fields[0].dataType):
            raise error(
                ErrorCode.UNWINDOWED_TOP_N,
                "a top-N over input without windows orders by numbers, strings, dates, "
                f"timestamps, booleans or structs of them, not {order_type}",
                span,
            )
        columns = [StructField("o", fields[0].dataType)] + [
            StructField(f"c{i}", f.dataType) for i, f in enumerate(fields[1:])
        ]
        spec = AggregateSpec(
            call.name, StructType(columns).json(), key=n, largest=descending, kind="top_n"
        )
        ctx.catalog.register_aggregate(spec)
        ctx.program.aggregates.append(spec)


def per_window_ranking(
    ctx: PlanContext, select: exp.Select, relations: list[Relation], over: list[exp.Window]
) -> Planned:
    """ROW_NUMBER() / RANK() / DENSE_RANK() OVER (PARTITION BY window ...) over windowed
    input. Every row of a window is emitted in the same micro-batch (the one in which the
    watermark passes its end), so ranking each batch ranks each window completely: the
    query runs per batch, over the batch of its (streaming) input."""
    span = span_of(ctx.text, over[0])
    if len(relations) != 1 or relations[0].window is None or relations[0].updating:
        raise error(
            ErrorCode.WINDOW_FUNCTION_INPUT,
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
            raise error(
                ErrorCode.WINDOW_FUNCTION_PARTITION,
                f"a window function over windowed input must be partitioned by its window "
                f"column: PARTITION BY {window_column}",
                span_of(ctx.text, w) or span,
            )
        if w.args.get("order") is None:
            # Arroyo numbers a window's rows as they arrive when no ORDER BY is given; Spark
            # needs an order, and every row of a window has the same event time.
            time = exp.column(EVENT_TIME, table=relation.alias)
            w.set("order", exp.Order(expressions=[exp.Ordered(this=time)]))
    from_ = from_clause(select)
    assert from_ is not None
    source = from_.this
    if isinstance(source, exp.Subquery):
        view = ctx.fresh_name("__ranked_input")
        ctx.add_view(
            ViewSpec(view, source.this.sql(dialect="spark")),
            source.this,
            ViewShape(relation.window, relation.updating),
        )
    else:
        assert isinstance(source, exp.Table)
        view = source.name
    register_batch_view(ctx, view)
    source.replace(
        exp.Table(
            this=exp.to_identifier(batch_view_name(view)),
            alias=exp.TableAlias(this=exp.to_identifier(relation.alias)),
        )
    )
    return Planned(select, None, None, view)


def register_batch_view(ctx: PlanContext, view: str) -> None:
    """An empty stand-in for the micro-batch of ``view`` that per-batch queries read, so
    that they can be analysed while planning (the runner registers each real batch)."""
    schema = ctx.catalog.table_schema(view)
    ctx.catalog.register_empty(batch_view_name(view), schema)


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
