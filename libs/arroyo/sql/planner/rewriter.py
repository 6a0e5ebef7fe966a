"""One query, rewritten into Spark's terms: recursion through CTEs, subqueries and unions, and
for each SELECT the first rule of ``RULES`` that plans it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.errors import PlanningError
from arroyo.program.spec import ViewSpec
from arroyo.sql.functions import FunctionError, translate
from arroyo.sql.planner.context import ViewShape
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.optimize.fused_changes import fused_changes
from arroyo.sql.planner.optimize.interval_join import interval_join_view
from arroyo.sql.planner.optimize.window_local import note_window_root, window_local_join
from arroyo.sql.planner.plan import joins, lookups, updating, window_fn, windows
from arroyo.sql.planner.plan.projection import projection
from arroyo.sql.planner.plan.stages import stage_changes
from arroyo.sql.planner.relations import (
    Planned,
    Relation,
    columns,
    event_time,
    expand_stars,
    reads_changelog,
    table_relation,
)
from arroyo.sql.planner.syntax import from_clause, has_aggregate

if TYPE_CHECKING:
    from arroyo.sql.planner.context import PlanContext


class Rewriter:
    """Rewrites one query of the script (and the queries inside it) into Spark's terms.

    ``local_joins``: whether a join of windows may run per micro-batch
    (optimize.window_local): only for a query written into a sink that takes per-batch
    results. ``into_sink``: whether the query is the one written into a sink (not a view, CTE
    or subquery, which further operators may read). Neither holds for the queries nested in
    it."""

    def __init__(
        self, ctx: PlanContext, *, local_joins: bool = False, into_sink: bool = False
    ) -> None:
        self.ctx = ctx
        self.local_joins = local_joins
        self.into_sink = into_sink

    def top_level(self, query: exp.Query) -> Planned:
        """A query of the script (a view's, an insert's, a SELECT): one that runs on streams,
        so one without a top-level ORDER BY or LIMIT."""
        for clause, what, code in (
            ("order", "ORDER BY", ErrorCode.UNSUPPORTED_ORDER),
            ("limit", "LIMIT", ErrorCode.UNSUPPORTED_LIMIT),
        ):
            node = query.args.get(clause)
            if node is not None:
                raise error(
                    code,
                    f"{what} is not supported on an unbounded stream",
                    span_of(self.ctx.text, node) or span_of(self.ctx.text, query),
                )
        return self.query(query)

    def query(self, query: exp.Query) -> Planned:
        """A copy of ``query`` rewritten, its CTEs registered as views."""
        text = self.ctx.text
        query = query.copy()
        with_ = query.args.get("with_")
        if with_ is not None:
            query.set("with_", None)
            for cte in with_.expressions:
                self._register_cte(query, cte)
        if isinstance(query, exp.Union):
            if query.args.get("distinct"):
                raise error(
                    ErrorCode.UNSUPPORTED_UNION,
                    "UNION without ALL is not supported on streams; use UNION ALL",
                    span_of(text, query),
                )
            left = self._nested(query.left)
            right = self._nested(query.right)
            if left.batch_input is not None or right.batch_input is not None:
                raise error(
                    ErrorCode.WINDOW_FUNCTION_UNION,
                    "UNION ALL of window-function results is not supported",
                    span_of(text, query),
                )
            if left.updating is not None or right.updating is not None:
                raise error(
                    ErrorCode.UPDATING_UNION,
                    "UNION ALL of updating results is not supported",
                    span_of(text, query),
                )
            if left.static != right.static:
                raise error(
                    ErrorCode.LOOKUP_UNION,
                    "UNION ALL of a stream and a lookup table is not supported (Spark unions "
                    "streams with streams only); join the lookup table instead",
                    span_of(text, query),
                )
            query.set("this", left.node)
            query.set("expression", right.node)
            return Planned(query, left.window, static=left.static)
        if isinstance(query, exp.Subquery):
            inner = self.query(query.this)
            query.set("this", inner.node)
            return Planned(
                query, inner.window, inner.updating, inner.batch_input, static=inner.static
            )
        if not isinstance(query, exp.Select):
            raise error(
                ErrorCode.UNSUPPORTED_QUERY, f"unsupported query: {query.key}", span_of(text, query)
            )
        return self._select(query)

    def _nested(self, query: exp.Query) -> Planned:
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
        """A CTE as a view of a name of its own, which ``query`` reads instead."""
        name = cte.alias
        unique = self.ctx.fresh_name(f"{name}__cte")
        planned = self._nested(cte.this)
        view = ViewSpec(unique, planned.node.sql(dialect="spark"))
        self.ctx.add_view(
            view, cte.this, ViewShape(planned.window, planned.updating, planned.static)
        )
        note_window_root(self.ctx, view, planned)
        for table in query.find_all(exp.Table):
            if table.name == name and not table.args.get("db"):
                alias = table.alias or name
                table.set("this", exp.to_identifier(unique))
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))

    def _select(self, select: exp.Select) -> Planned:
        """A SELECT: its FROM items planned, its stars expanded, its functions in Spark's
        terms, then planned by the first of RULES that takes it."""
        ctx = self.ctx
        try:
            relations = self._relations(select)
        except PlanningError as err:
            # A window function over input without windows is refused where it stands, unless
            # this query keeps its top N rows: then the two are the aggregate they amount to.
            if not any(d.code == ErrorCode.WINDOW_FUNCTION_INPUT for d in err.diagnostics):
                raise
            if not window_fn.unwindowed_top_n(ctx, select):
                raise
            relations = self._relations(select)
        expand_stars(ctx, select, relations)
        joins.join_on_window_bounds(select, relations)
        joins.name_shared_window(select, relations)
        try:
            translate(
                select,
                lambda: event_time(relations),
                ctx.udfs.signatures if ctx.udfs else None,
                {r.alias: dict(r.columns) for r in relations},
            )
        except FunctionError as err:
            raise error(ErrorCode.BAD_FUNCTION_CALL, str(err), span_of(ctx.text, err.node)) from err
        window_fn.register_top_n(ctx, select)
        is_aggregate = select.args.get("group") is not None or any(
            has_aggregate(p) for p in select.expressions
        )
        query = SelectQuery(select, relations, is_aggregate)
        for _, rule in RULES:
            planned = rule(self, query)
            if planned is not None:
                return planned
        raise AssertionError("the last rule plans every query")

    def _relations(self, select: exp.Select) -> list[Relation]:
        """The SELECT's FROM items, each planned (a subquery) or looked up (a table)."""
        sources: list[exp.Expression] = []
        from_ = from_clause(select)
        if from_ is not None:
            sources.append(from_.this)
        for join in select.args.get("joins") or []:
            sources.append(join.this)
        relations = []
        for source in sources:
            if isinstance(source, exp.Table):
                relations.append(table_relation(self.ctx, source))
            elif isinstance(source, exp.Subquery):
                planned = self._nested(source.this)
                source.set("this", planned.node)
                alias = source.alias or self.ctx.fresh_name("__subquery")
                if not source.alias:
                    source.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
                schema = self.ctx.analyse(planned.node.sql(dialect="spark"), source)
                relations.append(
                    Relation(
                        alias,
                        columns(schema),
                        planned.window,
                        planned.updating,
                        planned.batch_input,
                        planned.static,
                    )
                )
            else:
                raise error(
                    ErrorCode.UNSUPPORTED_QUERY,
                    f"unsupported FROM item: {source.key}",
                    span_of(self.ctx.text, source),
                )
        return relations


@dataclass
class SelectQuery:
    """A SELECT whose FROM items are planned, its stars expanded and its functions in Spark's
    terms: what the rules decide on."""

    node: exp.Select
    relations: list[Relation]
    is_aggregate: bool

    @property
    def streams(self) -> list[Relation]:
        return [r for r in self.relations if not r.static]

    @property
    def updating_inputs(self) -> list[Relation]:
        return [r for r in self.relations if r.updating is not None]


# A rule plans a SELECT of its kind, refuses it (raises a PlanningError) or passes (None).
Rule = Callable[[Rewriter, SelectQuery], Planned | None]


def _lookup_tables_alone(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if query.relations and not query.streams:
        lookups.refuse_read_whole(rewriter.ctx, query.node)
        return Planned(query.node, static=True)
    return None


def _streams_with_lookup_tables(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    query.relations = lookups.rewrite_key_lookups(rewriter.ctx, query.node, query.relations)
    if len(query.streams) < len(query.relations):
        joins.check_lookup_joins(rewriter.ctx, query.node, query.relations)
    return None


def _after_window_function(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    batch_inputs = [r for r in query.relations if r.batch_input is not None]
    if not batch_inputs:
        return None
    if query.is_aggregate or len(query.relations) > 1:
        raise error(
            ErrorCode.WINDOW_FUNCTION_INPUT,
            "only projections and filters can follow a window function such as ROW_NUMBER()",
            span_of(rewriter.ctx.text, query.node),
        )
    return Planned(query.node, None, None, batch_inputs[0].batch_input)


def _window_functions(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    select = query.node
    over = [w for w in select.find_all(exp.Window) if w.find_ancestor(exp.Select) is select]
    if not over:
        return None
    return window_fn.per_window_ranking(rewriter.ctx, select, query.relations, over)


def _windowed_aggregate(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    ctx, select, relations = rewriter.ctx, query.node, query.relations
    window = windows.rewrite_windows(ctx, select, relations)
    if window is None:
        window = windows.grouped_input_window(select, relations)
    if window is None:
        if query.is_aggregate:
            windows.refuse_aggregate_without_window(ctx, select, relations)
        return None
    return windows.windowed_aggregate(ctx, select, window)


def _aggregate_over_changelog(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if not (
        query.is_aggregate
        and len(query.relations) == 1
        and reads_changelog(rewriter.ctx, query.node)
    ):
        return None
    return updating.changelog_aggregate(rewriter.ctx, query.node, query.relations)


def _aggregate_over_updating(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if not (query.updating_inputs and query.is_aggregate and len(query.relations) == 1):
        return None
    ctx, select, (input_,) = rewriter.ctx, query.node, query.relations
    changes = fused_changes(ctx, select, input_)
    if changes is not None:
        return updating.changelog_aggregate(ctx, select, [changes], signed=True)
    return updating.changelog_aggregate(ctx, select, [stage_changes(ctx, select, input_)])


def _refused_over_updating(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if query.updating_inputs and (query.is_aggregate or len(query.relations) > 1):
        what = "an aggregate" if query.is_aggregate else "a join"
        raise error(
            ErrorCode.UPDATING_INPUT,
            f"{what} over an updating result is not supported; "
            f"aggregate or join the input before it is updated",
            span_of(rewriter.ctx.text, query.node),
        )
    return None


def _updating_aggregate(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if not query.is_aggregate:
        return None
    return updating.updating_aggregate(rewriter.ctx, query.node, query.relations)


def _updating_projection(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if not query.updating_inputs:
        return None
    return updating.updating_projection(rewriter.ctx, query.node, query.updating_inputs[0])


def _unwindowed_joins(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    ctx, select, relations, streams = rewriter.ctx, query.node, query.relations, query.streams
    if len(streams) > 1 and not all(r.window for r in streams):
        joins.check_unwindowed_joins(ctx, select, relations)
        joins.bound_unwindowed_joins(ctx, select, relations)
        if rewriter.into_sink and not any(r.window for r in relations):
            # Only into a sink: Spark takes no stateful operator after the interval join in
            # the same query, and a view of it may be read by one.
            interval_join_view(ctx, select, relations)
    return None


def _window_local_join(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    if len(query.relations) > 1 and rewriter.local_joins:
        return window_local_join(rewriter.ctx, query.node, query.relations)
    return None


def _projection(rewriter: Rewriter, query: SelectQuery) -> Planned | None:
    return projection(query.node, query.relations)


# What a SELECT is, and the rule that plans it, in the order they are tried: the first rule
# that gives a plan wins. Checks come first that rule out what no later rule could run.
RULES: tuple[tuple[str, Rule], ...] = (
    ("it reads lookup tables alone: Spark runs it as it is", _lookup_tables_alone),
    ("it joins streams with lookup tables (a check)", _streams_with_lookup_tables),
    ("it reads a window function's per-batch result", _after_window_function),
    ("it calls window functions (ROW_NUMBER) over windowed input", _window_functions),
    ("it aggregates by a window", _windowed_aggregate),
    ("it aggregates a changelog source", _aggregate_over_changelog),
    ("it aggregates an updating result", _aggregate_over_updating),
    ("it aggregates or joins updating results otherwise (refused)", _refused_over_updating),
    ("it aggregates without a window: an updating result", _updating_aggregate),
    ("it projects an updating result", _updating_projection),
    ("it joins streams without windows (checks, state bounds)", _unwindowed_joins),
    ("it joins windowed views of one windowed aggregate", _window_local_join),
    ("anything else: a projection", _projection),
)
