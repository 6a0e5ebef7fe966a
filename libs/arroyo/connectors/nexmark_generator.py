"""The Nexmark event generator, as Spark Column expressions.

This is the standard Nexmark generator (Apache Beam's ``GeneratorConfig`` / ``PersonGenerator`` /
``AuctionGenerator`` / ``BidGenerator``, which Arroyo's ``nexmark`` connector ports to Rust)
restated as a pure function of the event number, so that it can be applied to Spark's ``rate`` /
``rate-micro-batch`` source (whose ``value`` column counts 0, 1, 2, ...) with one ``select``:

    df.select(*nexmark_columns(sf.col("value"), base_time_ms, events_per_second))

Everything is expressed with ``pyspark.sql.functions``: no Python UDFs, no per-row Python. Where
Beam draws from a ``java.util.Random``, we take bits of ``xxhash64(event_number, salt)``, so the
same event number always yields the same event, on any partition, in any micro-batch.

Ids follow Beam with ``firstEventId = 0`` and no out-of-order groups: event ``n`` is person
``1000 + n // 50`` when ``n % 50 == 0``, auction ``1000 + 3 * (n // 50) + n % 50 - 1`` when
``n % 50`` is 1..3, and a bid otherwise; sellers, bidders and bid auctions are drawn as in Beam
(hot items, in-flight auctions, active people, id leads). Where Beam and Arroyo's port differ,
this follows Beam (hot bidders are the second person of a batch; ``numPeople`` counts the
current person; bid ``extra`` is sized from ``avgBidByteSize``).

Deviations, for speed: random strings (item names, descriptions, emails, ``extra`` padding,
channel URLs) are not built character by character but picked from constant pools generated
once, at import, with Beam's length distributions (``nextString`` / ``nextExtra``); Spark folds
each pool into an array literal. So there are 128 base URLs shared by the 10,000 channels (Beam
draws one per channel), and ``extra`` is sized against typical rather than the actual sizes of
the event's other fields. A channel's URL carries ``&channel_id=<number>`` (as Arroyo) in 9
channels of 10, and the hot channels' URLs are Arroyo's fixed four. Times are to the
microsecond.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as sf

__all__ = ["NEXMARK_DDL", "nexmark_columns"]

# --- GeneratorConfig / NexmarkConfiguration defaults (Beam, and Arroyo's port) ---------------

PERSON_PROPORTION: Final = 1
AUCTION_PROPORTION: Final = 3
BID_PROPORTION: Final = 46
TOTAL_PROPORTION: Final = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

FIRST_PERSON_ID: Final = 1000
FIRST_AUCTION_ID: Final = 1000
FIRST_CATEGORY_ID: Final = 10
NUM_CATEGORIES: Final = 5

# Hot items are the first of each batch of this many (Beam's HOT_*_RATIO class constants).
HOT_AUCTION_BATCH: Final = 100
HOT_SELLER_BATCH: Final = 100
HOT_BIDDER_BATCH: Final = 100
# P(hot) = 1 - 1/ratio (NexmarkConfiguration.hotAuctionRatio / hotSellersRatio / hotBiddersRatio).
HOT_AUCTION_RATIO: Final = 2
HOT_SELLERS_RATIO: Final = 4
HOT_BIDDERS_RATIO: Final = 4

NUM_IN_FLIGHT_AUCTIONS: Final = 100
NUM_ACTIVE_PEOPLE: Final = 1000
PERSON_ID_LEAD: Final = 10
AUCTION_ID_LEAD: Final = 10

AVG_PERSON_BYTE_SIZE: Final = 200
AVG_AUCTION_BYTE_SIZE: Final = 500
AVG_BID_BYTE_SIZE: Final = 100

HOT_CHANNELS_RATIO: Final = 2
CHANNELS_NUMBER: Final = 10_000

MIN_STRING_LENGTH: Final = 3

NEXMARK_DDL: Final[str] = (
    "person STRUCT<id: BIGINT, name: STRING, email_address: STRING, credit_card: STRING, "
    "city: STRING, state: STRING, datetime: TIMESTAMP, extra: STRING>, "
    "auction STRUCT<id: BIGINT, item_name: STRING, description: STRING, initial_bid: BIGINT, "
    "reserve: BIGINT, datetime: TIMESTAMP, expires: TIMESTAMP, seller: BIGINT, "
    "category: BIGINT, extra: STRING>, "
    "bid STRUCT<auction: BIGINT, bidder: BIGINT, price: BIGINT, channel: STRING, url: STRING, "
    "datetime: TIMESTAMP, extra: STRING>"
)

FIRST_NAMES: Final = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
)  # fmt: skip
LAST_NAMES: Final = (
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
)  # fmt: skip
US_CITIES: Final = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
    "Kent", "Cheyenne",
)  # fmt: skip
US_STATES: Final = ("AZ", "CA", "ID", "OR", "WA", "WY")
FULL_NAMES: Final = tuple(f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES)
# Channel 100 * q + r (q, r < 100) is "channel-{number}": _CHANNEL_PREFIXES[q], then the
# digits of r, zero-padded if q > 0: _R_DIGITS[r + (100 if q else 0)].
_Q_DIGITS: Final = ("", *(str(i) for i in range(1, 100)))
_CHANNEL_PREFIXES: Final = tuple(f"channel-{d}" for d in _Q_DIGITS)
_CHANNEL_ID_PREFIXES: Final = tuple(f"&channel_id={d}" for d in _Q_DIGITS)
_R_DIGITS: Final = (*(str(i) for i in range(100)), *(f"{i:02d}" for i in range(100)))
HOT_CHANNELS: Final = ("Google", "Facebook", "Baidu", "Apple")
HOT_URLS: Final = (
    "https://www.nexmark.com/abo/eoci/cidro/item.htm?query=1",
    "https://www.nexmark.com/eoax/oad/cidro/item.htm?query=1",
    "https://www.nexmark.com/abo/jack/cidro/item.htm?query=1",
    "https://www.nexmark.com/abo/micah/cidro/item.htm?query=1",
)

# --- Constant string pools, drawn once with Beam's distributions -----------------------------

_POOL_SEED: Final = 0x4E45584D  # "NEXM"


def _next_string(rng: random.Random, max_length: int, special: str = " ") -> str:
    """Beam's ``NexmarkUtils.nextString``: 3..max_length-1 letters, 1 in 13 'special', trimmed."""
    length = MIN_STRING_LENGTH + rng.randrange(max_length - MIN_STRING_LENGTH)
    chars = [
        special if rng.randrange(13) == 0 else chr(97 + rng.randrange(26)) for _ in range(length)
    ]
    return "".join(chars).strip()


def _next_extra(rng: random.Random, current_size: int, desired_average_size: int) -> str:
    """Beam's ``nextExtra``: letters padding the event to its average size, +/- 20%."""
    if current_size > desired_average_size:
        return ""
    desired = desired_average_size - current_size
    delta = round(desired * 0.2)
    size = desired - delta + (rng.randrange(2 * delta) if delta else 0)
    return "".join(chr(97 + rng.randrange(26)) for _ in range(size))


def _build_pools() -> dict[str, tuple[str, ...]]:
    rng = random.Random(_POOL_SEED)
    email_users = tuple(_next_string(rng, 7) for _ in range(512))
    email_domains = tuple(_next_string(rng, 5) for _ in range(128))
    item_names = tuple(_next_string(rng, 20) for _ in range(256))
    descriptions = tuple(_next_string(rng, 100) for _ in range(128))
    # Beam's getBaseUrl, one per channel in Beam; here 128 shared by the 10,000 channels.
    base_urls = tuple(
        "https://www.nexmark.com/"
        + "/".join(_next_string(rng, 5, "_") for _ in range(3))
        + "/item.htm?query=1"
        for _ in range(128)
    )
    # `extra` pads each event to Beam's average size given the size of its other fields; the
    # pools are drawn against sampled events of the same shape.
    person_extras = []
    for _ in range(32):
        size = (
            8
            + len(rng.choice(FULL_NAMES))
            + len(rng.choice(email_users)) + 1 + len(rng.choice(email_domains)) + 4
            + 19
            + len(rng.choice(US_CITIES))
            + 2
        )  # fmt: skip
        person_extras.append(_next_extra(rng, size, AVG_PERSON_BYTE_SIZE))
    auction_extras = []
    for _ in range(32):
        size = 8 + len(rng.choice(item_names)) + len(rng.choice(descriptions)) + 5 * 8
        auction_extras.append(_next_extra(rng, size, AVG_AUCTION_BYTE_SIZE))
    bid_extras = tuple(_next_extra(rng, 4 * 8, AVG_BID_BYTE_SIZE) for _ in range(64))
    return {
        "email_users": email_users,
        "email_domains": email_domains,
        "item_names": item_names,
        "descriptions": descriptions,
        "base_urls": base_urls,
        "person_extras": tuple(person_extras),
        "auction_extras": tuple(auction_extras),
        "bid_extras": bid_extras,
    }


_POOLS: Final = _build_pools()


# --- Column helpers -----------------------------------------------------------------------------


def _lit(value: object) -> Column:
    return sf.lit(value)


def _pool(values: Sequence[str]) -> Column:
    """A constant ARRAY<STRING>; one literal (split is constant-folded), not one per element."""
    assert all("," not in v for v in values)
    return sf.split(_lit(",".join(values)), ",")


def _pick(values: Sequence[str], random_bits: Column, modulus: int | None = None) -> Column:
    """values[random_bits % modulus] (modulus defaults to len(values)); random_bits >= 0."""
    size = modulus or len(values)
    assert 0 < size <= len(values)
    if size & (size - 1) == 0:
        index = random_bits.bitwiseAND(_lit(size - 1))
    else:
        index = sf.pmod(random_bits, _lit(size))
    return sf.get(_pool(values), index.cast("int"))


def _at(values: Sequence[str], index: Column) -> Column:
    """values[index], for an index known to be in range."""
    return sf.get(_pool(values), index.cast("int"))


def _bits(h: Column, shift: int, width: int) -> Column:
    """``width`` bits of the 64-bit hash ``h``, from bit ``shift``: a non-negative BIGINT."""
    shifted = sf.shiftrightunsigned(h, shift) if shift else h
    if shift + width >= 64:
        return shifted
    return shifted.bitwiseAND(_lit((1 << width) - 1))


def _uniform(random_bits: Column, bound: int) -> Column:
    """A uniform draw in [0, bound) (Beam's ``nextLong(random, bound)``), for a constant bound."""
    return sf.pmod(random_bits, _lit(bound))


def _below(random_bits32: Column, bound: Column) -> Column:
    """A uniform draw in [0, bound) from 32 random bits, bound < 2**31: (bits * bound) >> 32.

    Multiplying and shifting instead of a modulo: no division by a variable.
    """
    return sf.shiftright(random_bits32 * bound, 32)


def _is_null(struct: Column) -> Column:
    """``struct IS NULL``, written so that the optimizer keeps ``struct`` as an operand."""
    return sf.element_at(sf.array(struct), 1).isNull()


def _div(a: Column, b: int) -> Column:
    """Integer division (Spark's ``div``), BIGINT."""
    return sf.call_function("div", a, _lit(b))


# 6 * ln(10) / 2**53: exp(bits53 * this) == 10 ** (6 * u) with u uniform in [0, 1).
_PRICE_SCALE: Final = 6.0 * math.log(10.0) / float(1 << 53)


def _next_price(h: Column) -> Column:
    """Beam's ``nextPrice``: round(10 ** (6 * u) * 100), u uniform in [0, 1), from 53 bits of h."""
    u53 = sf.shiftrightunsigned(h, 11).cast("double")
    return sf.floor(sf.exp(u53 * _lit(_PRICE_SCALE)) * _lit(100.0) + _lit(0.5))


def _recent_person(last_person: Column, random_bits32: Column) -> Column:
    """Beam's ``nextBase0PersonId``: one of the last NUM_ACTIVE_PEOPLE people, or a few ahead."""
    num_people = last_person + _lit(1)
    active = sf.least(num_people, _lit(NUM_ACTIVE_PEOPLE))
    return num_people - active + _below(random_bits32, active + _lit(PERSON_ID_LEAD))


def _recent_auction(last_auction: Column, random_bits32: Column) -> Column:
    """Beam's ``nextBase0AuctionId``: one of the in-flight auctions, or a few ahead."""
    span = sf.least(last_auction, _lit(NUM_IN_FLIGHT_AUCTIONS))
    return last_auction - span + _below(random_bits32, span + _lit(1 + AUCTION_ID_LEAD))


def _timestamp_micros(event_number: Column, base_time_ms: int, events_per_second: float) -> Column:
    """Microseconds since the epoch of an event: base + n * (1e6 / rate)."""
    if not events_per_second > 0:
        raise ValueError(f"events_per_second must be positive, got {events_per_second!r}")
    base_us = int(base_time_ms) * 1000
    delay_us = 1_000_000.0 / events_per_second
    if delay_us.is_integer():
        return _lit(base_us) + event_number * _lit(int(delay_us))
    return _lit(base_us) + sf.floor(event_number.cast("double") * _lit(delay_us))


# --- The generator ------------------------------------------------------------------------------


def nexmark_columns(
    event_number: Column, base_time_ms: int, events_per_second: float
) -> list[Column]:
    """Returns [person, auction, bid, event_time] columns.

    They are aliased 'person', 'auction', 'bid' and '_timestamp' (TIMESTAMP), the first three
    typed as in :data:`NEXMARK_DDL`.

    ``event_number`` is the Nexmark event id (0, 1, 2, ...; BIGINT, non-negative), e.g. the
    ``value`` column of the ``rate`` source. Of every 50 consecutive events (aligned on
    multiples of 50) the first is a person, the next 3 are auctions and the last 46 bids:
    exactly one of the three struct columns is non-NULL per row. Event ``n`` happens at
    ``base_time_ms + n * 1000 / events_per_second`` milliseconds (to the microsecond, rounded
    down); every struct's ``datetime`` is that time, and so is ``_timestamp``. The same event
    number always gives the same event.
    """
    n = event_number.cast("bigint")
    ts_us = _timestamp_micros(n, base_time_ms, events_per_second)
    epoch = _div(n, TOTAL_PROPORTION)
    offset = sf.pmod(n, _lit(TOTAL_PROPORTION))
    # Three hashes per row, shared by whichever kind of event the row is; each field draws from
    # its own bit range of them.
    h1 = sf.xxhash64(n, _lit(1))
    h2 = sf.xxhash64(n, _lit(2))
    h3 = sf.xxhash64(n, _lit(3))

    # Code-size and speed: Spark's subexpression elimination computes an expression once per
    # row (in a method of its own) only if it occurs twice outside conditional branches. Each
    # `x ^ x` (which is 0) below is such a double occurrence, so the hashes, the epoch and the
    # time are computed once per row, not once per use inside the CASE branches.
    kind = offset
    for shared in (h1, h2, h3, epoch, ts_us):
        kind = kind.bitwiseOR(shared.bitwiseXOR(shared))
    event_time = sf.timestamp_micros(ts_us)

    # Beam's lastBase0PersonId / lastBase0AuctionId for auction and bid events (offset >= 1):
    # the person of this epoch, and the last auction at or before this event.
    last_person = epoch
    last_auction = epoch * _lit(AUCTION_PROPORTION) + _lit(AUCTION_PROPORTION - 1)

    # --- auction (offsets 1..3): AuctionGenerator.nextAuction ---
    hot_seller = _bits(h1, 0, 2) != _lit(0)  # nextInt(hotSellersRatio = 4) > 0
    seller = sf.when(hot_seller, last_person - sf.pmod(last_person, _lit(HOT_SELLER_BATCH)))
    seller = seller.otherwise(_recent_person(last_person, _bits(h1, 32, 32)))
    initial_bid = _next_price(h2)
    # nextAuctionLengthMs: uniform in [1 ms, 1 ms + 2 * horizon), the horizon being the time
    # until NUM_IN_FLIGHT_AUCTIONS more auctions will have been generated.
    events_for_auctions = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION
    horizon_us = round(events_for_auctions * 1_000_000.0 / events_per_second)
    auction_length_us = _lit(1000) + _uniform(_bits(h3, 11, 53), max(2 * horizon_us, 1))
    auction = sf.struct(
        (
            _lit(FIRST_AUCTION_ID - PERSON_PROPORTION) + epoch * _lit(AUCTION_PROPORTION) + offset
        ).alias("id"),
        _pick(_POOLS["item_names"], _bits(h1, 18, 14)).alias("item_name"),
        _pick(_POOLS["descriptions"], _bits(h2, 0, 11)).alias("description"),
        initial_bid.alias("initial_bid"),
        (initial_bid + _next_price(sf.xxhash64(n, _lit(4)))).alias("reserve"),
        event_time.alias("datetime"),
        sf.timestamp_micros(ts_us + auction_length_us).alias("expires"),
        (_lit(FIRST_PERSON_ID) + seller).alias("seller"),
        (_lit(FIRST_CATEGORY_ID) + _uniform(_bits(h1, 2, 16), NUM_CATEGORIES)).alias("category"),
        _pick(_POOLS["auction_extras"], _bits(h3, 0, 11)).alias("extra"),
    )

    # --- bid (offsets 4..49): BidGenerator.nextBid ---
    hot_auction = _bits(h1, 0, 1) != _lit(0)  # nextInt(hotAuctionRatio = 2) > 0
    bid_auction = sf.when(
        hot_auction, last_auction - sf.pmod(last_auction, _lit(HOT_AUCTION_BATCH))
    ).otherwise(_recent_auction(last_auction, _bits(h1, 32, 32)))
    hot_bidder = _bits(h1, 1, 2) != _lit(0)  # nextInt(hotBiddersRatio = 4) > 0
    bidder = sf.when(
        # The second person of the batch, so that hot bidders and hot sellers differ.
        hot_bidder,
        last_person - sf.pmod(last_person, _lit(HOT_BIDDER_BATCH)) + _lit(1),
    ).otherwise(_recent_person(last_person, _bits(h3, 0, 32)))
    hot_channel = _bits(h1, 3, 1) != _lit(0)  # nextInt(HOT_CHANNELS_RATIO = 2) > 0
    hot_index = _bits(h1, 4, 2)
    # Other channels: nextInt(CHANNELS_NUMBER = 10_000) drawn as 100 * q + r; the name and URL
    # are spelled from constant pools (see _CHANNEL_PREFIXES) rather than by casting numbers.
    q = _uniform(_bits(h1, 6, 12), 100)
    r = _uniform(_bits(h1, 18, 12), 100)
    r_digits = _at(_R_DIGITS, r + sf.least(q, _lit(1)) * _lit(100))
    channel_number = q * _lit(100) + r
    # A channel's URL is a fixed function of its number (Beam caches one random URL per
    # channel): one of the base URLs, and for 9 channels in 10 the channel's id.
    channel_base_url = _pick(_POOLS["base_urls"], channel_number * _lit(7919) + _lit(17))
    channel_url = sf.when(
        sf.pmod(channel_number * _lit(31) + _lit(7), _lit(10)) != _lit(0),
        sf.concat(channel_base_url, _at(_CHANNEL_ID_PREFIXES, q), r_digits),
    ).otherwise(channel_base_url)
    bid = sf.struct(
        (_lit(FIRST_AUCTION_ID) + bid_auction).alias("auction"),
        (_lit(FIRST_PERSON_ID) + bidder).alias("bidder"),
        _next_price(h2).alias("price"),
        sf.when(hot_channel, _pick(HOT_CHANNELS, hot_index))
        .otherwise(sf.concat(_at(_CHANNEL_PREFIXES, q), r_digits))
        .alias("channel"),
        sf.when(hot_channel, _pick(HOT_URLS, hot_index)).otherwise(channel_url).alias("url"),
        event_time.alias("datetime"),
        _pick(_POOLS["bid_extras"], _bits(h3, 32, 8)).alias("extra"),
    )

    # --- person (offset 0): PersonGenerator.nextPerson ---
    person = sf.struct(
        (_lit(FIRST_PERSON_ID) + epoch).alias("id"),
        _pick(FULL_NAMES, _bits(h1, 0, 16)).alias("name"),
        sf.concat(
            _pick(_POOLS["email_users"], _bits(h1, 48, 9)),
            _lit("@"),
            _pick(_POOLS["email_domains"], _bits(h3, 0, 7)),
            _lit(".com"),
        ).alias("email_address"),
        sf.concat_ws(
            " ",
            *(
                sf.lpad(_uniform(_bits(h2, 16 * i, 16), 10_000).cast("string"), 4, "0")
                for i in range(4)
            ),
        ).alias("credit_card"),
        _pick(US_CITIES, _bits(h1, 16, 16)).alias("city"),
        _pick(US_STATES, _bits(h1, 32, 16)).alias("state"),
        event_time.alias("datetime"),
        _pick(_POOLS["person_extras"], _bits(h3, 8, 8)).alias("extra"),
    )

    is_person = kind < _lit(PERSON_PROPORTION)
    is_bid = kind >= _lit(PERSON_PROPORTION + AUCTION_PROPORTION)
    bid_col = sf.when(is_bid, bid)
    auction_col = sf.when(~is_person & ~is_bid, auction)
    # Also for code size: the person condition re-tests that the auction and bid columns are
    # NULL (as they are whenever kind = 0). Used twice, each of those becomes a shared
    # subexpression, generated as a method of its own, rather than all three events being
    # inlined into one method too large for the JIT. (`element_at(array(x), 1) IS NULL` is
    # `x IS NULL` in a form the optimizer leaves alone: it rewrites `x IS NULL` to `NOT c`.)
    person_col = sf.when(
        is_person & _is_null(auction_col) & _is_null(bid_col),
        person,
    )
    return [
        person_col.alias("person"),
        auction_col.alias("auction"),
        bid_col.alias("bid"),
        event_time.alias("_timestamp"),
    ]
