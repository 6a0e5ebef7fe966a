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
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
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
 *
 * <p>Real-time mode ({@code trigger(realTime=...)}, paced streams only): each of the
 * {@code partitions} long-running tasks reads every {@code partitions}-th event, each as soon as
 * its event time comes, and reports it with its event time as its arrival time. The offset is
 * then the next event of each task ({@code {"next": [124, 125]}}), so a batch cut at any moment
 * resumes exactly. A checkpoint written in one mode is not read in the other.
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

  static final class Stream
      implements MicroBatchStream, SupportsAdmissionControl, SupportsRealTimeMode {
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
      if (json.contains("next")) {
        return TaskOffsets.fromJson(json);
      }
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
      if (startOffset instanceof TaskOffsets) {
        return startOffset; // real-time mode: its tasks, not the driver, decide how far they read
      }
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
    public void prepareForRealTimeMode() {
      if (config.rowsPerBatch > 0 || config.total >= 0) {
        throw new IllegalArgumentException(
            "nexmark: real-time mode reads a paced, unbounded stream (no rows_per_batch, no "
                + "total)");
      }
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start) {
      long[] next = start instanceof TaskOffsets
          ? ((TaskOffsets) start).next
          : TaskOffsets.startingAt(((EventOffset) start).n, config.partitions);
      InputPartition[] out = new InputPartition[next.length];
      for (int i = 0; i < next.length; i++) {
        out[i] = new Strided(i, next[i], next.length);
      }
      return out;
    }

    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
      long[] next = new long[offsets.length];
      for (PartitionOffset offset : offsets) {
        NextEvent task = (NextEvent) offset;
        next[task.task] = task.n;
      }
      return new TaskOffsets(next);
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
  }

  /** Real-time mode's offset: the next event number of each task (task i reads every k-th). */
  static final class TaskOffsets extends Offset {
    final long[] next;

    TaskOffsets(long[] next) {
      this.next = next;
    }

    static long[] startingAt(long n, int tasks) {
      long[] next = new long[tasks];
      for (int i = 0; i < tasks; i++) {
        next[i] = n + i;
      }
      return next;
    }

    static TaskOffsets fromJson(String json) {
      String list = json.substring(json.indexOf('[') + 1, json.indexOf(']')).trim();
      String[] parts = list.isEmpty() ? new String[0] : list.split(",");
      long[] next = new long[parts.length];
      for (int i = 0; i < parts.length; i++) {
        next[i] = Long.parseLong(parts[i].trim());
      }
      return new TaskOffsets(next);
    }

    @Override
    public String json() {
      StringBuilder sb = new StringBuilder("{\"next\":[");
      for (int i = 0; i < next.length; i++) {
        sb.append(i == 0 ? "" : ",").append(next[i]);
      }
      return sb.append("]}").toString();
    }
  }

  /** Where one real-time task stands: the next event it would read. */
  static final class NextEvent implements PartitionOffset {
    private static final long serialVersionUID = 1L;

    final int task;
    final long n;

    NextEvent(int task, long n) {
      this.task = task;
      this.n = n;
    }
  }

  /** A real-time task's events: {@code next}, {@code next + stride}, ... without end. */
  static final class Strided implements InputPartition {
    private static final long serialVersionUID = 1L;

    final int task;
    final long next;
    final int stride;

    Strided(int task, long next, int stride) {
      this.task = task;
      this.next = next;
      this.stride = stride;
    }
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
      if (partition instanceof Strided) {
        return new RealTimeReader(config, (Strided) partition);
      }
      Range range = (Range) partition;
      return new Reader(config, range.from, range.to);
    }
  }

  /**
   * One task's row: the executor's shared generator writing event n into this task's own row
   * writers (and its number, when asked for). Both readers hand out {@link #row()}.
   */
  static final class EventRows {
    // Pools are built once per executor JVM and configuration, not once per partition.
    private static final Map<String, NexmarkGenerator> GENERATORS =
        new java.util.concurrent.ConcurrentHashMap<>();

    final NexmarkGenerator generator;
    private final boolean eventNumber;
    private final UnsafeRowWriter row;
    private final UnsafeRowWriter person;
    private final UnsafeRowWriter auction;
    private final UnsafeRowWriter bid;

    EventRows(Config config) {
      String key = config.seed + ":" + config.startMillis + ":" + config.rate;
      if (GENERATORS.size() > 16) {
        GENERATORS.clear(); // a long-lived executor that has seen many configurations
      }
      this.generator = GENERATORS.computeIfAbsent(key, k -> config.generator());
      this.eventNumber = config.eventNumber;
      this.row = new UnsafeRowWriter(eventNumber ? 6 : 5, 256);
      this.person = new UnsafeRowWriter(row, 8);
      this.auction = new UnsafeRowWriter(row, 10);
      this.bid = new UnsafeRowWriter(row, 7);
    }

    void write(long n, boolean eoi) {
      generator.write(n, eoi, row, person, auction, bid);
      if (eventNumber) {
        row.write(5, n);
      }
    }

    InternalRow row() {
      return row.getRow();
    }
  }

  static final class Reader implements PartitionReader<InternalRow> {
    private final EventRows rows;
    private final long total;
    private final long to;
    private long next;

    Reader(Config config, long from, long to) {
      this.rows = new EventRows(config);
      this.total = config.total;
      this.next = from;
      this.to = to;
    }

    @Override
    public boolean next() {
      if (next >= to) {
        return false;
      }
      rows.write(next, total >= 0 && next >= total);
      next++;
      return true;
    }

    @Override
    public InternalRow get() {
      return rows.row();
    }

    @Override
    public void close() {}
  }

  /**
   * A real-time task: hands out each of its events once its event time has come, waiting for it
   * (parked, not spinning) up to the batch's deadline that Spark passes as the timeout.
   */
  static final class RealTimeReader implements SupportsRealTimeRead<InternalRow> {
    private final EventRows rows;
    private final int task;
    private final int stride;
    private long next;

    RealTimeReader(Config config, Strided partition) {
      this.rows = new EventRows(config);
      this.task = partition.task;
      this.stride = partition.stride;
      this.next = partition.next;
    }

    @Override
    public RecordStatus nextWithTimeout(Long timeoutMs) {
      long deadline = System.currentTimeMillis() + Math.max(0, timeoutMs);
      // The first millisecond at or after the event's time: never read before it happens.
      long due = Math.floorDiv(rows.generator.eventMicros(next) + 999, 1000);
      while (true) {
        long now = System.currentTimeMillis();
        if (due <= now) {
          break;
        }
        if (now >= deadline) {
          return RecordStatus.newStatusWithoutArrivalTime(false);
        }
        java.util.concurrent.locks.LockSupport.parkNanos(
            (Math.min(due, deadline) - now) * 1_000_000L);
        if (Thread.interrupted()) {
          Thread.currentThread().interrupt();
          return RecordStatus.newStatusWithoutArrivalTime(false);
        }
      }
      rows.write(next, false);
      next += stride;
      return RecordStatus.newStatusWithArrivalTimeMs(due);
    }

    @Override
    public boolean next() {
      return nextWithTimeout(Long.MAX_VALUE / 4).hasRecord();
    }

    @Override
    public InternalRow get() {
      return rows.row();
    }

    @Override
    public PartitionOffset getOffset() {
      return new NextEvent(task, next);
    }

    @Override
    public void close() {}
  }
}
