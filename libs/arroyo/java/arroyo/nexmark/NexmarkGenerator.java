package arroyo.nexmark;

import java.nio.charset.StandardCharsets;
import java.util.Random;

import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;

/**
 * The Nexmark event generator: Apache Beam's GeneratorConfig / PersonGenerator /
 * AuctionGenerator / BidGenerator (which Arroyo's nexmark connector ports to Rust) restated as a
 * pure function of the event number, writing Spark's UnsafeRow directly.
 *
 * <p>Where Beam draws from one java.util.Random per event, each event here takes bits of three
 * xxHash64 hashes of its number (and the seed), so the same event number gives the same event on
 * any partition, in any micro-batch, after any restart. Ids follow Beam with firstEventId = 0 and
 * no out-of-order groups: event n is person 1000 + n / 50 when n % 50 == 0, auction
 * 1000 + 3 * (n / 50) + n % 50 - 1 when n % 50 is 1..3, and a bid otherwise; sellers, bidders
 * and bid auctions are drawn as in Beam (hot items, in-flight auctions, active people, id leads).
 * Where Beam and Arroyo's port differ this follows Beam (hot bidders are the second person of a
 * batch of 100; bid extra is sized from avgBidByteSize).
 *
 * <p>Deviations, for speed: random strings (item names, descriptions, email parts, extra padding,
 * channel URLs) are picked from pools drawn once per seed with Beam's distributions (nextString,
 * nextExtra), so there are 128 base URLs shared by the 10,000 channels (Beam draws one per
 * channel). A channel's URL carries "&channel_id=N" (as Arroyo's) in 9 channels of 10, and the
 * hot channels' URLs are Arroyo's fixed four. Times are to the microsecond.
 *
 * <p>Thread safety: an instance is immutable once built and is shared by every task thread of an
 * executor (NexmarkSource.EventRows caches one per configuration); {@link #write} keeps all of its
 * scratch state in locals and in the caller's row writers.
 */
final class NexmarkGenerator {
  static final int TOTAL_PROPORTION = 50; // 1 person : 3 auctions : 46 bids
  static final int AUCTION_PROPORTION = 3;
  static final long FIRST_PERSON_ID = 1000;
  static final long FIRST_AUCTION_ID = 1000;
  static final long FIRST_CATEGORY_ID = 10;
  static final int NUM_CATEGORIES = 5;
  static final long HOT_BATCH = 100; // hot auctions, sellers, bidders: first of each 100
  static final long NUM_IN_FLIGHT_AUCTIONS = 100;
  static final long NUM_ACTIVE_PEOPLE = 1000;
  static final long PERSON_ID_LEAD = 10;
  static final long AUCTION_ID_LEAD = 10;
  static final int CHANNELS_NUMBER = 10_000;
  static final double PRICE_SCALE = 6.0 * Math.log(10.0) / (double) (1L << 53);

  static final String[] FULL_NAMES;
  static final String[] US_CITIES = {
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
    "Kent", "Cheyenne",
  };
  static final String[] US_STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
  static final String[] HOT_CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};
  static final String[] HOT_URLS = {
    "https://www.nexmark.com/abo/eoci/cidro/item.htm?query=1",
    "https://www.nexmark.com/eoax/oad/cidro/item.htm?query=1",
    "https://www.nexmark.com/abo/jack/cidro/item.htm?query=1",
    "https://www.nexmark.com/abo/micah/cidro/item.htm?query=1",
  };

  static {
    String[] first = {
      "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
      "Walter",
    };
    String[] last = {
      "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
    };
    FULL_NAMES = new String[first.length * last.length];
    int i = 0;
    for (String f : first) {
      for (String l : last) {
        FULL_NAMES[i++] = f + " " + l;
      }
    }
  }

  private final long seed;
  private final long baseMicros;
  private final long delayMicros; // when the delay is a whole number of microseconds, else -1
  private final double delayMicrosExact;
  private final long auctionLengthSpan;

  // Pools, as UTF-8 bytes: written into rows without conversion.
  private final byte[][] fullNames = utf8(FULL_NAMES);
  private final byte[][] cities = utf8(US_CITIES);
  private final byte[][] states = utf8(US_STATES);
  private final byte[][] hotChannels = utf8(HOT_CHANNELS);
  private final byte[][] hotUrls = utf8(HOT_URLS);
  private final byte[][] emails; // 512 users x 128 domains, "user@domain.com"
  private final byte[][] itemNames;
  private final byte[][] descriptions;
  private final byte[][] personExtras;
  private final byte[][] auctionExtras;
  private final byte[][] bidExtras;
  private final byte[][] channels; // "channel-N" for N < CHANNELS_NUMBER
  private final byte[][] channelUrls;

  NexmarkGenerator(long seed, long baseMillis, double eventsPerSecond) {
    if (!(eventsPerSecond > 0)) {
      throw new IllegalArgumentException("event_rate must be positive, got " + eventsPerSecond);
    }
    this.seed = seed;
    this.baseMicros = baseMillis * 1000;
    this.delayMicrosExact = 1_000_000.0 / eventsPerSecond;
    this.delayMicros =
        delayMicrosExact == Math.rint(delayMicrosExact) ? (long) delayMicrosExact : -1;
    // Beam's nextAuctionLengthMs: uniform in [1 ms, 1 ms + 2 * horizon), the horizon being the
    // time until NUM_IN_FLIGHT_AUCTIONS more auctions will have been generated.
    long eventsForAuctions = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;
    long horizon = (long) Math.rint(eventsForAuctions * delayMicrosExact);
    this.auctionLengthSpan = Math.max(2 * horizon, 1);

    Random random = new Random(seed ^ 0x4E45584DL); // "NEXM"
    String[] users = strings(random, 512, 7, ' ');
    String[] domains = strings(random, 128, 5, ' ');
    emails = new byte[users.length * domains.length][];
    for (int u = 0; u < users.length; u++) {
      for (int d = 0; d < domains.length; d++) {
        emails[u * domains.length + d] = bytes(users[u] + "@" + domains[d] + ".com");
      }
    }
    String[] items = strings(random, 256, 20, ' ');
    String[] descs = strings(random, 128, 100, ' ');
    itemNames = utf8(items);
    descriptions = utf8(descs);
    String[] baseUrls = new String[128];
    for (int i = 0; i < baseUrls.length; i++) {
      baseUrls[i] = "https://www.nexmark.com/" + nextString(random, 5, '_') + "/"
          + nextString(random, 5, '_') + "/" + nextString(random, 5, '_') + "/item.htm?query=1";
    }
    // extra pads each event to Beam's average size given the size of its other fields; the
    // pools are drawn against sampled events of the same shape.
    personExtras = new byte[32][];
    for (int i = 0; i < personExtras.length; i++) {
      int size = 8 + pick(random, FULL_NAMES).length() + pick(random, users).length() + 1
          + pick(random, domains).length() + 4 + 19 + pick(random, US_CITIES).length() + 2;
      personExtras[i] = bytes(nextExtra(random, size, 200));
    }
    auctionExtras = new byte[32][];
    for (int i = 0; i < auctionExtras.length; i++) {
      int size = 8 + pick(random, items).length() + pick(random, descs).length() + 5 * 8;
      auctionExtras[i] = bytes(nextExtra(random, size, 500));
    }
    bidExtras = new byte[64][];
    for (int i = 0; i < bidExtras.length; i++) {
      bidExtras[i] = bytes(nextExtra(random, 4 * 8, 100));
    }
    // A channel's URL is a fixed function of its number (Beam caches one random URL per
    // channel): one of the base URLs, and for 9 channels in 10 the channel's id.
    channels = new byte[CHANNELS_NUMBER][];
    channelUrls = new byte[CHANNELS_NUMBER][];
    for (int c = 0; c < CHANNELS_NUMBER; c++) {
      channels[c] = bytes("channel-" + c);
      String base = baseUrls[(c * 7919 + 17) & 127];
      channelUrls[c] = bytes((c * 31 + 7) % 10 != 0 ? base + "&channel_id=" + c : base);
    }
  }

  /** Microseconds since the epoch of event n: base + n * (1e6 / rate), rounded down. */
  long eventMicros(long n) {
    return delayMicros >= 0
        ? baseMicros + n * delayMicros
        : baseMicros + (long) Math.floor((double) n * delayMicrosExact);
  }

  /** The first event number whose time is after {@code micros}: how many are readable by then. */
  long eventsBefore(long micros) {
    if (micros <= baseMicros) {
      return 0;
    }
    return (long) ((micros - baseMicros) / delayMicrosExact);
  }

  private long hash(long n, int salt) {
    return XXH64.hashInt(salt, XXH64.hashLong(n, seed));
  }

  private static long bits(long h, int shift, int width) {
    return (h >>> shift) & ((1L << width) - 1);
  }

  /** Beam's nextPrice: round(10 ** (6 * u) * 100), u uniform in [0, 1), from 53 bits of h. */
  private static long price(long h) {
    return (long) Math.floor(StrictMath.exp((double) (h >>> 11) * PRICE_SCALE) * 100.0 + 0.5);
  }

  /** A uniform draw in [0, bound) from 32 random bits: (bits * bound) >> 32. */
  private static long below(long bits32, long bound) {
    return (bits32 * bound) >> 32;
  }

  /** Beam's nextBase0PersonId: one of the last NUM_ACTIVE_PEOPLE people, or a few ahead. */
  private static long recentPerson(long lastPerson, long bits32) {
    long numPeople = lastPerson + 1;
    long active = Math.min(numPeople, NUM_ACTIVE_PEOPLE);
    return numPeople - active + below(bits32, active + PERSON_ID_LEAD);
  }

  /** Beam's nextBase0AuctionId: one of the in-flight auctions, or a few ahead. */
  private static long recentAuction(long lastAuction, long bits32) {
    long span = Math.min(lastAuction, NUM_IN_FLIGHT_AUCTIONS);
    return lastAuction - span + below(bits32, span + 1 + AUCTION_ID_LEAD);
  }

  /**
   * Writes event n into {@code row} (person, auction, bid, _source_time, _eoi), its three
   * structs through their own writers. {@code eoi}: an end-of-input marker (events NULL).
   */
  void write(
      long n, boolean eoi, UnsafeRowWriter row, UnsafeRowWriter person, UnsafeRowWriter auction,
      UnsafeRowWriter bid) {
    row.reset();
    row.zeroOutNullBytes();
    long micros = eventMicros(n);
    row.write(3, micros);
    row.write(4, eoi);
    if (eoi) {
      row.setNullAt(0);
      row.setNullAt(1);
      row.setNullAt(2);
      return;
    }
    long epoch = n / TOTAL_PROPORTION;
    int offset = (int) (n % TOTAL_PROPORTION);
    long h1 = hash(n, 1);
    long h2 = hash(n, 2);
    long h3 = hash(n, 3);
    // Beam's lastBase0PersonId / lastBase0AuctionId for auction and bid events.
    long lastPerson = epoch;
    long lastAuction = epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1;
    if (offset == 0) {
      row.setNullAt(1);
      row.setNullAt(2);
      int start = row.cursor();
      person.resetRowWriter();
      person.write(0, FIRST_PERSON_ID + epoch);
      person.write(1, fullNames[(int) (bits(h1, 0, 16) % fullNames.length)]);
      person.write(2, emails[(int) ((bits(h1, 48, 9) << 7) | bits(h3, 0, 7))]);
      // A buffer of its own per person event (1 in 50): one generator serves every task
      // thread of an executor, so no field of it may be written while generating.
      byte[] creditCard = new byte[19];
      for (int i = 0; i < 4; i++) {
        int digits = (int) (bits(h2, 16 * i, 16) % 10_000);
        for (int j = 3; j >= 0; j--) {
          creditCard[5 * i + j] = (byte) ('0' + digits % 10);
          digits /= 10;
        }
        if (i < 3) {
          creditCard[5 * i + 4] = ' ';
        }
      }
      person.write(3, creditCard);
      person.write(4, cities[(int) (bits(h1, 16, 16) % cities.length)]);
      person.write(5, states[(int) (bits(h1, 32, 16) % states.length)]);
      person.write(6, micros);
      person.write(7, personExtras[(int) bits(h3, 8, 5)]);
      row.setOffsetAndSizeFromPreviousCursor(0, start);
    } else if (offset <= AUCTION_PROPORTION) {
      row.setNullAt(0);
      row.setNullAt(2);
      long seller = bits(h1, 0, 2) != 0 // nextInt(hotSellersRatio = 4) > 0
          ? lastPerson - lastPerson % HOT_BATCH
          : recentPerson(lastPerson, bits(h1, 32, 32));
      long initialBid = price(h2);
      long length = 1000 + (h3 >>> 11) % auctionLengthSpan;
      int start = row.cursor();
      auction.resetRowWriter();
      auction.write(0, FIRST_AUCTION_ID - 1 + epoch * AUCTION_PROPORTION + offset);
      auction.write(1, itemNames[(int) bits(h1, 18, 8)]);
      auction.write(2, descriptions[(int) bits(h2, 0, 7)]);
      auction.write(3, initialBid);
      auction.write(4, initialBid + price(hash(n, 4)));
      auction.write(5, micros);
      auction.write(6, micros + length);
      auction.write(7, FIRST_PERSON_ID + seller);
      auction.write(8, FIRST_CATEGORY_ID + bits(h1, 2, 16) % NUM_CATEGORIES);
      auction.write(9, auctionExtras[(int) bits(h3, 0, 5)]);
      row.setOffsetAndSizeFromPreviousCursor(1, start);
    } else {
      row.setNullAt(0);
      row.setNullAt(1);
      long bidAuction = bits(h1, 0, 1) != 0 // nextInt(hotAuctionRatio = 2) > 0
          ? lastAuction - lastAuction % HOT_BATCH
          : recentAuction(lastAuction, bits(h1, 32, 32));
      // Hot bidders are the second person of their batch, so that they differ from hot sellers.
      long bidder = bits(h1, 1, 2) != 0 // nextInt(hotBiddersRatio = 4) > 0
          ? lastPerson - lastPerson % HOT_BATCH + 1
          : recentPerson(lastPerson, bits(h3, 0, 32));
      boolean hotChannel = bits(h1, 3, 1) != 0; // nextInt(HOT_CHANNELS_RATIO = 2) > 0
      int hot = (int) bits(h1, 4, 2);
      // nextInt(CHANNELS_NUMBER), from 26 bits: (bits * 10,000) >> 26.
      int channel = (int) ((bits(h1, 6, 26) * CHANNELS_NUMBER) >>> 26);
      int start = row.cursor();
      bid.resetRowWriter();
      bid.write(0, FIRST_AUCTION_ID + bidAuction);
      bid.write(1, FIRST_PERSON_ID + bidder);
      bid.write(2, price(h2));
      bid.write(3, hotChannel ? hotChannels[hot] : channels[channel]);
      bid.write(4, hotChannel ? hotUrls[hot] : channelUrls[channel]);
      bid.write(5, micros);
      bid.write(6, bidExtras[(int) bits(h3, 32, 6)]);
      row.setOffsetAndSizeFromPreviousCursor(2, start);
    }
  }

  // --- Pools --------------------------------------------------------------------------------

  /** Beam's NexmarkUtils.nextString: 3..maxLength-1 letters, 1 in 13 'special', trimmed. */
  private static String nextString(Random random, int maxLength, char special) {
    int length = 3 + random.nextInt(maxLength - 3);
    StringBuilder sb = new StringBuilder(length);
    while (length-- > 0) {
      sb.append(random.nextInt(13) == 0 ? special : (char) ('a' + random.nextInt(26)));
    }
    return sb.toString().trim();
  }

  /** Beam's nextExtra: letters padding the event to its average size, +/- 20%. */
  private static String nextExtra(Random random, int currentSize, int desiredAverageSize) {
    if (currentSize > desiredAverageSize) {
      return "";
    }
    int desired = desiredAverageSize - currentSize;
    int delta = (int) Math.round(desired * 0.2);
    int size = desired - delta + (delta == 0 ? 0 : random.nextInt(2 * delta));
    StringBuilder sb = new StringBuilder(size);
    for (int i = 0; i < size; i++) {
      sb.append((char) ('a' + random.nextInt(26)));
    }
    return sb.toString();
  }

  private static String[] strings(Random random, int count, int maxLength, char special) {
    String[] out = new String[count];
    for (int i = 0; i < count; i++) {
      out[i] = nextString(random, maxLength, special);
    }
    return out;
  }

  private static String pick(Random random, String[] values) {
    return values[random.nextInt(values.length)];
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[][] utf8(String[] values) {
    byte[][] out = new byte[values.length][];
    for (int i = 0; i < values.length; i++) {
      out[i] = bytes(values[i]);
    }
    return out;
  }
}
