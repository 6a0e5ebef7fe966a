package arroyo.sql;

import java.nio.ByteBuffer;
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
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;


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
 * grows with its state (a byte copy per key: {@link Side}). {@code transformWithState}, whose
 * timers are indexed by time and whose list state appends, was tried and was slower on Nexmark
 * q4 and q9 (q9 104 K events/s against 223 K on two cores): it costs several RocksDB calls per
 * key and batch (a list read, a merge, a timer's check and writes) where this costs two.
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
    // Spark takes an event-time timeout only over a column that carries the watermark: the
    // time keeps its mark through the alias.
    Dataset<Row> lefts = left.select(
        leftTagged(leftSchema, rightSchema, leftKey, leftTime));
    Dataset<Row> rights = right.select(
        rightTagged(leftSchema, rightSchema, rightKey, rightTime, key.dataType()));
    return pairs(
        lefts.unionByName(rights),
        leftSchema,
        rightSchema,
        key.dataType(),
        leftTime,
        rightTime,
        lowerUs,
        upperUs);
  }

  /**
   * The same join over one input that holds both sides' columns for each of its rows (a
   * self-join, whose relation is then read once rather than once per side): the left side's
   * key, time and row columns, and a boolean column saying whether the row is on the left
   * side; the same for the right. Its columns are the left side's three then the right's.
   */
  public static Dataset<Row> joinShared(
      Dataset<Row> both,
      String leftKey,
      String leftTime,
      String leftRow,
      String leftOn,
      String rightKey,
      String rightTime,
      String rightRow,
      String rightOn,
      long lowerUs,
      long upperUs) {
    StructType schema = both.schema();
    StructType leftSchema = new StructType(new StructField[] {
        schema.apply(leftKey), schema.apply(leftTime), schema.apply(leftRow)});
    StructType rightSchema = new StructType(new StructField[] {
        schema.apply(rightKey), schema.apply(rightTime), schema.apply(rightRow)});
    DataType keyType = schema.apply(leftKey).dataType();
    Column lefts = functions.when(
        functions.col(quoted(leftOn)),
        functions.struct(leftTagged(leftSchema, rightSchema, leftKey, leftTime)));
    Column rights = functions.when(
        functions.col(quoted(rightOn)),
        functions.struct(rightTagged(leftSchema, rightSchema, rightKey, rightTime, keyType)));
    // The time keeps the watermark's mark through the explode: Spark takes an event-time
    // timeout, and drops late rows, only over a column that carries it.
    Metadata watermark = schema.apply(leftTime).metadata();
    Dataset<Row> tagged = both
        .select(functions.explode(functions.array(lefts, rights)).as("__t"))
        .filter(functions.col("__t").isNotNull())
        .select(
            functions.col("__t.__key").as("__key"),
            functions.col("__t.__left").as("__left"),
            functions.col("__t.__right").as("__right"),
            functions.col("__t.__time").as("__time", watermark));
    return pairs(
        tagged, leftSchema, rightSchema, keyType, leftTime, rightTime, lowerUs, upperUs);
  }

  /** A left row tagged for the join: its key, itself, no right row, its time. */
  private static Column[] leftTagged(
      StructType leftSchema, StructType rightSchema, String key, String time) {
    return new Column[] {
      functions.col(quoted(key)).as("__key"),
      functions.struct(columns(leftSchema)).as("__left"),
      functions.lit(null).cast(rightSchema).as("__right"),
      functions.col(quoted(time)).as("__time")
    };
  }

  /** A right row tagged for the join: its key (as the left key's type), no left row, itself,
   * its time. */
  private static Column[] rightTagged(
      StructType leftSchema, StructType rightSchema, String key, String time, DataType keyType) {
    return new Column[] {
      functions.col(quoted(key)).cast(keyType).as("__key"),
      functions.lit(null).cast(leftSchema).as("__left"),
      functions.struct(columns(rightSchema)).as("__right"),
      functions.col(quoted(time)).as("__time")
    };
  }

  /** The join's pairs from its input rows tagged with their key, side and time. */
  private static Dataset<Row> pairs(
      Dataset<Row> tagged,
      StructType leftSchema,
      StructType rightSchema,
      DataType keyType,
      String leftTime,
      String rightTime,
      long lowerUs,
      long upperUs) {
    StructType taggedSchema = new StructType()
        .add("__key", keyType, true)
        .add("__left", leftSchema, true)
        .add("__right", rightSchema, true)
        .add("__time", DataTypes.TimestampType, true);
    StructType keySchema = new StructType().add("__key", keyType, true);
    StructType output = new StructType(concat(leftSchema.fields(), rightSchema.fields()));
    Pairs pairs = new Pairs(
        new Side(leftSchema, leftSchema.fieldIndex(leftTime)),
        new Side(rightSchema, rightSchema.fieldIndex(rightTime)),
        lowerUs,
        upperUs);
    return tagged
        .filter(functions.col("__key").isNotNull())
        .groupBy(functions.col("__key"))
        .as(Encoders.row(keySchema), Encoders.row(taggedSchema))
        .flatMapGroupsWithState(
            pairs,
            OutputMode.Append(),
            Encoders.BINARY(),
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
  static final class Pairs implements FlatMapGroupsWithStateFunction<Row, Row, byte[], Row> {
    private static final long serialVersionUID = 1L;
    private static final long NONE = Long.MAX_VALUE;
    private final Side left;
    private final Side right;
    private final long lowerUs;
    private final long upperUs;

    Pairs(Side left, Side right, long lowerUs, long upperUs) {
      this.left = left;
      this.right = right;
      this.lowerUs = lowerUs;
      this.upperUs = upperUs;
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> input, GroupState<byte[]> state) {
      // Rows at or after this time may still arrive on time (microseconds).
      long watermarkUs = state.getCurrentWatermarkMs() * 1000L;
      // A left row is kept while a right row on time may still be within upper of it; a right
      // row while a left one may still be within -lower of it.
      long leftSlack = upperUs;
      long rightSlack = -lowerUs;
      List<Held> lefts = new ArrayList<>();
      List<Held> rights = new ArrayList<>();
      if (state.exists()) {
        ByteBuffer stored = ByteBuffer.wrap(state.get());
        left.read(stored, leftSlack, watermarkUs, lefts);
        right.read(stored, rightSlack, watermarkUs, rights);
      }
      List<Held> newLefts = new ArrayList<>();
      List<Held> newRights = new ArrayList<>();
      while (input.hasNext()) {
        Row tagged = input.next();
        // A row without a time matches nothing (its bound is NULL, not true).
        Row l = tagged.getStruct(1);
        if (l != null) {
          if (!l.isNullAt(left.time)) {
            newLefts.add(new Held(l, micros(l.get(left.time))));
          }
        } else {
          Row r = tagged.getStruct(2);
          if (!r.isNullAt(right.time)) {
            newRights.add(new Held(r, micros(r.get(right.time))));
          }
        }
      }
      // New lefts with every right (stored and new), then stored lefts with new rights: each
      // pair once.
      List<Row> out = new ArrayList<>();
      for (Held l : newLefts) {
        pair(l, rights, out);
        pair(l, newRights, out);
      }
      for (Held r : newRights) {
        for (Held l : lefts) {
          pair(l, r, out);
        }
      }
      keep(newLefts, leftSlack, watermarkUs, lefts);
      keep(newRights, rightSlack, watermarkUs, rights);
      if (lefts.isEmpty() && rights.isEmpty()) {
        if (state.exists()) {
          state.remove();
        }
      } else {
        state.update(write(lefts, rights));
        long expiresUs = Math.min(earliest(lefts, leftSlack), earliest(rights, rightSlack));
        // The timeout fires once the watermark exceeds it: at the first row's drop time.
        state.setTimeoutTimestamp(Math.max(expiresUs / 1000L, state.getCurrentWatermarkMs()));
      }
      return out.isEmpty() ? Collections.emptyIterator() : out.iterator();
    }

    private void pair(Held l, List<Held> rights, List<Row> out) {
      for (Held r : rights) {
        pair(l, r, out);
      }
    }

    /** Adds the pair of {@code l} and {@code r} when their times are within the bounds. */
    private void pair(Held l, Held r, List<Row> out) {
      long delta = r.timeUs - l.timeUs;
      if (delta >= lowerUs && delta <= upperUs) {
        out.add(joined(left.row(l), right.row(r)));
      }
    }

    private byte[] write(List<Held> lefts, List<Held> rights) {
      int size = 8;
      for (Held h : lefts) {
        size += 4 + left.binary(h).getSizeInBytes();
      }
      for (Held h : rights) {
        size += 4 + right.binary(h).getSizeInBytes();
      }
      ByteBuffer buffer = ByteBuffer.allocate(size);
      Side.write(lefts, buffer);
      Side.write(rights, buffer);
      return buffer.array();
    }

    /** Adds to {@code kept} the rows whose time plus {@code slackUs} the watermark has not
     * passed. */
    private static void keep(List<Held> rows, long slackUs, long watermarkUs, List<Held> kept) {
      for (Held row : rows) {
        if (row.timeUs + slackUs >= watermarkUs) {
          kept.add(row);
        }
      }
    }

    private static long earliest(List<Held> rows, long slackUs) {
      long earliest = NONE;
      for (Held row : rows) {
        earliest = Math.min(earliest, row.timeUs + slackUs);
      }
      return earliest;
    }
  }

  /**
   * A row of one side, as it came in ({@code row}) or as stored ({@code binary}: Spark's
   * UnsafeRow, whose bytes are the state), each made from the other when first needed.
   */
  static final class Held {
    Row row;
    UnsafeRow binary;
    final long timeUs;

    Held(Row row, long timeUs) {
      this.row = row;
      this.timeUs = timeUs;
    }

    Held(UnsafeRow binary, long timeUs) {
      this.binary = binary;
      this.timeUs = timeUs;
    }
  }

  /**
   * One side's rows in the state: its schema, where its time is, and Spark's encoder between
   * its rows and their UnsafeRow bytes (made on each executor, as encoders do not serialize).
   *
   * <p>Why bytes and not the rows' own struct type: Spark finds the keys whose timeout has
   * passed by decoding the whole state of the operator at every micro-batch. Decoding a struct
   * of arrays of structs into Java rows for every key (an eighth of Nexmark q4's CPU time) is
   * then a copy of one byte array, and a stored row is decoded only when it joins.
   */
  static final class Side implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final StructType schema;
    final int time;
    private transient ExpressionEncoder.Serializer<Row> toBinary;
    private transient ExpressionEncoder.Deserializer<Row> fromBinary;

    Side(StructType schema, int time) {
      this.schema = schema;
      this.time = time;
    }

    private void encoders() {
      if (toBinary == null) {
        ExpressionEncoder<Row> encoder = ExpressionEncoder.apply(schema);
        toBinary = encoder.createSerializer();
        fromBinary = encoder
            .resolveAndBind(encoder.resolveAndBind$default$1(), encoder.resolveAndBind$default$2())
            .createDeserializer();
      }
    }

    Row row(Held held) {
      if (held.row == null) {
        encoders();
        held.row = fromBinary.apply(held.binary);
      }
      return held.row;
    }

    UnsafeRow binary(Held held) {
      if (held.binary == null) {
        encoders();
        // The serializer reuses its row: keep a copy.
        held.binary = ((UnsafeRow) toBinary.apply(held.row)).copy();
      }
      return held.binary;
    }

    /** Reads one side's rows (a count, then each row's length and bytes), keeping those whose
     * time plus {@code slackUs} the watermark has not passed. */
    void read(ByteBuffer buffer, long slackUs, long watermarkUs, List<Held> kept) {
      int count = buffer.getInt();
      for (int i = 0; i < count; i++) {
        int length = buffer.getInt();
        UnsafeRow row = new UnsafeRow(schema.size());
        row.pointTo(buffer.array(), Platform.BYTE_ARRAY_OFFSET + buffer.position(), length);
        buffer.position(buffer.position() + length);
        long timeUs = row.getLong(time);
        if (timeUs + slackUs >= watermarkUs) {
          kept.add(new Held(row, timeUs));
        }
      }
    }

    static void write(List<Held> rows, ByteBuffer buffer) {
      buffer.putInt(rows.size());
      for (Held h : rows) {
        buffer.putInt(h.binary.getSizeInBytes());
        h.binary.writeTo(buffer);
      }
    }
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
