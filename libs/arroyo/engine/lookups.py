"""Key-value lookup tables (``Capabilities.lookup_by_key``) in a Spark session: the SQL
function that looks records up by key (``names.lookup_function``), which the planner's rewrite
of a lookup join calls (arroyo.sql.planner.plan.lookups), and the table's name as an empty view
of its columns, for the planner to analyse queries that name it.

The function is an Arrow UDF: each call gets a batch of keys (thousands of rows of one
partition), asks the connector's lookup for the distinct ones it has not cached, in one batch,
and gives each row its record (null: no such key). Records are cached per Python worker process,
up to ``lookup.cache.max_bytes`` (0: no cache), each for ``lookup.cache.ttl`` (unset: until
evicted); a miss is cached too. How the keys were answered is counted (``lookup_counts``).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arroyo.program.names import lookup_function, quote_name

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.accumulators import Accumulator
    from pyspark.sql import SparkSession

    from arroyo.connectors.base import AnyConnector, KeyLookup
    from arroyo.program.spec import TableSpec


class RecordCache:
    """Records by key, least recently used first out, bounded in bytes, each for ``ttl_s``."""

    def __init__(self, max_bytes: int, ttl_s: float | None) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.size = 0
        self.entries: OrderedDict[str, tuple[float, str | bytes | None]] = OrderedDict()

    def get(self, key: str) -> tuple[bool, str | bytes | None]:
        entry = self.entries.get(key)
        if entry is None:
            return False, None
        stored, value = entry
        if self.ttl_s is not None and time.monotonic() - stored > self.ttl_s:
            self._drop(key)
            return False, None
        self.entries.move_to_end(key)
        return True, value

    def put(self, key: str, value: str | bytes | None) -> None:
        if self.max_bytes <= 0:
            return
        self._drop(key)
        self.entries[key] = (time.monotonic(), value)
        self.size += _weight(key, value)
        while self.size > self.max_bytes and self.entries:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.size -= _weight(key, entry[1])


def _weight(key: str, value: str | bytes | None) -> int:
    return len(key) + (len(value) if value is not None else 0) + 64


# Each Python worker's caches, by lookup (a worker runs many tasks, each of which unpickles
# the function anew).
_CACHES: dict[str, RecordCache] = {}


@dataclass(frozen=True, slots=True)
class LookupCounts:
    """How one run's lookups of a table were answered, summed over its Python workers: ``rows``
    with a key, ``keys`` asked of the cache (each distinct key of an Arrow batch once) and the
    ``cache_hits`` among them; the other ``keys - cache_hits`` were read from the connector."""

    rows: int
    keys: int
    cache_hits: int

    @property
    def hit_rate(self) -> float:
        return self.cache_hits / self.keys if self.keys else 0.0


class LookupCounters:
    """The Spark accumulators behind ``LookupCounts``: made on the driver, pickled with the
    lookup to the Python workers. A task's additions reach the driver when the task ends (before
    its micro-batch commits); a retried task's are counted again."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self.rows: Accumulator[int] = context.accumulator(0)
        self.keys: Accumulator[int] = context.accumulator(0)
        self.cache_hits: Accumulator[int] = context.accumulator(0)

    def counts(self) -> LookupCounts:
        """On the driver only (Spark refuses to read an accumulator in a task)."""
        return LookupCounts(self.rows.value, self.keys.value, self.cache_hits.value)


# The counters of each lookup table's latest registration on this driver, by table name.
_COUNTERS: dict[str, LookupCounters] = {}


def lookup_counts(table: str) -> LookupCounts | None:
    """How the lookups of ``table`` by the pipeline run last registered in this process were
    answered so far (None: no such lookup table). Called on the driver, e.g. by benchmarks."""
    counters = _COUNTERS.get(table)
    return None if counters is None else counters.counts()


class Lookup:
    """The UDF's work: pickled to the Python workers, which keep its cache (``_CACHES``)."""

    def __init__(
        self,
        ident: str,
        fetch: KeyLookup,
        max_bytes: int,
        ttl_s: float | None,
        counters: LookupCounters,
    ) -> None:
        self.ident = ident
        self.fetch = fetch
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.counters = counters

    def __call__(self, keys: pa.Array) -> pa.Array:
        import pyarrow as pa

        cache = _CACHES.get(self.ident)
        if cache is None:
            cache = _CACHES[self.ident] = RecordCache(self.max_bytes, self.ttl_s)
        given = keys.to_pylist()
        found: dict[str, str | bytes | None] = {}
        missing: list[str] = []
        for key in given:
            if key is None or key in found:
                continue
            hit, value = cache.get(key)
            if hit:
                found[key] = value
            else:
                found[key] = None
                missing.append(key)
        if missing:
            for key, value in zip(missing, self.fetch(missing), strict=True):
                found[key] = value
                cache.put(key, value)
        self.counters.rows.add(len(given) - keys.null_count)
        self.counters.keys.add(len(found))
        self.counters.cache_hits.add(len(found) - len(missing))
        out = [None if k is None else found[k] for k in given]
        text = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in out]
        return pa.array(text, pa.string())


def register_key_lookup(
    spark: SparkSession, table: TableSpec, conn: AnyConnector, options: Any
) -> None:
    """The table's lookup function and its name as an empty view of its columns."""
    import pyarrow as pa
    from pyspark.sql.pandas.functions import arrow_udf

    max_bytes, ttl_s = conn.lookup_cache(options)
    ident = f"{table.name}:{uuid.uuid4().hex}"  # a new cache for each run of the pipeline
    counters = _COUNTERS[table.name] = LookupCounters(spark)
    lookup = Lookup(ident, conn.lookup(table, options), max_bytes, ttl_s, counters)

    def look(keys: pa.Array) -> pa.Array:
        return lookup(keys)

    # Spark reads the UDF's kind off its hints, evaluated (pyarrow is not imported at the top).
    look.__annotations__ = {"keys": pa.Array, "return": pa.Array}
    # Not deterministic (a key's record changes): Spark evaluates it once per row, never again
    # for a filter it moves below it (an inner join's test of whether the key was found).
    function = arrow_udf(look, "string").asNondeterministic()  # type: ignore[call-overload]
    spark.udf.register(lookup_function(table.name), function)
    ddl = ", ".join(f"{quote_name(c.name)} {c.spark_type}" for c in table.columns)
    spark.createDataFrame([], ddl).createOrReplaceTempView(table.name)
