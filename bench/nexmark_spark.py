"""The Nexmark queries written by hand in PySpark: the peer that measures what our layers cost.

Each takes the Nexmark event stream (the same generator our ``nexmark`` connector runs, with
event time ``_timestamp`` and the same 1 s watermark delay) and returns the DataFrame to run and
its output mode. They are written as a PySpark engineer would write them for the same results as
``bench/nexmark/queries/qN.sql`` under Arroyo's semantics: windows are Spark's ``window`` /
``session_window``, a windowed result's event time is ``window_time`` (so results can be
windowed or joined again), and joins without windows carry the time bound that Arroyo's
``updating_ttl`` (24 hours by default) implies, which is also what lets Spark drop their state.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, GroupedData
from pyspark.sql import functions as F

Query = Callable[[DataFrame], tuple[DataFrame, str]]
TTL = F.expr("INTERVAL 24 HOURS")
CHANNEL_ID = F.nullif(F.regexp_extract(F.col("bid.url"), "(&|^)channel_id=([^&]*)", 2), F.lit(""))


def _bids(events: DataFrame) -> DataFrame:
    return events.filter(F.col("bid").isNotNull())


def _window_time(grouped: DataFrame) -> DataFrame:
    return grouped.withColumn("_timestamp", F.window_time("window"))


def _counts_by_rank() -> list[Column]:
    price = F.col("bid.price")
    return [
        F.count("*").alias("total_bids"),
        F.count(F.when(price < 10_000, 1)).alias("rank1_bids"),
        F.count(F.when((price >= 10_000) & (price < 1_000_000), 1)).alias("rank2_bids"),
        F.count(F.when(price >= 1_000_000, 1)).alias("rank3_bids"),
    ]


def _bid_statistics(groups: GroupedData) -> DataFrame:
    """q15's and q16's figures per group: bids by price rank, distinct bidders and auctions."""
    return groups.agg(
        *_counts_by_rank(),
        F.size(F.collect_set("bid.bidder")).alias("total_bidders"),
        F.size(F.collect_set("bid.auction")).alias("total_auctions"),
    )


def _day() -> Column:
    return F.date_format("bid.datetime", "yyyy-MM-dd").alias("day")


def q0(events: DataFrame) -> tuple[DataFrame, str]:
    cols = ["auction", "bidder", "price", "datetime", "extra"]
    return _bids(events).select(*[F.col(f"bid.{c}").alias(c) for c in cols]), "append"


def q1(events: DataFrame) -> tuple[DataFrame, str]:
    return _bids(events).select(
        F.col("bid.auction").alias("auction"),
        F.col("bid.bidder").alias("bidder"),
        (F.lit(0.908) * F.col("bid.price")).alias("price"),
        F.col("bid.datetime").alias("datetime"),
        F.col("bid.extra").alias("extra"),
    ), "append"


def q2(events: DataFrame) -> tuple[DataFrame, str]:
    bids = _bids(events).filter(F.col("bid.auction") % 123 == 0)
    return bids.select(
        F.col("bid.auction").alias("auction"), F.col("bid.price").alias("price")
    ), "append"


def q3(events: DataFrame) -> tuple[DataFrame, str]:
    person = events.filter(F.col("person").isNotNull()).select(
        "person.id", "person.name", "person.city", "person.state", F.col("_timestamp").alias("pt")
    )
    auction = events.filter(F.col("auction").isNotNull()).select(
        "auction.id", "auction.seller", "auction.category", F.col("_timestamp").alias("at")
    )
    a, p = auction.alias("A"), person.alias("P")
    joined = a.join(
        p,
        (F.col("A.seller") == F.col("P.id"))
        & F.col("P.pt").between(F.col("A.at") - TTL, F.col("A.at") + TTL),
    )
    joined = joined.filter((F.col("A.category") == 10) & F.col("P.state").isin("OR", "ID", "CA"))
    return joined.select("P.name", "P.city", "P.state", "A.id"), "append"


def q5(events: DataFrame) -> tuple[DataFrame, str]:
    bids = _bids(events)
    counts = bids.groupBy(
        F.col("bid.auction").alias("auction"),
        F.window("_timestamp", "10 seconds", "2 seconds").alias("window"),
    ).agg(F.count("*").alias("num"))
    counts = _window_time(counts)
    maxima = _window_time(counts.groupBy("window").agg(F.max("num").alias("maxn")))
    c, m = counts.alias("C"), maxima.alias("M")
    joined = c.join(m, F.col("C.window") == F.col("M.window"))
    return joined.filter(F.col("C.num") >= F.col("M.maxn")).select("C.auction", "C.num"), "append"


def q7(events: DataFrame) -> tuple[DataFrame, str]:
    bids = _bids(events)
    window = F.window("_timestamp", "10 seconds").alias("window")
    distinct = bids.groupBy(
        F.col("bid.auction").alias("auction"),
        F.col("bid.price").alias("price"),
        F.col("bid.bidder").alias("bidder"),
        window,
    ).agg(F.count("*").alias("_n"))
    distinct = _window_time(distinct)
    maxima = _window_time(bids.groupBy(window).agg(F.max("bid.price").alias("maxprice")))
    b, m = distinct.alias("B"), maxima.alias("M")
    joined = b.join(m, F.col("B.window") == F.col("M.window"))
    joined = joined.filter(F.col("B.price") == F.col("M.maxprice"))
    return joined.select("B.auction", "B.price", "B.bidder"), "append"


def q8(events: DataFrame) -> tuple[DataFrame, str]:
    window = F.window("_timestamp", "10 seconds").alias("window")
    people = events.filter(F.col("person").isNotNull()).groupBy(
        F.col("person.id").alias("id"), F.col("person.name").alias("name"), window
    )
    people = _window_time(people.agg(F.count("*").alias("_n")))
    sellers = events.filter(F.col("auction").isNotNull()).groupBy(
        F.col("auction.seller").alias("seller"), window
    )
    sellers = _window_time(sellers.agg(F.count("*").alias("_n")))
    p, a = people.alias("P"), sellers.alias("A")
    same = (F.col("P.id") == F.col("A.seller")) & (F.col("P.window") == F.col("A.window"))
    joined = p.join(a, same)
    return joined.select("P.id", "P.name", F.col("P.window.start").alias("starttime")), "append"


def q10(events: DataFrame) -> tuple[DataFrame, str]:
    df, mode = q0(events)
    return df.select(
        "*",
        F.date_format("datetime", "yyyy-MM-dd").alias("dt"),
        F.date_format("datetime", "HH:mm").alias("hm"),
    ), mode


def q11(events: DataFrame) -> tuple[DataFrame, str]:
    sessions = _bids(events).groupBy(
        F.col("bid.bidder").alias("bidder"),
        F.session_window("_timestamp", "10 seconds").alias("window"),
    )
    return sessions.agg(F.count("*").alias("bid_count")), "append"


def q12(events: DataFrame) -> tuple[DataFrame, str]:
    windows = _bids(events).groupBy(
        F.col("bid.bidder").alias("bidder"), F.window("_timestamp", "10 seconds").alias("window")
    )
    return windows.agg(F.count("*").alias("bid_count")), "append"


def q13(events: DataFrame) -> tuple[DataFrame, str]:
    # Bids joined with a static table: a stream-static join, the table read per micro-batch.
    from nexmark_side_input import side_input_file

    side = events.sparkSession.read.json(str(side_input_file()), schema="key BIGINT, value STRING")
    bids = _bids(events)
    joined = bids.join(side, (F.col("bid.auction") % 10000) == side["key"])
    columns = ("bid.auction", "bid.bidder", "bid.price", "bid.datetime", "value")
    return joined.select(*columns), "append"


def q14(events: DataFrame) -> tuple[DataFrame, str]:
    price = F.lit(0.908) * F.col("bid.price")
    hour = F.hour("bid.datetime")
    bid_time_type = (
        F.when((hour >= 8) & (hour <= 18), "dayTime")
        .when((hour <= 6) | (hour >= 20), "nightTime")
        .otherwise("otherTime")
    )
    extra = F.col("bid.extra")
    bids = _bids(events).filter((price > 1_000_000) & (price < 50_000_000))
    return bids.select(
        F.col("bid.auction").alias("auction"),
        F.col("bid.bidder").alias("bidder"),
        price.alias("price"),
        bid_time_type.alias("bid_time_type"),
        F.col("bid.datetime").alias("datetime"),
        extra.alias("extra"),
        (F.length(extra) - F.length(F.replace(extra, F.lit("c"), F.lit("")))).alias("c_counts"),
    ), "append"


def q15(events: DataFrame) -> tuple[DataFrame, str]:
    return _bid_statistics(_bids(events).groupBy(_day())), "update"


def q16(events: DataFrame) -> tuple[DataFrame, str]:
    by_channel = _bids(events).groupBy(F.col("bid.channel").alias("channel"), _day())
    return _bid_statistics(by_channel), "update"


def q17(events: DataFrame) -> tuple[DataFrame, str]:
    days = _bids(events).groupBy(F.col("bid.auction").alias("auction"), _day())
    price = F.col("bid.price")
    return days.agg(
        *_counts_by_rank(),
        F.min(price).alias("min_price"),
        F.max(price).alias("max_price"),
        F.avg(price).alias("avg_price"),
        F.sum(price).alias("sum_price"),
    ), "update"


def q18(events: DataFrame) -> tuple[DataFrame, str]:
    # The last bid of each bidder on each auction, as a PySpark user states it on a stream.
    last = F.max_by(F.struct("bid.price"), "bid.datetime")
    keys = (F.col("bid.bidder").alias("bidder"), F.col("bid.auction").alias("auction"))
    grouped = _bids(events).groupBy(*keys).agg(last.alias("last"))
    return grouped.select("auction", "bidder", "last.price"), "update"


def q19(events: DataFrame) -> tuple[DataFrame, str]:
    # The ten highest bids of each auction: a bounded heap per auction, one row per rank.
    top = F.max_by(F.struct("bid.price"), "bid.price", 10)
    grouped = _bids(events).groupBy(F.col("bid.auction").alias("auction")).agg(top.alias("top"))
    ranked = grouped.select("auction", F.posexplode("top").alias("rank", "bid"))
    return ranked.select("auction", "bid.price", (F.col("rank") + 1).alias("rank_number")), "update"


def q20(events: DataFrame) -> tuple[DataFrame, str]:
    bids = _bids(events).select("bid.*", F.col("_timestamp").alias("bt"))
    auctions = events.filter(F.col("auction").isNotNull()).select(
        "auction.*", F.col("_timestamp").alias("at")
    )
    b, a = bids.alias("B"), auctions.alias("A")
    joined = b.join(
        a,
        (F.col("B.auction") == F.col("A.id"))
        & F.col("A.at").between(F.col("B.bt") - TTL, F.col("B.bt") + TTL),
    ).filter(F.col("A.category") == 10)
    return joined.select(
        "B.auction", "B.bidder", "B.price", "B.channel", "B.url",
        F.col("B.datetime").alias("bid_datetime"),
        "A.item_name", "A.description", "A.initial_bid", "A.reserve",
        F.col("A.datetime").alias("auction_datetime"),
        "A.expires", "A.seller", "A.category",
    ), "append"  # fmt: skip


def q21(events: DataFrame) -> tuple[DataFrame, str]:
    channel = F.lower("bid.channel")
    channel_id = (
        F.when(channel == "apple", "0")
        .when(channel == "google", "1")
        .when(channel == "facebook", "2")
        .when(channel == "baidu", "3")
        .otherwise(CHANNEL_ID)
    )
    bids = _bids(events).filter(
        CHANNEL_ID.isNotNull() | channel.isin("apple", "google", "facebook", "baidu")
    )
    return bids.select(
        "bid.auction", "bid.bidder", "bid.price", "bid.channel", channel_id.alias("channel_id")
    ), "append"


def q22(events: DataFrame) -> tuple[DataFrame, str]:
    url = F.col("bid.url")
    slash = F.lit("/")
    return _bids(events).select(
        "bid.auction",
        "bid.bidder",
        "bid.price",
        "bid.channel",
        F.split_part(url, slash, F.lit(4)).alias("dir1"),
        F.split_part(url, slash, F.lit(5)).alias("dir2"),
        F.split_part(url, slash, F.lit(6)).alias("dir3"),
    ), "append"


QUERIES: dict[str, Query] = {
    name: fn for name, fn in globals().items() if name[0] == "q" and name[1:].isdigit()
}
