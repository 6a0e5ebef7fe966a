package arroyo.sql;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * {@code min}, {@code max} and {@code count(DISTINCT)} over signed rows (a changelog's changes:
 * +1 for a row that arrives, -1 for one that leaves), which retract what a changed row added.
 * Called as {@code f(value, sign)}; returns {@code struct<value>}: the least or greatest value
 * still present, or the number of distinct ones (null, or 0, when none is).
 *
 * <p>Spark's own {@code min} cannot forget a value, so over a changelog its state must be the
 * group's multiset: each distinct value with the number of rows that hold it, as Arroyo keeps
 * it. A value leaves the state when its count is back to zero. Partial aggregates may see a
 * retraction before the row it retracts (they are merged later), so a count may be negative
 * until then; only positive counts are present.
 *
 * <p>One function per value type ({@link #register}), as a typed aggregator's input encoder is
 * fixed by its schema. Values are ordered as Spark orders them: strings by code point (UTF-8
 * byte order), -0.0 as 0.0. Nulls are skipped, as Spark's aggregates skip them.
 */
public final class SignedMultiset extends Aggregator<Row, SignedMultiset.Counts, Row> {
  private static final long serialVersionUID = 1L;

  /** What the function gives from the multiset. */
  public enum Kind { MIN, MAX, COUNT_DISTINCT }

  /** Each value with its count of rows (never zero). */
  public static final class Counts implements Serializable {
    private static final long serialVersionUID = 1L;
    final HashMap<Object, Long> counts = new HashMap<>();

    void add(Object value, long count) {
      counts.merge(value, count, (a, b) -> a + b == 0 ? null : a + b);
    }
  }

  private final DataType type;
  private final Kind kind;

  private SignedMultiset(DataType type, Kind kind) {
    this.type = type;
    this.kind = kind;
  }

  /**
   * Registers {@code name} in {@code spark} as {@code kind} ("min", "max" or "count_distinct")
   * over values of {@code typeJson} (a type as Spark's JSON writes it: {@code "long"}) with a
   * BIGINT sign.
   */
  public static void register(SparkSession spark, String name, String typeJson, String kind) {
    DataType type = DataType.fromJson(typeJson);
    if (type instanceof BinaryType) {
      // A Java array is equal only to itself: values could not be told apart.
      throw new IllegalArgumentException("signed multiset: unsupported type " + type.sql());
    }
    StructType input = new StructType().add("value", type).add("sign", DataTypes.LongType);
    SignedMultiset aggregate = new SignedMultiset(type, Kind.valueOf(kind.toUpperCase(java.util.Locale.ROOT)));
    spark.udf().register(name, functions.udaf(aggregate, Encoders.row(input)));
  }

  @Override
  public Counts zero() {
    return new Counts();
  }

  @Override
  public Counts reduce(Counts counts, Row row) {
    if (!row.isNullAt(0) && !row.isNullAt(1)) {
      counts.add(normalized(row.get(0)), row.getLong(1));
    }
    return counts;
  }

  /** As Spark groups and orders them: -0.0 is 0.0. */
  private static Object normalized(Object value) {
    if (value instanceof Double d && d == 0.0d) {
      return 0.0d;
    }
    if (value instanceof Float f && f == 0.0f) {
      return 0.0f;
    }
    return value;
  }

  @Override
  public Counts merge(Counts a, Counts b) {
    for (Map.Entry<Object, Long> entry : b.counts.entrySet()) {
      a.add(entry.getKey(), entry.getValue());
    }
    return a;
  }

  @SuppressWarnings("unchecked")
  private static int compare(Object a, Object b) {
    if (a instanceof String x && b instanceof String y) {
      return compareCodePoints(x, y);
    }
    return ((Comparable<Object>) a).compareTo(b);
  }

  private static int compareCodePoints(String x, String y) {
    int i = 0;
    int j = 0;
    while (i < x.length() && j < y.length()) {
      int a = x.codePointAt(i);
      int b = y.codePointAt(j);
      if (a != b) {
        return Integer.compare(a, b);
      }
      i += Character.charCount(a);
      j += Character.charCount(b);
    }
    return Integer.compare(x.length() - i, y.length() - j);
  }

  @Override
  public Row finish(Counts counts) {
    if (kind == Kind.COUNT_DISTINCT) {
      long present = counts.counts.values().stream().filter(c -> c > 0).count();
      return RowFactory.create(present);
    }
    Object best = null;
    Iterator<Map.Entry<Object, Long>> entries = counts.counts.entrySet().iterator();
    while (entries.hasNext()) {
      Map.Entry<Object, Long> entry = entries.next();
      if (entry.getValue() <= 0) {
        continue;
      }
      Object value = entry.getKey();
      if (best == null) {
        best = value;
      } else {
        int order = compare(value, best);
        if (kind == Kind.MIN ? order < 0 : order > 0) {
          best = value;
        }
      }
    }
    return RowFactory.create(best);
  }

  @Override
  public Encoder<Counts> bufferEncoder() {
    // Serialised when a group's partial aggregate leaves a partition or its state is saved:
    // once per group and micro-batch, not per row.
    return Encoders.javaSerialization(Counts.class);
  }

  @Override
  public Encoder<Row> outputEncoder() {
    DataType result = kind == Kind.COUNT_DISTINCT ? DataTypes.LongType : type;
    return Encoders.row(new StructType().add("value", result, kind != Kind.COUNT_DISTINCT));
  }

  @Override
  public String toString() {
    return "SignedMultiset(" + kind + ", " + type.sql() + ")";
  }
}
