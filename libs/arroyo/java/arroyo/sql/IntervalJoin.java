package arroyo.sql;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * An inner equi-join of two streams whose event times are bounded against each other: the
 * pairs of a left and a right row with equal keys and {@code lower <= right time - left time
 * <= upper}. The planner runs the joins it has bounded this way (a join without windows, whose
 * rows the watermark drops: Nexmark q4 and q9) through it, and applies the rest of the join's
 * condition to its pairs.
 *
 * <p>Why not Spark's stream-stream join: it keeps each row in RocksDB on its own (a put, a merge
 * into its key's list and an index entry, and a new RocksDB iterator to look the key up on the
 * other side), about 12 us of task time per row, which bounds Nexmark q9 near 85 K events/s on
 * two cores. Here the rows of a key live together in one state value, read and written once
 * per key and micro-batch ({@code flatMapGroupsWithState}): a Nexmark batch of a million events
 * touches about 60 thousand auctions.
 *
 * <p>State per key: the left and right rows that a later row of the other side may still
 * match. A left row is dropped once the watermark passes its time plus {@code upper} (a right
 * row on time is at or after the watermark, so it cannot be within {@code upper} of it), a
 * right row once the watermark passes its time minus {@code lower}; a row that is already past
 * that when it arrives is joined with what is stored and not kept, as Spark's join does. A key
 * whose rows are all dropped is removed, by an event-time timeout when no input comes for it.
 *
 * <p>Known costs: a key's rows are read and written whole at each batch that touches the key,
 * so a key holding many rows at once (a hot key under a long bound) costs in proportion to them;
 * and Spark finds the keys whose timeout has passed by reading the operator's whole
 * state every micro-batch, so a join whose rows stay long (a TTL of a day) pays a scan that
 * grows with its state. {@code transformWithState}, whose timers are indexed by time, would
 * not; it is the next step if that scan shows.
 */
public final class IntervalJoin {
  private IntervalJoin() {}

  /**
   * The join of {@code left} and {@code right} on {@code leftKey = rightKey}, with {@code
   * lowerUs <= rightTime - leftTime <= upperUs} (microseconds; the times are timestamp columns).
   * Its columns are left's then right's (their names must differ). Both inputs must descend from
   * sources with a watermark.
   */
  public static Dataset<Row> join(
      Dataset<Row> left,
      Dataset<Row> right,
      String leftKey,
      String rightKey,
      String leftTime,
      String rightTime,
      long lowerUs,
      long upperUs) {
    StructType leftSchema = left.schema();
    StructType rightSchema = right.schema();
    StructField key = leftSchema.apply(leftKey);
    StructType tagged = new StructType()
        .add("__key", key.dataType(), true)
        .add("__left", leftSchema, true)
        .add("__right", rightSchema, true)
        .add("__time", DataTypes.TimestampType, true);
    Column[] leftColumns = columns(leftSchema);
    Column[] rightColumns = columns(rightSchema);
    Dataset<Row> lefts = left.select(
        functions.col(quoted(leftKey)).as("__key"),
        functions.struct(leftColumns).as("__left"),
        functions.lit(null).cast(rightSchema).as("__right"),
        // Spark takes an event-time timeout only over a column that carries the watermark.
        functions.col(quoted(leftTime)).as("__time"));
    Dataset<Row> rights = right.select(
        functions.col(quoted(rightKey)).cast(key.dataType()).as("__key"),
        functions.lit(null).cast(leftSchema).as("__left"),
        functions.struct(rightColumns).as("__right"),
        functions.col(quoted(rightTime)).as("__time"));
    StructType keySchema = new StructType().add("__key", key.dataType(), true);
    StructType stateSchema = new StructType()
        .add("left", new ArrayType(leftSchema, false), false)
        .add("right", new ArrayType(rightSchema, false), false);
    StructType output = new StructType(concat(leftSchema.fields(), rightSchema.fields()));
    Pairs pairs = new Pairs(
        leftSchema.fieldIndex(leftTime), rightSchema.fieldIndex(rightTime), lowerUs, upperUs);
    return lefts.unionByName(rights)
        .filter(functions.col("__key").isNotNull())
        .groupBy(functions.col("__key"))
        .as(Encoders.row(keySchema), Encoders.row(tagged))
        .flatMapGroupsWithState(
            pairs,
            OutputMode.Append(),
            Encoders.row(stateSchema),
            Encoders.row(output),
            GroupStateTimeout.EventTimeTimeout());
  }

  private static Column[] columns(StructType schema) {
    Column[] columns = new Column[schema.size()];
    for (int i = 0; i < columns.length; i++) {
      columns[i] = functions.col(quoted(schema.fields()[i].name()));
    }
    return columns;
  }

  private static String quoted(String name) {
    return "`" + name.replace("`", "``") + "`";
  }

  private static StructField[] concat(StructField[] a, StructField[] b) {
    StructField[] all = new StructField[a.length + b.length];
    System.arraycopy(a, 0, all, 0, a.length);
    System.arraycopy(b, 0, all, a.length, b.length);
    return all;
  }

  /** The state function: one call per key and micro-batch (or timeout). */
  static final class Pairs implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private static final long NONE = Long.MAX_VALUE;
    private final int leftTime;
    private final int rightTime;
    private final long lowerUs;
    private final long upperUs;

    Pairs(int leftTime, int rightTime, long lowerUs, long upperUs) {
      this.leftTime = leftTime;
      this.rightTime = rightTime;
      this.lowerUs = lowerUs;
      this.upperUs = upperUs;
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> input, GroupState<Row> state) {
      // Rows at or after this time may still arrive on time (microseconds).
      long watermarkUs = state.getCurrentWatermarkMs() * 1000L;
      List<Row> lefts = new ArrayList<>();
      List<Row> rights = new ArrayList<>();
      if (state.exists()) {
        Row stored = state.get();
        keep(stored.getList(0), leftTime, upperUs, watermarkUs, lefts);
        keep(stored.getList(1), rightTime, -lowerUs, watermarkUs, rights);
      }
      List<Row> out = new ArrayList<>();
      List<Row> newLefts = new ArrayList<>();
      List<Row> newRights = new ArrayList<>();
      while (input.hasNext()) {
        Row tagged = input.next();
        // A row without a time matches nothing (its bound is NULL, not true).
        Row l = tagged.getStruct(1);
        if (l != null) {
          if (!l.isNullAt(leftTime)) {
            newLefts.add(l);
          }
        } else {
          Row r = tagged.getStruct(2);
          if (!r.isNullAt(rightTime)) {
            newRights.add(r);
          }
        }
      }
      // New lefts with every right (stored and new), then stored lefts with new rights: each
      // pair once.
      for (Row l : newLefts) {
        long lt = micros(l.get(leftTime));
        pair(l, lt, rights, out);
        pair(l, lt, newRights, out);
      }
      for (Row r : newRights) {
        long rt = micros(r.get(rightTime));
        for (Row l : lefts) {
          long delta = rt - micros(l.get(leftTime));
          if (delta >= lowerUs && delta <= upperUs) {
            out.add(joined(l, r));
          }
        }
      }
      keep(newLefts, leftTime, upperUs, watermarkUs, lefts);
      keep(newRights, rightTime, -lowerUs, watermarkUs, rights);
      if (lefts.isEmpty() && rights.isEmpty()) {
        if (state.exists()) {
          state.remove();
        }
      } else {
        state.update(RowFactory.create(
            CollectionConverters.asScala(lefts).toSeq(),
            CollectionConverters.asScala(rights).toSeq()));
        long expiresUs = Math.min(
            earliest(lefts, leftTime, upperUs), earliest(rights, rightTime, -lowerUs));
        // The timeout fires once the watermark exceeds it: at the first row's drop time.
        state.setTimeoutTimestamp(Math.max(expiresUs / 1000L, state.getCurrentWatermarkMs()));
      }
      return out.isEmpty() ? Collections.emptyIterator() : out.iterator();
    }

    private void pair(Row l, long lt, List<Row> rights, List<Row> out) {
      for (Row r : rights) {
        long delta = micros(r.get(rightTime)) - lt;
        if (delta >= lowerUs && delta <= upperUs) {
          out.add(joined(l, r));
        }
      }
    }

    /** Adds to {@code kept} the rows whose time plus {@code slackUs} the watermark has not
     * passed. */
    private static void keep(
        List<Row> rows, int time, long slackUs, long watermarkUs, List<Row> kept) {
      for (Row row : rows) {
        if (micros(row.get(time)) + slackUs >= watermarkUs) {
          kept.add(row);
        }
      }
    }

    private static long earliest(List<Row> rows, int time, long slackUs) {
      long earliest = NONE;
      for (Row row : rows) {
        earliest = Math.min(earliest, micros(row.get(time)) + slackUs);
      }
      return earliest;
    }

    private static Row joined(Row l, Row r) {
      Object[] values = new Object[l.length() + r.length()];
      for (int i = 0; i < l.length(); i++) {
        values[i] = l.get(i);
      }
      for (int i = 0; i < r.length(); i++) {
        values[l.length() + i] = r.get(i);
      }
      return RowFactory.create(values);
    }

    static long micros(Object time) {
      if (time instanceof Timestamp ts) {
        return Math.floorDiv(ts.getTime(), 1000L) * 1_000_000L + ts.getNanos() / 1000L;
      }
      Instant instant = (Instant) time;
      return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1000L;
    }
  }
}
