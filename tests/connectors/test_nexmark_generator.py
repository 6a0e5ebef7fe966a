"""The Nexmark generator, a Spark data source in Java
(arroyo.connectors.runtime.nexmark_generator)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")

from arroyo.connectors.runtime.nexmark_generator import NEXMARK_DDL, nexmark_batch, nexmark_stream
from tests.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

N = 50_000  # a multiple of 50
BASE_MS = 1_700_000_000_000
EPS = 10_000.0  # one event every 100 microseconds

# What the events must follow: Beam's NexmarkConfiguration and generators (as Arroyo's port).
nx = SimpleNamespace(
    FIRST_NAMES=(
        "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
        "Walter",
    ),
    LAST_NAMES=(
        "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
    ),
    US_CITIES=(
        "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
        "Seattle", "Kent", "Cheyenne",
    ),
    US_STATES=("AZ", "CA", "ID", "OR", "WA", "WY"),
    HOT_CHANNELS=("Google", "Facebook", "Baidu", "Apple"),
    HOT_URLS=(
        "https://www.nexmark.com/abo/eoci/cidro/item.htm?query=1",
        "https://www.nexmark.com/eoax/oad/cidro/item.htm?query=1",
        "https://www.nexmark.com/abo/jack/cidro/item.htm?query=1",
        "https://www.nexmark.com/abo/micah/cidro/item.htm?query=1",
    ),
    CHANNELS_NUMBER=10_000,
    NUM_IN_FLIGHT_AUCTIONS=100,
    AUCTION_ID_LEAD=10,
    NUM_ACTIVE_PEOPLE=1000,
    PERSON_ID_LEAD=10,
)  # fmt: skip


def _numbered(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    return df.select(
        sf.col("_event_number").alias("n"),
        "person",
        "auction",
        "bid",
        sf.col("_source_time").alias("_timestamp"),
    )


def _generate(
    spark: SparkSession,
    start: int,
    end: int,
    *,
    partitions: int = 2,
    base_ms: int = BASE_MS,
    eps: float = EPS,
    seed: int = 0,
) -> DataFrame:
    events = nexmark_batch(
        spark,
        event_rate=eps,
        start_ms=base_ms,
        first=start,
        total=end,
        partitions=partitions,
        seed=seed,
        event_number=True,
    )
    return _numbered(events)


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> Iterator[DataFrame]:
    df = _generate(spark, 0, N).cache()
    assert df.count() == N
    yield df
    df.unpersist()


def _last_auction(n: int) -> int:
    """Beam's lastBase0AuctionId(n) + FIRST_AUCTION_ID, for an auction or bid event n."""
    epoch, offset = divmod(n, 50)
    return 1000 + 3 * epoch + (offset - 1 if offset <= 3 else 2)


def test_schema_is_nexmark_ddl(events: DataFrame) -> None:
    from pyspark.sql.types import StructType, TimestampType

    expected = StructType.fromDDL(NEXMARK_DDL)
    assert [f.name for f in expected] == ["person", "auction", "bid"]
    assert events.columns == ["n", "person", "auction", "bid", "_timestamp"]
    for field in expected:
        actual = events.schema[field.name].dataType
        assert actual.simpleString() == field.dataType.simpleString(), field.name
    assert events.schema["_timestamp"].dataType == TimestampType()
    assert [f.name for f in events.schema["auction"].dataType.fields] == [
        "id", "item_name", "description", "initial_bid", "reserve", "datetime", "expires",
        "seller", "category", "extra",
    ]  # fmt: skip


def test_exactly_one_event_per_row_in_nexmark_proportions(events: DataFrame) -> None:
    from pyspark.sql import functions as sf

    present = [sf.col(c).isNotNull().cast("int") for c in ("person", "auction", "bid")]
    kinds = events.select(
        "n",
        (present[0] + present[1] + present[2]).alias("present"),
        sf.when(sf.col("person").isNotNull(), "p")
        .when(sf.col("auction").isNotNull(), "a")
        .otherwise("b")
        .alias("kind"),
    )
    assert kinds.filter("present != 1").count() == 0
    counts = {r["kind"]: r["count"] for r in kinds.groupBy("kind").count().collect()}
    assert counts == {"p": N // 50, "a": 3 * N // 50, "b": 46 * N // 50}
    # Every block of 50 events: a person, then 3 auctions, then 46 bids.
    misplaced = kinds.filter(
        "(n % 50 = 0 AND kind != 'p') OR (n % 50 BETWEEN 1 AND 3 AND kind != 'a') "
        "OR (n % 50 >= 4 AND kind != 'b')"
    )
    assert misplaced.count() == 0


def test_person_and_auction_ids_are_unique_and_increasing(events: DataFrame) -> None:
    people = events.filter("person IS NOT NULL").orderBy("n").select("n", "person.id").collect()
    assert [r["id"] for r in people] == list(range(1000, 1000 + N // 50))
    assert all(r["id"] == 1000 + r["n"] // 50 for r in people)

    auctions = events.filter("auction IS NOT NULL").orderBy("n").select("n", "auction.id")
    rows = auctions.collect()
    assert [r["id"] for r in rows] == list(range(1000, 1000 + 3 * N // 50))
    assert all(r["id"] == _last_auction(r["n"]) for r in rows)


def test_bids_reference_in_flight_auctions_and_active_people(events: DataFrame) -> None:
    bids = events.filter("bid IS NOT NULL").select("n", "bid.auction", "bid.bidder").collect()
    assert len(bids) == 46 * N // 50
    hot_auctions = hot_bidders = already_generated = 0
    for r in bids:
        last = _last_auction(r["n"])
        # Beam's nextBase0AuctionId: within the last NUM_IN_FLIGHT_AUCTIONS auctions, or up to
        # AUCTION_ID_LEAD ahead; hot auctions are the first of the current batch of 100.
        assert max(1000, last - nx.NUM_IN_FLIGHT_AUCTIONS) <= r["auction"], r
        assert r["auction"] <= last + nx.AUCTION_ID_LEAD, r
        already_generated += r["auction"] <= last
        hot_auctions += r["auction"] == 1000 + (last - 1000) // 100 * 100
        # People: the last NUM_ACTIVE_PEOPLE, up to PERSON_ID_LEAD ahead (hot: 2nd of a batch).
        num_people = r["n"] // 50 + 1
        lowest = 1000 + max(0, num_people - nx.NUM_ACTIVE_PEOPLE)
        assert lowest <= r["bidder"] < 1000 + num_people + nx.PERSON_ID_LEAD, r
        hot_bidders += (r["bidder"] - 1000) % 100 == 1
    # P(hot auction) = 1/2 (+ cold draws that land on it); P(hot bidder) = 3/4 (+ ...).
    assert 0.48 < hot_auctions / len(bids) < 0.56
    assert 0.73 < hot_bidders / len(bids) < 0.80
    assert already_generated / len(bids) > 0.9


def test_auction_fields(events: DataFrame) -> None:
    from pyspark.sql import functions as sf

    auctions = events.filter("auction IS NOT NULL").select("n", "auction.*")
    bad = auctions.filter(
        "initial_bid < 100 OR reserve <= initial_bid OR expires <= datetime "
        "OR category NOT BETWEEN 10 AND 14 OR seller < 1000"
    )
    assert bad.count() == 0
    assert {r[0] for r in auctions.select("category").distinct().collect()} == set(range(10, 15))
    # Sellers: hot (first of a batch of 100 people) 3 times in 4, else an active person.
    hot = auctions.filter("seller = 1000 + floor(n / 50 / 100) * 100").count()
    assert 0.70 < hot / auctions.count() < 0.82
    assert auctions.filter("seller > 1000 + floor(n / 50) + 10").count() == 0
    # Expiry: 1 ms + uniform [0, 2 * horizon), horizon = 1666 events of 100 us.
    horizon_us = (100 * 50 // 3) * 100
    span = auctions.select(
        (sf.unix_micros("expires") - sf.unix_micros("datetime")).alias("us")
    ).agg(sf.min("us"), sf.max("us"), sf.avg("us"))
    lo, hi, mean = span.first()
    assert lo >= 1000
    assert hi < 1000 + 2 * horizon_us
    assert abs(mean - (1000 + horizon_us)) < 0.1 * horizon_us


def test_prices(events: DataFrame) -> None:
    from pyspark.sql import functions as sf

    prices = events.filter("bid IS NOT NULL").select("bid.price")
    lo, hi, median = prices.agg(
        sf.min("price"), sf.max("price"), sf.percentile_approx("price", 0.5)
    ).first()
    # round(10 ** U(0, 6) * 100): from 100 to 10^8, median 10^5.
    assert lo >= 100
    assert hi <= 100_000_000
    assert 50_000 < median < 200_000


def test_event_times(events: DataFrame) -> None:
    from pyspark.sql import functions as sf

    # base + n * 1000 / EPS ms, i.e. 100 us apart; each struct's datetime is the event time.
    expected_us = sf.lit(BASE_MS * 1000) + sf.col("n") * 100
    wrong = events.filter(
        (sf.unix_micros("_timestamp") != expected_us)
        | sf.coalesce("person.datetime", "auction.datetime", "bid.datetime").isNull()
        | (
            sf.coalesce("person.datetime", "auction.datetime", "bid.datetime")
            != sf.col("_timestamp")
        )
    )
    assert wrong.count() == 0


def test_event_times_with_a_fractional_delay(spark: SparkSession) -> None:
    from pyspark.sql import functions as sf

    rows = (
        _generate(spark, 0, 10, base_ms=5, eps=3.0)
        .orderBy("n")
        .select(sf.unix_micros("_timestamp"))
        .collect()
    )
    assert [r[0] for r in rows] == [5000 + n * 1_000_000 // 3 for n in range(10)]


def test_strings(events: DataFrame) -> None:
    people = events.filter("person IS NOT NULL").select("person.*").collect()
    names = {f"{f} {last}" for f in nx.FIRST_NAMES for last in nx.LAST_NAMES}
    for p in people:
        assert p["name"] in names
        assert p["city"] in nx.US_CITIES
        assert p["state"] in nx.US_STATES
        assert re.fullmatch(r"[a-z ]+@[a-z ]+\.com", p["email_address"]), p
        assert re.fullmatch(r"\d{4} \d{4} \d{4} \d{4}", p["credit_card"]), p
        assert 100 <= len(p["extra"]) <= 200
    assert len({p["name"] for p in people}) > 80
    assert len({p["credit_card"] for p in people}) == len(people)

    auctions = events.filter("auction IS NOT NULL").select("auction.*").collect()
    for a in auctions:
        assert 1 <= len(a["item_name"]) < 20
        assert 1 <= len(a["description"]) < 100
        assert 200 <= len(a["extra"]) <= 540  # Beam: 500 - size of the rest, +/- 20%

    bids = events.filter("bid IS NOT NULL").select("bid.*").collect()
    hot = 0
    url_of_channel: dict[str, str] = {}
    for b in bids:
        assert 54 <= len(b["extra"]) <= 81  # Beam: 100 - 32 bytes, +/- 20%
        assert b["url"].startswith("https://www.nexmark.com/"), b
        if b["channel"] in nx.HOT_CHANNELS:
            hot += 1
            assert b["url"] == nx.HOT_URLS[nx.HOT_CHANNELS.index(b["channel"])]
            continue
        match = re.fullmatch(r"channel-(0|[1-9]\d*)", b["channel"])
        assert match and int(match[1]) < nx.CHANNELS_NUMBER, b
        url_id = re.fullmatch(r"https://www\.nexmark\.com/[a-z_]+/[a-z_]+/[a-z_]+/item\.htm"
                              r"\?query=1(?:&channel_id=(\d+))?", b["url"])  # fmt: skip
        assert url_id, b
        assert url_id[1] is None or url_id[1] == match[1], b
        # Each channel has one URL.
        assert url_of_channel.setdefault(b["channel"], b["url"]) == b["url"]
    assert 0.47 < hot / len(bids) < 0.53
    assert len(url_of_channel) > 8_000
    with_id = sum("&channel_id=" in url for url in url_of_channel.values())
    assert 0.85 < with_id / len(url_of_channel) < 0.95


def test_same_event_numbers_give_the_same_events(spark: SparkSession, events: DataFrame) -> None:
    again = _generate(spark, 0, N, partitions=3)
    assert again.exceptAll(events).count() == 0
    assert events.exceptAll(again).count() == 0
    # An event does not depend on the range or the partition it is generated in.
    middle = _generate(spark, 20_017, 20_417, partitions=1)
    assert middle.exceptAll(events.filter("n BETWEEN 20017 AND 20416")).count() == 0
    assert middle.count() == 400


def test_another_seed_gives_other_events(spark: SparkSession, events: DataFrame) -> None:
    other = _generate(spark, 0, 5_000, seed=7)
    same_kind = (
        other.alias("other")
        .join(events.alias("events"), "n")
        .filter("other.bid IS NOT NULL AND events.bid IS NOT NULL")
    )
    assert same_kind.count() == 46 * 5_000 // 50
    assert same_kind.filter("other.bid.price != events.bid.price").count() > 4_000


def test_a_stream_gives_the_same_events_then_end_of_input_markers(spark: SparkSession) -> None:
    stream = nexmark_stream(
        spark, event_rate=EPS, start_ms=BASE_MS, partitions=2, rows_per_batch=400, total=1_000
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("nexmark_generator_test")
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:

        def ended() -> int:
            assert query.isActive, query.exception()
            return spark.table("nexmark_generator_test").filter("_eoi").count()

        wait_until("an end-of-input marker", ended, 120)
    finally:
        query.stop()
    streamed = spark.table("nexmark_generator_test")
    # Batches of 400 events, the last cut at the total, then markers one at a time.
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes[:3] == [400, 400, 200] and set(sizes[3:]) <= {1}, sizes
    events = streamed.filter("NOT _eoi").drop("_eoi")
    events = events.withColumnRenamed("_source_time", "_timestamp")
    expected = _generate(spark, 0, 1_000).drop("n")
    assert events.count() == 1_000
    assert events.exceptAll(expected).count() == 0
    markers = streamed.filter("_eoi")
    assert markers.filter("coalesce(person.id, auction.id, bid.auction) IS NOT NULL").count() == 0
