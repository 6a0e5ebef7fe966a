"""Projections and filters (and joins that need nothing else): what they carry through."""

from __future__ import annotations

from sqlglot import exp

from arroyo.program.names import EVENT_TIME
from arroyo.sql.planner.relations import Planned, Relation


def projection(select: exp.Select, relations: list[Relation]) -> Planned:
    """A query that neither aggregates nor reads updating input, as it is, with its inputs'
    event time (a join's: the first that is not NULL) and the window column it selects."""
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
    return Planned(select, window)
