package arroyo.sql;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.TaskContext;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;


/**
 * A keyed tumbling or hopping window aggregate (GROUP BY key, hop(slide, width)) whose state is
 * kept per pane (a slide-wide slice of time) rather than per key and window, as Arroyo and
 * Flink keep it. It gives partial results, one row per key, window and input partition that saw
 * the key in the window; a batch aggregate sums them into the window's rows ({@link #aggregate}
 * says how). The planner runs it for a windowed aggregate whose rows go to per-batch queries
 * alone (Nexmark q5): all of a window's partial rows come out in the micro-batch in which the
 * watermark passes the window's end, so summing each batch's rows gives each window whole.
 *
 * <p>Why: Spark's windowed aggregate expands each row into its windows (five for Nexmark q5's
 * 10-second windows every 2 seconds), keeps one RocksDB entry per key and window, reads and
 * writes each in every batch that touches it, and reads its whole store in every batch to find
 * the windows the watermark has closed. Here each input partition sums its rows per key and
 * pane, and a micro-batch's sums for a pane are stored as one state value (per bucket of keys,
 * so that the tasks share the work), written by that batch and read at each end of a window the
 * pane belongs to, then written again with the ends still to come (Spark stores the timeout
 * with the value). Nothing is read or written per key, and nothing reads the whole store but
 * Spark's scan for timeouts, over a few values per bucket.
 *
 * <p>Late rows as in Spark's windowed aggregate: a row counts in its windows that the watermark
 * had not passed before the batch. Each partition tags, per bucket and pane, one marker row with
 * the end of each window the pane belongs to, as a timestamp carrying the watermark: Spark's
 * check of late rows drops the markers of the windows already closed, and the pane's rows of
 * the batch go into the windows whose markers remain. A window comes out once the watermark
 * reaches its end (end at or before the watermark, Spark's rule), by an event-time timeout.
 *
 * <p>Functions: {@code count} (of non-null values; the planner passes a constant for
 * {@code count(*)}), {@code sum} (integral values as a long, overflow an error as under ANSI,
 * floating ones as a double), {@code avg} (a double), {@code min} and {@code max} (of integral
 * and floating values, of their own type; NaN highest, as Spark orders doubles). Keys must be of
 * types whose Java values compare as Spark groups them (not floating, binary or collated).
 * {@link #aggregate} refuses anything else with an {@code IllegalArgumentException}, and the
 * planner then leaves the aggregate to Spark.
 */
public final class WindowAggregate {
  private WindowAggregate() {}

  // Spark's metadata key marking the column that carries the watermark (EventTimeWatermark).
  private static final String WATERMARK_KEY = "spark.watermarkDelayMs";
  // The local property in which Spark gives a micro-batch's tasks its id.
  private static final String BATCH_ID = "streaming.sql.batchId";

  /**
   * The partial results of the aggregate over {@code input}, whose first {@code keyCount}
   * columns are the group's keys, then its event time {@code time} (a timestamp carrying the
   * watermark), then one argument column per function of {@code kinds}. Windows are {@code
   * widthUs} wide and start every {@code slideUs} (a divisor of the width) from the epoch.
   *
   * <p>The rows: the keys, {@code __start} and {@code __end} (the window's, microseconds), and
   * per function {@code __v<i>} and {@code __n<i>}: its value over the rows summed (null where
   * none had a value; for avg, their sum) and the number of values. A window's result for a
   * key is {@code sum(__n)} for count, {@code sum(__v)} for sum, {@code min(__v)} and {@code
   * max(__v)}, and {@code sum(__v) / sum(__n)} for avg, over its rows.
   */
  public static Dataset<Row> aggregate(
      Dataset<Row> input,
      int keyCount,
      String time,
      String[] kinds,
      long widthUs,
      long slideUs,
      int buckets) {
    StructType schema = input.schema();
    StructField[] fields = schema.fields();
    if (fields.length != keyCount + 1 + kinds.length) {
      throw new IllegalArgumentException(
          "expected " + keyCount + " keys, a time and " + kinds.length + " arguments, got "
              + schema);
    }
    if (keyCount == 0) {
      throw new IllegalArgumentException("a window aggregate without keys stays with Spark");
    }
    if (slideUs < 1000 || widthUs % slideUs != 0 || buckets <= 0) {
      // Event-time timeouts are in milliseconds (and must be positive).
      throw new IllegalArgumentException(
          "a slide of at least a millisecond, and a width a multiple of it");
    }
    StructField timeField = fields[keyCount];
    if (!timeField.name().equals(time) || !timeField.dataType().equals(DataTypes.TimestampType)
        || !timeField.metadata().contains(WATERMARK_KEY)) {
      throw new IllegalArgumentException("the event time must be a timestamp with a watermark");
    }
    Metadata watermark = timeField.metadata();
    StructType keySchema = new StructType();
    for (int i = 0; i < keyCount; i++) {
      checkKey(fields[i]);
      keySchema = keySchema.add(fields[i].name(), fields[i].dataType(), true);
    }
    Function[] fns = new Function[kinds.length];
    for (int i = 0; i < kinds.length; i++) {
      fns[i] = Function.of(kinds[i], fields[keyCount + 1 + i].dataType());
      if (kinds[i].equals("sum") && !fns[i].floating && !SQLConf.get().ansiEnabled()) {
        // Without ANSI, Spark's sum of BIGINTs wraps around where this one fails.
        throw new IllegalArgumentException("an integral sum without ANSI stays with Spark");
      }
    }

    // What each partition gives per bucket, pane and batch: markers (the end of a window of
    // the pane) and sums (keys, then two longs per function).
    StructType groupSchema = new StructType()
        .add("__bucket", DataTypes.IntegerType, false)
        .add("__pane", DataTypes.LongType, false)
        .add("__batch", DataTypes.LongType, false);
    StructType sliceSchema = groupSchema.add("__marker", DataTypes.LongType, true);
    for (StructField key : keySchema.fields()) {
      sliceSchema = sliceSchema.add(key);
    }
    for (int i = 0; i < fns.length; i++) {
      sliceSchema = sliceSchema
          .add("__s" + i, DataTypes.LongType, false)
          .add("__c" + i, DataTypes.LongType, false);
    }
    // The time as microseconds: a long for each row, not a Timestamp object.
    Column[] plain = new Column[fields.length];
    for (int i = 0; i < fields.length; i++) {
      plain[i] = i == keyCount
          ? functions.unix_micros(col(time)).as(time)
          : col(fields[i].name());
    }
    Dataset<Row> slices = input.select(plain).mapPartitions(
        new Slices(
            keyCount,
            keyCount == 1 && fields[0].dataType().equals(DataTypes.LongType),
            fns,
            widthUs,
            slideUs,
            buckets), Encoders.row(sliceSchema));
    // The time Spark checks for lateness: a marker's window end, and a sum's last window end
    // (a sum whose windows are all closed is dropped whole).
    Column[] tagged = new Column[sliceSchema.size() + 1];
    for (int i = 0; i < sliceSchema.size(); i++) {
      tagged[i] = col(sliceSchema.fields()[i].name());
    }
    tagged[sliceSchema.size()] = functions.timestamp_micros(functions.coalesce(
            col("__marker"), col("__pane").plus(widthUs))).as("__late", watermark);
    StructType taggedSchema =
        sliceSchema.add("__late", DataTypes.TimestampType, true, watermark);

    StructType partialSchema = keySchema
        .add("__start", DataTypes.LongType, false)
        .add("__end", DataTypes.LongType, false);
    for (int i = 0; i < fns.length; i++) {
      partialSchema = partialSchema
          .add("__v" + i, fns[i].partialType(), true)
          .add("__n" + i, DataTypes.LongType, false);
    }
    return slices
        .select(tagged)
        .groupBy(col("__bucket"), col("__pane"), col("__batch"))
        .as(Encoders.row(groupSchema), Encoders.row(taggedSchema))
        .flatMapGroupsWithState(
            new Panes(keyCount, fns, widthUs, taggedSchema),
            OutputMode.Append(),
            Encoders.BINARY(),
            Encoders.row(partialSchema),
            GroupStateTimeout.EventTimeTimeout());
  }

  private static void checkKey(StructField field) {
    DataType type = field.dataType();
    boolean comparable = !(type instanceof BinaryType || type instanceof ArrayType
        || type instanceof MapType || type instanceof StructType
        || type.equals(DataTypes.FloatType) || type.equals(DataTypes.DoubleType)
        || (type instanceof StringType s && !s.supportsBinaryEquality()));
    if (!comparable) {
      throw new IllegalArgumentException(
          "key " + field.name() + " of type " + type.simpleString() + " stays with Spark");
    }
  }

  private static Column col(String name) {
    return functions.col("`" + name.replace("`", "``") + "`");
  }

  /** One aggregate function: its kind and whether it works on doubles (else on longs). */
  static final class Function implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final String kind;
    final DataType argument;
    final boolean floating;

    private Function(String kind, DataType argument, boolean floating) {
      this.kind = kind;
      this.argument = argument;
      this.floating = floating;
    }

    static Function of(String kind, DataType argument) {
      boolean integral = argument.equals(DataTypes.ByteType)
          || argument.equals(DataTypes.ShortType) || argument.equals(DataTypes.IntegerType)
          || argument.equals(DataTypes.LongType);
      boolean floating =
          argument.equals(DataTypes.FloatType) || argument.equals(DataTypes.DoubleType);
      switch (kind) {
        case "count":
          return new Function(kind, argument, false);
        case "sum", "min", "max":
          if (integral || floating) {
            return new Function(kind, argument, floating);
          }
          break;
        case "avg":
          if (integral || floating) {
            return new Function(kind, argument, true);
          }
          break;
        default:
          break;
      }
      throw new IllegalArgumentException(
          kind + " of " + argument.simpleString() + " stays with Spark");
    }

    /** The type of its partial value ({@code __v}): what the batch aggregate sums, or takes
     * the least or greatest of. */
    DataType partialType() {
      return switch (kind) {
        case "count" -> DataTypes.LongType;
        case "sum", "avg" -> floating ? DataTypes.DoubleType : DataTypes.LongType;
        default -> argument;
      };
    }

    /** Adds a row's argument to a partial (value, count of non-null values). */
    void add(long[] partial, int at, Object value) {
      if (value == null) {
        return;
      }
      if (kind.equals("count")) {
        partial[at + 1]++;
      } else if (floating) {
        merge(partial, at, Double.doubleToRawLongBits(((Number) value).doubleValue()), 1);
      } else {
        merge(partial, at, ((Number) value).longValue(), 1);
      }
    }

    /** Merges a partial (its value and count) into another. */
    void merge(long[] partial, int at, long value, long count) {
      if (count == 0) {
        return;
      }
      long n = partial[at + 1];
      partial[at + 1] = n + count;
      if (kind.equals("count")) {
        return;
      }
      if (n == 0) {
        partial[at] = value;
      } else if (kind.equals("sum") || kind.equals("avg")) {
        partial[at] = floating
            ? Double.doubleToRawLongBits(
                Double.longBitsToDouble(partial[at]) + Double.longBitsToDouble(value))
            : sumExact(partial[at], value);
      } else {
        int order = floating
            ? compareDoubles(Double.longBitsToDouble(value), Double.longBitsToDouble(partial[at]))
            : Long.compare(value, partial[at]);
        if (kind.equals("max") ? order > 0 : order < 0) {
          partial[at] = value;
        }
      }
    }

    private static long sumExact(long a, long b) {
      try {
        return Math.addExact(a, b);
      } catch (ArithmeticException e) {
        throw new ArithmeticException(
            "sum overflows BIGINT in a window aggregate; cast its argument to DECIMAL or DOUBLE");
      }
    }

    /** Spark's order of doubles: NaN above all, -0.0 equal to 0.0. */
    private static int compareDoubles(double a, double b) {
      if (Double.isNaN(a)) {
        return Double.isNaN(b) ? 0 : 1;
      }
      if (Double.isNaN(b)) {
        return -1;
      }
      return a < b ? -1 : (a > b ? 1 : 0);
    }

    /** The value of a partial, as a value of {@link #partialType}: null without values. */
    Object value(long[] partial, int at) {
      long n = partial[at + 1];
      if (kind.equals("count")) {
        return n;
      }
      if (n == 0) {
        return null;
      }
      long v = partial[at];
      if (kind.equals("sum") || kind.equals("avg")) {
        return floating ? (Object) Double.longBitsToDouble(v) : (Object) v;
      }
      if (argument.equals(DataTypes.ByteType)) {
        return (byte) v;
      } else if (argument.equals(DataTypes.ShortType)) {
        return (short) v;
      } else if (argument.equals(DataTypes.IntegerType)) {
        return (int) v;
      } else if (argument.equals(DataTypes.FloatType)) {
        return (float) Double.longBitsToDouble(v);
      } else if (argument.equals(DataTypes.DoubleType)) {
        return Double.longBitsToDouble(v);
      }
      return v;
    }
  }

  /** A key's values and a pane's start: what a partition's rows are summed by. */
  static final class PaneKey {
    final Object[] keys;
    final long pane;
    private final int hash;

    PaneKey(Object[] keys, long pane) {
      this.keys = keys;
      this.pane = pane;
      this.hash = 31 * Arrays.hashCode(keys) + Long.hashCode(pane);
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof PaneKey k && k.pane == pane && Arrays.equals(k.keys, keys);
    }
  }

  /** The first step, per input partition: its sums per key and pane, and its markers. */
  static final class Slices implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int keyCount;
    private final boolean longKey;
    private final Function[] fns;
    private final long widthUs;
    private final long slideUs;
    private final int buckets;

    Slices(int keyCount, boolean longKey, Function[] fns, long widthUs, long slideUs,
        int buckets) {
      this.keyCount = keyCount;
      this.longKey = longKey;
      this.fns = fns;
      this.widthUs = widthUs;
      this.slideUs = slideUs;
      this.buckets = buckets;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> input) {
      // The batch's sums are a state value of their own (see Panes); without a batch id
      // (outside a streaming query) a pane's sums of every batch are one value.
      TaskContext task = TaskContext.get();
      String id = task == null ? null : task.getLocalProperty(BATCH_ID);
      long batch = id == null ? -1 : Long.parseLong(id);
      int slots = 2 * fns.length;
      Map<PaneKey, long[]> panes = new HashMap<>();
      LongPanes longPanes = new LongPanes(slots);
      int time = keyCount;
      while (input.hasNext()) {
        Row row = input.next();
        if (row.isNullAt(time)) {
          continue;  // no time, no window (Spark's window() is null for it)
        }
        long t = row.getLong(time);
        long pane = t - Math.floorMod(t, slideUs);
        long[] partial;
        if (longKey && !row.isNullAt(0)) {
          partial = longPanes.partial(row.getLong(0), pane);
        } else {
          Object[] keys = new Object[keyCount];
          for (int i = 0; i < keyCount; i++) {
            keys[i] = row.get(i);
          }
          partial = panes.computeIfAbsent(new PaneKey(keys, pane), k -> new long[slots]);
        }
        for (int i = 0; i < fns.length; i++) {
          fns[i].add(partial, 2 * i, row.get(time + 1 + i));
        }
      }
      List<Row> out = new ArrayList<>(panes.size() + longPanes.size + 64);
      Set<PaneKey> marked = new HashSet<>();
      for (Map.Entry<PaneKey, long[]> entry : panes.entrySet()) {
        PaneKey key = entry.getKey();
        emit(key.keys, key.pane, entry.getValue(), batch, out, marked);
      }
      for (int i = 0; i < longPanes.keys.length; i++) {
        if (longPanes.values[i] != null) {
          Object[] keys = {longPanes.keys[i]};
          emit(keys, longPanes.panes[i], longPanes.values[i], batch, out, marked);
        }
      }
      return out.iterator();
    }

    /** Adds a key's sums for a pane, and the pane's markers for its bucket if not yet added. */
    private void emit(
        Object[] keys, long pane, long[] partial, long batch, List<Row> out, Set<PaneKey> marked) {
      int bucket = Math.floorMod(Arrays.hashCode(keys), buckets);
      Object[] values = new Object[4 + keyCount + partial.length];
      values[0] = bucket;
      values[1] = pane;
      values[2] = batch;
      System.arraycopy(keys, 0, values, 4, keyCount);
      for (int i = 0; i < partial.length; i++) {
        values[4 + keyCount + i] = partial[i];
      }
      out.add(RowFactory.create(values));
      if (marked.add(new PaneKey(new Object[] {bucket}, pane))) {
        int windows = (int) (widthUs / slideUs);
        for (int w = 1; w <= windows; w++) {
          Object[] marker = new Object[4 + keyCount + partial.length];
          Arrays.fill(marker, 4 + keyCount, marker.length, 0L);
          marker[0] = bucket;
          marker[1] = pane;
          marker[2] = batch;
          marker[3] = pane + w * slideUs;
          out.add(RowFactory.create(marker));
        }
      }
    }
  }

  /**
   * Sums by a BIGINT key and a pane, in open addressing over arrays (a Java map's boxed keys
   * were a tenth of Nexmark q5's time).
   */
  static final class LongPanes {
    private final int slots;
    long[] keys = new long[1024];
    long[] panes = new long[1024];
    long[][] values = new long[1024][];
    int size;

    LongPanes(int slots) {
      this.slots = slots;
    }

    long[] partial(long key, long pane) {
      int mask = keys.length - 1;
      int i = slot(key, pane, mask);
      while (values[i] != null) {
        if (keys[i] == key && panes[i] == pane) {
          return values[i];
        }
        i = (i + 1) & mask;
      }
      if (2 * (size + 1) > keys.length) {
        grow();
        return partial(key, pane);
      }
      keys[i] = key;
      panes[i] = pane;
      values[i] = new long[slots];
      size++;
      return values[i];
    }

    private static int slot(long key, long pane, int mask) {
      long h = (key * 0x9E3779B97F4A7C15L) ^ (pane * 0xC2B2AE3D27D4EB4FL);
      return (int) (h ^ (h >>> 29)) & mask;
    }

    private void grow() {
      long[] oldKeys = keys;
      long[] oldPanes = panes;
      long[][] oldValues = values;
      keys = new long[oldKeys.length * 2];
      panes = new long[oldKeys.length * 2];
      values = new long[oldKeys.length * 2][];
      int mask = keys.length - 1;
      for (int j = 0; j < oldKeys.length; j++) {
        if (oldValues[j] != null) {
          int i = slot(oldKeys[j], oldPanes[j], mask);
          while (values[i] != null) {
            i = (i + 1) & mask;
          }
          keys[i] = oldKeys[j];
          panes[i] = oldPanes[j];
          values[i] = oldValues[j];
        }
      }
    }
  }

  /**
   * The state function, per bucket, pane and batch: one call with the batch's sums and markers,
   * and one per window end the watermark reaches after it (a timeout). Its state: the window
   * ends still to come and the sums, as Spark's UnsafeRows.
   */
  static final class Panes implements FlatMapGroupsWithStateFunction<Row, Row, byte[], Row> {
    private static final long serialVersionUID = 1L;
    private static final long KEEP_ALL = Long.MAX_VALUE / 4;
    private final int keyCount;
    private final Function[] fns;
    private final long widthUs;
    private final IntervalJoin.Side sums;

    Panes(int keyCount, Function[] fns, long widthUs, StructType schema) {
      this.keyCount = keyCount;
      this.fns = fns;
      this.widthUs = widthUs;
      this.sums = new IntervalJoin.Side(schema, schema.size() - 1);
    }

    @Override
    public Iterator<Row> call(Row group, Iterator<Row> input, GroupState<byte[]> state) {
      TreeSet<Long> ends = new TreeSet<>();
      List<IntervalJoin.Held> held = new ArrayList<>();
      if (state.exists()) {
        ByteBuffer stored = ByteBuffer.wrap(state.get());
        int count = stored.getInt();
        for (int i = 0; i < count; i++) {
          ends.add(stored.getLong());
        }
        sums.read(stored, KEEP_ALL, 0, held);
      }
      while (input.hasNext()) {
        Row row = input.next();
        if (!row.isNullAt(3)) {
          ends.add(row.getLong(3));  // a window of the pane still open when the batch began
        } else {
          held.add(new IntervalJoin.Held(row, 0));
        }
      }
      long watermarkUs = state.getCurrentWatermarkMs() * 1000L;
      List<Row> out = new ArrayList<>();
      while (!ends.isEmpty() && ends.first() <= watermarkUs) {
        long end = ends.pollFirst();
        for (IntervalJoin.Held h : held) {
          out.add(partial(sums.row(h), end));
        }
      }
      if (ends.isEmpty() || held.isEmpty()) {
        if (state.exists()) {
          state.remove();
        }
      } else {
        int size = 4 + 8 * ends.size() + 4;
        for (IntervalJoin.Held h : held) {
          size += 4 + sums.binary(h).getSizeInBytes();
        }
        ByteBuffer buffer = ByteBuffer.allocate(size);
        buffer.putInt(ends.size());
        for (long end : ends) {
          buffer.putLong(end);
        }
        IntervalJoin.Side.write(held, buffer);
        state.update(buffer.array());
        // The timeout fires once the watermark exceeds it, that is, reaches the next end.
        long next = Math.floorDiv(ends.first() + 999L, 1000L) - 1;
        state.setTimeoutTimestamp(Math.max(next, state.getCurrentWatermarkMs()));
      }
      return out.iterator();
    }

    /** A sum's row as the partial result of the window ending at {@code endUs}. */
    private Row partial(Row sum, long endUs) {
      Object[] values = new Object[keyCount + 2 + 2 * fns.length];
      for (int i = 0; i < keyCount; i++) {
        values[i] = sum.get(4 + i);
      }
      values[keyCount] = endUs - widthUs;
      values[keyCount + 1] = endUs;
      long[] partial = new long[2];
      for (int i = 0; i < fns.length; i++) {
        partial[0] = sum.getLong(4 + keyCount + 2 * i);
        partial[1] = sum.getLong(5 + keyCount + 2 * i);
        values[keyCount + 2 + 2 * i] = fns[i].value(partial, 0);
        values[keyCount + 3 + 2 * i] = partial[1];
      }
      return RowFactory.create(values);
    }
  }
}
