"""The Nexmark event generator: a Spark data source written in Java.

The events are built in the executors' JVMs by ``arroyo.nexmark.NexmarkSource``
(``libs/arroyo/java/arroyo/nexmark``, compiled by arroyo.engine.jars), which writes Spark's rows
directly: no Python per row, and no large expression for Spark's optimizer to walk again in
every micro-batch. Its class comment says how the events follow the Nexmark/Beam generator.

Rows: ``person``, ``auction``, ``bid`` (exactly one set, as :data:`NEXMARK_DDL`),
``_source_time`` (the event time) and ``_eoi`` (end-of-input markers of a bounded stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["NEXMARK_DDL", "SOURCE", "nexmark_batch", "nexmark_stream"]

SOURCE: Final = "arroyo.nexmark.NexmarkSource"

NEXMARK_DDL: Final[str] = (
    "person STRUCT<id: BIGINT, name: STRING, email_address: STRING, credit_card: STRING, "
    "city: STRING, state: STRING, datetime: TIMESTAMP, extra: STRING>, "
    "auction STRUCT<id: BIGINT, item_name: STRING, description: STRING, initial_bid: BIGINT, "
    "reserve: BIGINT, datetime: TIMESTAMP, expires: TIMESTAMP, seller: BIGINT, "
    "category: BIGINT, extra: STRING>, "
    "bid STRUCT<auction: BIGINT, bidder: BIGINT, price: BIGINT, channel: STRING, url: STRING, "
    "datetime: TIMESTAMP, extra: STRING>"
)


def _options(event_rate: float, start_ms: int, partitions: int, seed: int) -> dict[str, str]:
    if not event_rate > 0:
        raise ValueError(f"event_rate must be positive, got {event_rate!r}")
    return {
        "event_rate": repr(float(event_rate)),
        "start_ms": str(int(start_ms)),
        "partitions": str(max(1, partitions)),
        "seed": str(seed),
    }


def nexmark_stream(
    spark: SparkSession,
    *,
    event_rate: float,
    start_ms: int,
    partitions: int = 1,
    rows_per_batch: int | None = None,
    total: int | None = None,
    seed: int = 0,
) -> DataFrame:
    """A stream of events: event ``n`` happens at ``start_ms + n * 1000 / event_rate``.

    With ``rows_per_batch``, micro-batches of that many events as fast as the query takes them;
    without, each event becomes readable at its own event time (to the millisecond), so that the
    time from event time to sink is the pipeline's latency. After ``total`` events, each batch is
    one end-of-input marker, also when the query is resumed after the end."""
    options = _options(event_rate, start_ms, partitions, seed)
    if rows_per_batch:
        options["rows_per_batch"] = str(rows_per_batch)
    if total is not None:
        options["total"] = str(total)
    return spark.readStream.format(SOURCE).options(**options).load()


def nexmark_batch(
    spark: SparkSession,
    *,
    event_rate: float,
    start_ms: int,
    total: int,
    first: int = 0,
    partitions: int = 1,
    seed: int = 0,
    event_number: bool = False,
) -> DataFrame:
    """Events ``first`` to ``total`` (exclusive) as a batch DataFrame: the same events a stream
    with the same rate, start and seed gives; ``event_number`` adds ``_event_number``."""
    options = _options(event_rate, start_ms, partitions, seed)
    options.update(total=str(total), first=str(first), event_number=str(event_number).lower())
    return spark.read.format(SOURCE).options(**options).load()
