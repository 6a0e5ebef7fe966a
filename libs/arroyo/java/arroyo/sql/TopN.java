package arroyo.sql;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * A group's {@code n} rows with the largest (or smallest) order value: {@code top(o, c1, ...,
 * ck)} returns {@code struct<rows: array<struct<c1, ..., ck>>>}, best first. It is what later
 * Spark's {@code max_by(row, o, n)} gives, which Spark 4.1 lacks; the planner uses it for a
 * top-N without windows ({@code ROW_NUMBER() OVER (PARTITION BY k ORDER BY o DESC) <= n}), so
 * a key's state holds its n best rows, not every row it has seen.
 *
 * <p>Values of {@code o} are ordered as Spark orders them: numbers (-0.0 as 0.0, NaN above
 * every other value), strings by code point (UTF-8 byte order), dates, timestamps, booleans,
 * and structs of these field by field. Rows whose {@code o} is null are left out. Ties are kept
 * in no fixed order. One function per input type ({@link #register}), as a typed aggregator's
 * input encoder is fixed by its schema.
 */
public final class TopN extends Aggregator<Row, TopN.Best, Row> {
  private static final long serialVersionUID = 1L;

  /** Orders rows by their column 0, worst first (the head of the heap is the one to drop). */
  static final class WorstFirst implements Comparator<Row>, Serializable {
    private static final long serialVersionUID = 1L;
    private final boolean largest;

    WorstFirst(boolean largest) {
      this.largest = largest;
    }

    @Override
    public int compare(Row a, Row b) {
      int order = compareValues(a.get(0), b.get(0));
      return largest ? order : -order;
    }
  }

  /** The best rows so far, in a heap whose head is the worst of them. */
  public static final class Best implements Serializable {
    private static final long serialVersionUID = 1L;
    final PriorityQueue<Row> rows;

    Best(boolean largest) {
      rows = new PriorityQueue<>(new WorstFirst(largest));
    }
  }

  private final StructType input;
  private final int n;
  private final boolean largest;

  private TopN(StructType input, int n, boolean largest) {
    this.input = input;
    this.n = n;
    this.largest = largest;
  }

  /**
   * Registers {@code name} in {@code spark} as the aggregate over rows of {@code inputJson} (a
   * struct type as Spark's JSON writes it, the order value first) keeping the {@code n}
   * rows of the largest order values if {@code largest}, else of the smallest.
   */
  public static void register(SparkSession spark, String name, String inputJson, int n, boolean largest) {
    if (n < 1) {
      throw new IllegalArgumentException("top n: n must be at least 1, not " + n);
    }
    StructType input = (StructType) org.apache.spark.sql.types.DataType.fromJson(inputJson);
    spark.udf().register(name, functions.udaf(new TopN(input, n, largest), Encoders.row(input)));
  }

  @Override
  public Best zero() {
    return new Best(largest);
  }

  @Override
  public Best reduce(Best best, Row row) {
    if (row.isNullAt(0)) {
      return best;
    }
    // A row of its own: the encoder may hand over the same object for every input row.
    Object[] values = new Object[row.length()];
    for (int i = 0; i < values.length; i++) {
      values[i] = row.get(i);
    }
    offer(best, RowFactory.create(values));
    return best;
  }

  private void offer(Best best, Row row) {
    if (best.rows.size() < n) {
      best.rows.add(row);
    } else if (best.rows.comparator().compare(row, best.rows.peek()) > 0) {
      best.rows.poll();
      best.rows.add(row);
    }
  }

  @Override
  public Best merge(Best a, Best b) {
    for (Row row : b.rows) {
      offer(a, row);
    }
    return a;
  }

  @Override
  public Row finish(Best best) {
    List<Row> sorted = new ArrayList<>(best.rows);
    sorted.sort(best.rows.comparator().reversed());
    List<Row> rows = new ArrayList<>(sorted.size());
    for (Row row : sorted) {
      Object[] values = new Object[row.length() - 1];
      for (int i = 0; i < values.length; i++) {
        values[i] = row.get(i + 1);
      }
      rows.add(RowFactory.create(values));
    }
    return RowFactory.create(CollectionConverters.asScala(rows).toSeq());
  }

  /** Compares two non-null values of one type as Spark orders them (nulls first in structs). */
  @SuppressWarnings("unchecked")
  static int compareValues(Object a, Object b) {
    if (a == null || b == null) {
      return a == null ? (b == null ? 0 : -1) : 1;
    }
    if (a instanceof String x && b instanceof String y) {
      return compareCodePoints(x, y);
    }
    if (a instanceof Double x && b instanceof Double y) {
      return Double.compare(x == 0.0d ? 0.0d : x, y == 0.0d ? 0.0d : y);
    }
    if (a instanceof Float x && b instanceof Float y) {
      return Float.compare(x == 0.0f ? 0.0f : x, y == 0.0f ? 0.0f : y);
    }
    if (a instanceof Row x && b instanceof Row y) {
      for (int i = 0; i < x.length(); i++) {
        int order = compareValues(x.get(i), y.get(i));
        if (order != 0) {
          return order;
        }
      }
      return 0;
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
  public Encoder<Best> bufferEncoder() {
    // Serialised when a group's partial aggregate leaves a partition or its state is saved:
    // once per group and micro-batch, not per row.
    return Encoders.javaSerialization(Best.class);
  }

  @Override
  public Encoder<Row> outputEncoder() {
    StructField[] fields = input.fields();
    StructType row = new StructType();
    for (int i = 1; i < fields.length; i++) {
      row = row.add(fields[i]);
    }
    return Encoders.row(new StructType().add("rows", new ArrayType(row, false), false));
  }

  @Override
  public String toString() {
    return "TopN(" + n + (largest ? ", largest)" : ", smallest)");
  }
}
