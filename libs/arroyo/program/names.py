"""Names the planner and the engine agree on: hidden columns, derived views, quoting.

Both sides of the program (the planner that writes its SQL, the engine that runs it) use these
spellings, so they live below both.
"""

from __future__ import annotations

# Every table's event time column (Arroyo's ``_timestamp``).
EVENT_TIME = "_timestamp"

# On an updating result, and on the rows of a changelog source: whether the row (still)
# qualifies. A HAVING, a WHERE over updating input, or a debezium delete sets it false, so that
# the sink writes a delete where Spark would silently drop the row.
KEEP = "__arroyo_keep"
# On an updating aggregate: the time of the last micro-batch that updated the key, the last
# aggregate of the query, so that its state can expire after ``updating_ttl`` (see
# libs/arroyo/java/arroyo/state/IdleExpiringStateStoreProvider.java).
TOUCHED = "__arroyo_touched"
# On the signed rows of a changelog source (``signed_view``): +1 a row that appears, -1 one
# that goes away; aggregates over a changelog weigh each row by it, so that they retract.
SIGN = "__arroyo_sign"
# On a projection of an updating result that leaves out a column of its key (a changelog
# source's primary key, say): that column under this prefix, so that the sink still tells the
# rows apart, as Arroyo's updating rows carry their key's hash beside their columns.
HIDDEN_KEY = "__arroyo_key_"
# A key-value lookup table (``Capabilities.lookup_by_key``) is looked up by a SQL function of
# this prefix and the table's name, which the engine registers; a query joining it carries each
# row's record under the same prefix and the join's alias.
LOOKUP = "__arroyo_lookup_"


def lookup_function(table: str) -> str:
    """The SQL function that looks a key-value lookup table's records up by key."""
    return f"{LOOKUP}{table}"


def signed_view(table: str) -> str:
    """The name of a changelog source's signed rows, next to the table's own view."""
    return f"__signed_{table}"


def quote_name(name: str) -> str:
    """``name`` as a Spark SQL identifier (backquoted, backquotes doubled)."""
    return "`" + name.replace("`", "``") + "`"
