package arroyo.sql;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.jdk.javaapi.CollectionConverters;

/**
 * The distinct rows that hold a group's largest (or smallest) value of one of their columns,
 * ties included: {@code extreme(c1, ..., cn)} over rows {@code (c1, ..., cn)}, ordered by
 * column {@code key}, returns {@code struct<rows: array<struct<c1, ..., cn>>>}.
 *
 * <p>Spark has no such aggregate ({@code max_by} keeps one row of a tie). The planner uses it
 * for "the rows of a window whose value is the window's maximum" (Nexmark q7: the highest bids
 * of each window): a streaming aggregate keyed by the window alone then keeps the window's
 * current top rows in its state, where the aggregate the query is written as keeps every
 * distinct row of the window (every bid) until the window closes.
 *
 * <p>One function per input type, registered by name ({@link #register}), as a typed
 * aggregator's input encoder is fixed by its schema. The key column must be of an integral,
 * decimal, date or timestamp type: those Java orders as Spark does (Spark orders strings by
 * UTF-8 bytes and treats -0.0 as 0.0, which Java's comparisons do not). Rows whose key is null
 * are left out, as a maximum leaves nulls out. The rows are told apart by value, so none may
 * hold a binary column (a Java array is equal only to itself).
 */
public final class ExtremeRows extends Aggregator<Row, ExtremeRows.Top, Row> {
  private static final long serialVersionUID = 1L;

  /** The top rows so far: their key and the rows (a set: rows are distinct). */
  public static final class Top implements Serializable {
    private static final long serialVersionUID = 1L;
    Object key;
    LinkedHashSet<Row> rows = new LinkedHashSet<>();
  }

  private final StructType input;
  private final int key;
  private final boolean largest;

  private ExtremeRows(StructType input, int key, boolean largest) {
    this.input = input;
    this.key = key;
    this.largest = largest;
  }

  /**
   * Registers {@code name} in {@code spark} as the aggregate over rows of {@code inputDdl} (a
   * schema as DDL: {@code a BIGINT, b BIGINT}) ordered by column {@code key}, keeping the rows
   * of its largest value if {@code largest}, else of its smallest.
   */
  public static void register(SparkSession spark, String name, String inputDdl, int key, boolean largest) {
    StructType input = StructType.fromDDL(inputDdl);
    DataType type = input.fields()[key].dataType();
    boolean ordered = type instanceof org.apache.spark.sql.types.IntegralType
        || type instanceof org.apache.spark.sql.types.DecimalType
        || type instanceof org.apache.spark.sql.types.DateType
        || type instanceof org.apache.spark.sql.types.TimestampType
        || type instanceof org.apache.spark.sql.types.TimestampNTZType;
    if (!ordered) {
      throw new IllegalArgumentException("extreme rows: unsupported key type " + type.sql());
    }
    ExtremeRows aggregate = new ExtremeRows(input, key, largest);
    spark.udf().register(name, functions.udaf(aggregate, Encoders.row(input)));
  }

  @Override
  public Top zero() {
    return new Top();
  }

  @SuppressWarnings("unchecked")
  private int compare(Object a, Object b) {
    int order = ((Comparable<Object>) a).compareTo(b);
    return largest ? order : -order;
  }

  @Override
  public Top reduce(Top top, Row row) {
    Object value = row.get(key);
    if (value == null) {
      return top;
    }
    int order = top.key == null ? 1 : compare(value, top.key);
    if (order > 0) {
      top.key = value;
      top.rows.clear();
    }
    if (order >= 0) {
      // A row of its own: the encoder may hand over the same object for every input row.
      Object[] values = new Object[row.length()];
      for (int i = 0; i < values.length; i++) {
        values[i] = normalized(row.get(i));
      }
      top.rows.add(RowFactory.create(values));
    }
    return top;
  }

  /** As Spark groups them: -0.0 is 0.0 (and every NaN one NaN, as boxed equality has it). */
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
  public Top merge(Top a, Top b) {
    if (b.key == null) {
      return a;
    }
    int order = a.key == null ? -1 : compare(a.key, b.key);
    if (order < 0) {
      return b;
    }
    if (order == 0) {
      a.rows.addAll(b.rows);
    }
    return a;
  }

  @Override
  public Row finish(Top top) {
    List<Row> rows = new ArrayList<>(top.rows);
    return RowFactory.create(CollectionConverters.asScala(rows).toSeq());
  }

  @Override
  public Encoder<Top> bufferEncoder() {
    // Serialised only when a group's partial aggregate leaves a partition or its state is
    // saved: once per group (window) and micro-batch, not per row.
    return Encoders.javaSerialization(Top.class);
  }

  @Override
  public Encoder<Row> outputEncoder() {
    StructType output = new StructType().add("rows", new ArrayType(input, false), false);
    return Encoders.row(output);
  }

  @Override
  public String toString() {
    return "ExtremeRows" + Arrays.toString(input.fieldNames());
  }
}
