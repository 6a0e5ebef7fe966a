package arroyo.sql;

import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;


/**
 * An updating aggregate (a GROUP BY without a window) that gives its changes as signed rows:
 * when a batch changes a key's result, the result it had before with sign -1 and the new one
 * with sign +1. An aggregate over it (Nexmark q4: the average, per category, of each auction's
 * maximum bid) weighs each row by its sign, so it retracts what the old result contributed.
 *
 * <p>Why not Spark's aggregate: in update mode it gives each key's new result only, and Spark
 * runs no second aggregate after it in the same query. The planner used to write the changes
 * into a stage instead (change records, their before-images looked up on the driver, read
 * back by a second query as JSON); this runs in the same query as what reads it, as Spark's
 * {@code flatMapGroupsWithState} in append mode, which an aggregate may follow.
 *
 * <p>Functions: {@code count} (of non-null values; the planner passes a constant for
 * {@code count(*)}), {@code sum} (integral values as a long, overflow an error as under ANSI,
 * floating ones as a double), {@code avg} (a double), {@code min} and {@code max} (of numbers,
 * decimals, strings, booleans, dates and timestamps). They skip nulls and give null when they
 * saw no value, as Spark's do. {@link #changes} refuses any other function or type with an
 * {@code IllegalArgumentException}, and the planner then leaves the aggregate to the stage.
 *
 * <p>State per key: each function's value and its count of non-null values. With a TTL, a key
 * that no batch updates for that long (processing time, {@code updating_ttl}) is dropped, and
 * its last result retracted: what reads the changes counts only the keys still in state, and
 * a key that comes back counts afresh, once. (A stage of change records, which keeps every
 * key's last row on the driver, retracts it only when the key comes back.) As for the interval
 * join, Spark finds the keys whose timeout has passed by reading the operator's whole state at
 * every micro-batch, so a TTL long against the rate of new keys pays a scan that grows with
 * the state.
 */
public final class RetractingAggregate {
  private RetractingAggregate() {}

  /**
   * The changes of the aggregate over {@code input}: its first {@code keyCount} columns are the
   * group's keys, each of the others the argument of one function of {@code kinds}. The result
   * has the keys, one column per function named by {@code names}, then {@code sign}.
   */
  public static Dataset<Row> changes(
      Dataset<Row> input, int keyCount, String[] kinds, String[] names, long ttlMs, String sign) {
    StructType schema = input.schema();
    StructField[] fields = schema.fields();
    if (fields.length != keyCount + kinds.length || names.length != kinds.length) {
      throw new IllegalArgumentException(
          "expected " + keyCount + " keys and " + kinds.length + " arguments, got " + schema);
    }
    StructType keySchema = new StructType();
    Column[] keys = new Column[keyCount];
    StructType output = new StructType();
    for (int i = 0; i < keyCount; i++) {
      keySchema = keySchema.add(fields[i]);
      keys[i] = functions.col("`" + fields[i].name().replace("`", "``") + "`");
      output = output.add(fields[i]);
    }
    Function[] functions = new Function[kinds.length];
    StructType stateSchema = new StructType();
    for (int i = 0; i < kinds.length; i++) {
      functions[i] = Function.of(kinds[i], fields[keyCount + i].dataType());
      output = output.add(names[i], functions[i].result, !kinds[i].equals("count"));
      stateSchema = stateSchema
          .add("v" + i, functions[i].buffer, true)
          .add("n" + i, DataTypes.LongType, false);
    }
    output = output.add(sign, DataTypes.IntegerType, false);
    return input
        .groupBy(keys)
        .as(Encoders.row(keySchema), Encoders.row(schema))
        .flatMapGroupsWithState(
            new Changes(keyCount, functions, ttlMs),
            OutputMode.Append(),
            Encoders.row(stateSchema),
            Encoders.row(output),
            ttlMs > 0 ? GroupStateTimeout.ProcessingTimeTimeout() : GroupStateTimeout.NoTimeout());
  }

  /** One aggregate function: what it is, its buffer's type and its result's. */
  static final class Function implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final String kind;
    final boolean integral;
    final DataType buffer;
    final DataType result;

    private Function(String kind, boolean integral, DataType buffer, DataType result) {
      this.kind = kind;
      this.integral = integral;
      this.buffer = buffer;
      this.result = result;
    }

    static Function of(String kind, DataType input) {
      boolean integral = input.equals(DataTypes.ByteType) || input.equals(DataTypes.ShortType)
          || input.equals(DataTypes.IntegerType) || input.equals(DataTypes.LongType);
      boolean floating = input.equals(DataTypes.FloatType) || input.equals(DataTypes.DoubleType);
      switch (kind) {
        case "count":
          return new Function(kind, false, DataTypes.LongType, DataTypes.LongType);
        case "sum":
          if (integral) {
            return new Function(kind, true, DataTypes.LongType, DataTypes.LongType);
          }
          if (floating) {
            return new Function(kind, false, DataTypes.DoubleType, DataTypes.DoubleType);
          }
          break;
        case "avg":
          if (integral || floating) {
            return new Function(kind, false, DataTypes.DoubleType, DataTypes.DoubleType);
          }
          break;
        case "min":
        case "max":
          if (integral || floating || input instanceof DecimalType
              || input.equals(DataTypes.StringType) || input.equals(DataTypes.BooleanType)
              || input.equals(DataTypes.DateType) || input.equals(DataTypes.TimestampType)
              || input.equals(DataTypes.TimestampNTZType)) {
            return new Function(kind, false, input, input);
          }
          break;
        default:
          break;
      }
      throw new IllegalArgumentException(kind + "() of " + input.simpleString()
          + " does not retract here");
    }

    /** The buffer after {@code value} (not null) is added to {@code current}. */
    Object add(Object current, Object value) {
      switch (kind) {
        case "count":
          return null;
        case "sum":
          if (integral) {
            long v = ((Number) value).longValue();
            if (current == null) {
              return v;
            }
            try {
              return Math.addExact((Long) current, v);
            } catch (ArithmeticException e) {
              throw new ArithmeticException(
                  "sum() overflowed BIGINT: " + current + " + " + v + " (cast the summed "
                      + "values to DOUBLE or DECIMAL)");
            }
          }
          return (current == null ? 0.0 : (Double) current) + ((Number) value).doubleValue();
        case "avg":
          return (current == null ? 0.0 : (Double) current) + ((Number) value).doubleValue();
        case "min":
          return current == null || compare(value, current) < 0 ? value : current;
        default: // max
          return current == null || compare(value, current) > 0 ? value : current;
      }
    }

    /**
     * Spark's order of two non-null values of one type: strings by code point (the order of
     * their UTF-8 bytes, where Java's {@code compareTo} orders UTF-16 units), floating values
     * with NaN above all and -0.0 equal to 0.0, the rest by their Java order.
     */
    @SuppressWarnings("unchecked")
    static int compare(Object a, Object b) {
      if (a instanceof String x) {
        String y = (String) b;
        int i = 0;
        int j = 0;
        while (i < x.length() && j < y.length()) {
          int cx = x.codePointAt(i);
          int cy = y.codePointAt(j);
          if (cx != cy) {
            return Integer.compare(cx, cy);
          }
          i += Character.charCount(cx);
          j += Character.charCount(cy);
        }
        return Boolean.compare(i < x.length(), j < y.length());
      }
      if (a instanceof Double x) {
        double y = (Double) b;
        return x == y ? 0 : Double.compare(x, y);
      }
      if (a instanceof Float x) {
        float y = (Float) b;
        return x == y ? 0 : Float.compare(x, y);
      }
      return ((Comparable<Object>) a).compareTo(b);
    }

    /** The result from the buffer and the count of values it took. */
    Object result(Object buffer, long count) {
      switch (kind) {
        case "count":
          return count;
        case "avg":
          return count == 0 ? null : (Double) buffer / count;
        default:
          return count == 0 ? null : buffer;
      }
    }
  }

  /** The state function: one call per key and micro-batch (or timeout). */
  static final class Changes implements FlatMapGroupsWithStateFunction<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int keyCount;
    private final Function[] functions;
    private final long ttlMs;

    Changes(int keyCount, Function[] functions, long ttlMs) {
      this.keyCount = keyCount;
      this.functions = functions;
      this.ttlMs = ttlMs;
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> input, GroupState<Row> state) {
      int n = functions.length;
      Object[] buffers = new Object[2 * n];
      if (state.exists()) {
        Row stored = state.get();
        for (int i = 0; i < 2 * n; i++) {
          buffers[i] = stored.get(i);
        }
      } else {
        for (int i = 0; i < n; i++) {
          buffers[2 * i + 1] = 0L;
        }
      }
      if (state.hasTimedOut()) {
        // Idle for the TTL: the key leaves, and what it counted with it.
        state.remove();
        return Collections.singletonList(signed(key, results(buffers), -1)).iterator();
      }
      Object[] before = state.exists() ? results(buffers) : null;
      while (input.hasNext()) {
        Row row = input.next();
        for (int i = 0; i < n; i++) {
          Object value = row.get(keyCount + i);
          if (value != null) {
            buffers[2 * i] = functions[i].add(buffers[2 * i], value);
            buffers[2 * i + 1] = (Long) buffers[2 * i + 1] + 1;
          }
        }
      }
      state.update(RowFactory.create(buffers));
      if (ttlMs > 0) {
        state.setTimeoutDuration(ttlMs);
      }
      Object[] after = results(buffers);
      if (before != null && Arrays.equals(before, after)) {
        return Collections.emptyIterator();
      }
      List<Row> out = new ArrayList<>(2);
      if (before != null) {
        out.add(signed(key, before, -1));
      }
      out.add(signed(key, after, 1));
      return out.iterator();
    }

    private Object[] results(Object[] buffers) {
      Object[] results = new Object[functions.length];
      for (int i = 0; i < functions.length; i++) {
        results[i] = functions[i].result(buffers[2 * i], (Long) buffers[2 * i + 1]);
      }
      return results;
    }

    private Row signed(Row key, Object[] results, int sign) {
      Object[] values = new Object[keyCount + results.length + 1];
      for (int i = 0; i < keyCount; i++) {
        values[i] = key.get(i);
      }
      System.arraycopy(results, 0, values, keyCount, results.length);
      values[values.length - 1] = sign;
      return RowFactory.create(values);
    }
  }
}
