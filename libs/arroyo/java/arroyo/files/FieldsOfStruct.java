package arroyo.files;

import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A struct column of the table's type over a vector read with only some of its fields (those
 * its query takes, {@link ColumnUse}): the struct's nulls and the fields read are the reader's,
 * the other fields are null. Spark's generated code reads a struct's fields through
 * {@link #getChild}, so nothing is copied.
 */
final class FieldsOfStruct extends ColumnVector {
  private final ColumnVector read;
  private final ColumnVector[] children;

  /** {@code read}: the reader's vector of {@code type}'s fields named in {@code readType}. */
  FieldsOfStruct(StructType type, ColumnVector read, StructType readType, int rows) {
    super(type);
    this.read = read;
    StructField[] fields = type.fields();
    children = new ColumnVector[fields.length];
    java.util.List<String> names = java.util.List.of(readType.fieldNames());
    for (int i = 0; i < fields.length; i++) {
      int at = names.indexOf(fields[i].name());
      if (at >= 0) {
        children[i] = read.getChild(at);
      } else {
        ConstantColumnVector nulls = new ConstantColumnVector(rows, fields[i].dataType());
        nulls.setNull();
        children[i] = nulls;
      }
    }
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    return children[ordinal];
  }

  @Override
  public boolean isNullAt(int rowId) {
    return read.isNullAt(rowId);
  }

  @Override
  public boolean hasNull() {
    return read.hasNull();
  }

  @Override
  public int numNulls() {
    return read.numNulls();
  }

  @Override
  public void close() {
    // The reader owns the vector it read, and closes it.
  }

  private static UnsupportedOperationException notAValue() {
    return new UnsupportedOperationException("a struct column has no value but its fields");
  }

  @Override
  public boolean getBoolean(int rowId) {
    throw notAValue();
  }

  @Override
  public byte getByte(int rowId) {
    throw notAValue();
  }

  @Override
  public short getShort(int rowId) {
    throw notAValue();
  }

  @Override
  public int getInt(int rowId) {
    throw notAValue();
  }

  @Override
  public long getLong(int rowId) {
    throw notAValue();
  }

  @Override
  public float getFloat(int rowId) {
    throw notAValue();
  }

  @Override
  public double getDouble(int rowId) {
    throw notAValue();
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw notAValue();
  }

  @Override
  public ColumnarMap getMap(int rowId) {
    throw notAValue();
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw notAValue();
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw notAValue();
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw notAValue();
  }
}
