"""From Arroyo SQL to a pipeline program whose queries Spark has already analysed.

The planner walks the statements in order. Tables become TableSpecs (options checked by their
connector's model); sources are registered in Spark as temp views at once, so each later query
can be analysed by Spark itself: Spark's analyser supplies types, name resolution and
streaming-support checks, and its errors are turned into diagnostics pointing at the user's SQL.

What the planner adds on top of Spark, query by query:

- every row carries its event time in a hidden ``_timestamp`` column, which ``*`` never shows
  and sinks never write;
- ``tumble``/``hop``/``session`` in GROUP BY become Spark's ``window``/``session_window`` over
  that event time, and a windowed aggregate's rows take ``window_time(window)`` as event time, so
  aggregates and joins over windowed results work downstream;
- the checks Arroyo makes and Spark does not (window placement, hop widths, nested windows,
  top-level ORDER BY/LIMIT, reading sinks, writing sources).

The modules, in the order a reader meets them:

- ``script``: Planner; the statements in order, SET, and the program at the end;
- ``context``: the Catalog it analyses in (the engine's, passed in: the planner does not import
  the engine), and the state of one plan (PlanContext);
- ``diagnostics``: the error codes, and diagnostics pointing into the script;
- ``tables``: CREATE TABLE (connector tables, lookup tables, memory tables);
- ``sinks``: INSERT INTO and SELECT, and each sink's query;
- ``rewriter``: one query rewritten, recursively; its RULES say which step plans a SELECT;
- ``relations``: what a query reads (Relation) and gives (Planned);
- ``plan``: the steps: windows, window functions, joins, updating results, stages;
- ``optimize``: rewrites that exist only for speed (each gives the rows the plain plan gives);
  a reader can skip them;
- ``syntax``: readings of sqlglot trees that the steps share;
- ``delivery``: warnings on the planned program (a source that cannot replay feeding an
  exactly-once sink).
"""

from arroyo.sql.planner.context import Catalog
from arroyo.sql.planner.diagnostics import ErrorCode
from arroyo.sql.planner.script import Planner

__all__ = ["Catalog", "ErrorCode", "Planner"]
