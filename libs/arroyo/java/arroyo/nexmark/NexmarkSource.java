package arroyo.nexmark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark data source of Nexmark events, generated in the executors' JVMs (NexmarkGenerator).
 *
 * <p>Rows: {@code person}, {@code auction}, {@code bid} (exactly one set; NULL on end-of-input
 * markers), {@code _source_time} (the event time) and {@code _eoi}. Options:
 *
 * <ul>
 *   <li>{@code event_rate} (events per second, required) and {@code start_ms} (the first event's
 *       time, required): event n happens at start_ms + n * 1000 / event_rate.
 *   <li>{@code seed} (default 0): the same seed gives the same events.
 *   <li>{@code partitions} (default 1): each batch's events are split into this many ranges.
 *   <li>{@code rows_per_batch}: streaming batches of this many events, as fast as the query takes
 *       them (throughput, tests). Without it each event becomes readable at its own event time,
 *       to the millisecond, so that the time from event time to sink is the pipeline's latency.
 *   <li>{@code total}: the number of events; a stream then gives end-of-input markers (one per
 *       batch) after them, also when resumed after the end. A batch read gives events
 *       {@code first} (default 0) to {@code total}.
 *   <li>{@code event_number} (default false): a last column {@code _event_number}, n.
 * </ul>
 *
 * <p>Streaming offsets are event numbers ({@code {"n": 123}}), so a restarted query replays
 * exactly the events it read before.
 */
public final class NexmarkSource implements TableProvider {
  static final StructType SCHEMA = StructType.fromDDL(
      "person STRUCT<id: BIGINT, name: STRING, email_address: STRING, credit_card: STRING, "
          + "city: STRING, state: STRING, datetime: TIMESTAMP, extra: STRING>, "
          + "auction STRUCT<id: BIGINT, item_name: STRING, description: STRING, "
          + "initial_bid: BIGINT, reserve: BIGINT, datetime: TIMESTAMP, expires: TIMESTAMP, "
          + "seller: BIGINT, category: BIGINT, extra: STRING>, "
          + "bid STRUCT<auction: BIGINT, bidder: BIGINT, price: BIGINT, channel: STRING, "
          + "url: STRING, datetime: TIMESTAMP, extra: STRING>, "
          + "_source_time TIMESTAMP, _eoi BOOLEAN");

  static final StructType NUMBERED_SCHEMA = SCHEMA.add("_event_number", "BIGINT");

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return options.getBoolean("event_number", false) ? NUMBERED_SCHEMA : SCHEMA;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new NexmarkTable(schema);
  }

  /** What every reader needs: serialised to the executors with each partition's factory. */
  static final class Config implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    final double rate;
    final long startMillis;
    final long seed;
    final int partitions;
    final long rowsPerBatch; // 0: paced by event time
    final long total; // -1: unbounded
    final long first;
    final boolean eventNumber;

    Config(CaseInsensitiveStringMap options) {
      rate = Double.parseDouble(required(options, "event_rate"));
      startMillis = Long.parseLong(required(options, "start_ms"));
      seed = options.getLong("seed", 0);
      partitions = Math.max(1, options.getInt("partitions", 1));
      rowsPerBatch = options.getLong("rows_per_batch", 0);
      total = options.getLong("total", -1);
      first = options.getLong("first", 0);
      eventNumber = options.getBoolean("event_number", false);
      if (!(rate > 0)) {
        throw new IllegalArgumentException("nexmark: event_rate must be positive, got " + rate);
      }
    }

    private static String required(CaseInsensitiveStringMap options, String key) {
      String value = options.get(key);
      if (value == null) {
        throw new IllegalArgumentException("nexmark: option '" + key + "' is required");
      }
      return value;
    }

    NexmarkGenerator generator() {
      return new NexmarkGenerator(seed, startMillis, rate);
    }

    /** [from, to) split into at most {@code partitions} ranges of nearly equal size. */
    InputPartition[] split(long from, long to) {
      if (to <= from) {
        return new InputPartition[0];
      }
      int k = (int) Math.min(partitions, to - from);
      InputPartition[] out = new InputPartition[k];
      for (int i = 0; i < k; i++) {
        out[i] = new Range(from + (to - from) * i / k, from + (to - from) * (i + 1) / k);
      }
      return out;
    }
  }

  static final class NexmarkTable implements Table, SupportsRead {
    private final StructType schema;

    NexmarkTable(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return "nexmark";
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      Config config = new Config(options);
      return () -> new NexmarkScan(config);
    }
  }

  static final class NexmarkScan implements Scan {
    private final Config config;

    NexmarkScan(Config config) {
      this.config = config;
    }

    @Override
    public StructType readSchema() {
      return config.eventNumber ? NUMBERED_SCHEMA : SCHEMA;
    }

    @Override
    public String description() {
      return "nexmark(event_rate=" + config.rate + ", partitions=" + config.partitions + ")";
    }

    @Override
    public Batch toBatch() {
      if (config.total < 0) {
        throw new IllegalArgumentException("nexmark: a batch read needs the option 'total'");
      }
      return new Batch() {
        @Override
        public InputPartition[] planInputPartitions() {
          return config.split(config.first, config.total);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
          return new ReaderFactory(config);
        }
      };
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new Stream(config);
    }
  }

  static final class EventOffset extends Offset {
    final long n;

    EventOffset(long n) {
      this.n = n;
    }

    @Override
    public String json() {
      return "{\"n\":" + n + "}";
    }
  }

  static final class Stream implements MicroBatchStream, SupportsAdmissionControl {
    private final Config config;
    private final NexmarkGenerator clock;

    Stream(Config config) {
      this.config = config;
      this.clock = config.generator();
    }

    @Override
    public Offset initialOffset() {
      return new EventOffset(0);
    }

    @Override
    public Offset deserializeOffset(String json) {
      String digits = json.replaceAll("[^0-9]", "");
      return new EventOffset(Long.parseLong(digits));
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return config.rowsPerBatch > 0 ? ReadLimit.maxRows(config.rowsPerBatch) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) is used instead");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
      long start = ((EventOffset) startOffset).n;
      if (config.total >= 0 && start >= config.total) {
        return new EventOffset(start + 1); // one end-of-input marker
      }
      long end = config.rowsPerBatch > 0
          ? start + config.rowsPerBatch
          : Math.max(start, clock.eventsBefore(System.currentTimeMillis() * 1000));
      if (config.total >= 0) {
        end = Math.min(end, config.total);
      }
      return new EventOffset(end);
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      return config.split(((EventOffset) start).n, ((EventOffset) end).n);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new ReaderFactory(config);
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
  }

  static final class Range implements InputPartition {
    private static final long serialVersionUID = 1L;

    final long from;
    final long to;

    Range(long from, long to) {
      this.from = from;
      this.to = to;
    }
  }

  static final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    private final Config config;

    ReaderFactory(Config config) {
      this.config = config;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      Range range = (Range) partition;
      return new Reader(config, range.from, range.to);
    }
  }

  static final class Reader implements PartitionReader<InternalRow> {
    // Pools are built once per executor JVM and configuration, not once per partition.
    private static final Map<String, NexmarkGenerator> GENERATORS =
        new java.util.concurrent.ConcurrentHashMap<>();

    private final NexmarkGenerator generator;
    private final long total;
    private final long to;
    private final boolean eventNumber;
    private long next;
    private final UnsafeRowWriter row;
    private final UnsafeRowWriter person;
    private final UnsafeRowWriter auction;
    private final UnsafeRowWriter bid;

    Reader(Config config, long from, long to) {
      String key = config.seed + ":" + config.startMillis + ":" + config.rate;
      if (GENERATORS.size() > 16) {
        GENERATORS.clear(); // a long-lived executor that has seen many configurations
      }
      this.generator = GENERATORS.computeIfAbsent(key, k -> config.generator());
      this.total = config.total;
      this.next = from;
      this.to = to;
      this.eventNumber = config.eventNumber;
      this.row = new UnsafeRowWriter(eventNumber ? 6 : 5, 256);
      this.person = new UnsafeRowWriter(row, 8);
      this.auction = new UnsafeRowWriter(row, 10);
      this.bid = new UnsafeRowWriter(row, 7);
    }

    @Override
    public boolean next() {
      if (next >= to) {
        return false;
      }
      generator.write(next, total >= 0 && next >= total, row, person, auction, bid);
      if (eventNumber) {
        row.write(5, next);
      }
      next++;
      return true;
    }

    @Override
    public InternalRow get() {
      return row.getRow();
    }

    @Override
    public void close() {}
  }
}
