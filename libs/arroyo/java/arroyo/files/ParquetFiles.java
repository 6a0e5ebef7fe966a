package arroyo.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.schema.MessageType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Parquet files for {@link BoundedFilesSource}: their row counts (from the footer) and rows
 * {@code [start, end)} of one, read by Spark's vectorised reader and cast to the table's columns
 * as Spark SQL casts them under ANSI rules (a value that does not fit fails the query). A
 * column the file lacks is null. Not read yet, and refused with the file's name: INT96 and
 * nanosecond timestamps (Spark's test reader this uses takes neither), and structs whose fields
 * are not the table's in its order.
 */
final class ParquetFiles {
  private static final int BATCH_ROWS = 4096;

  private ParquetFiles() {}

  private static MessageType footerSchema(String file, Configuration conf) throws IOException {
    try (ParquetFileReader reader = ParquetFileReader.open(
        HadoopInputFile.fromPath(new org.apache.hadoop.fs.Path(file), conf))) {
      return reader.getFooter().getFileMetaData().getSchema();
    }
  }

  /** An error that names the file (Spark's own name the column where they know it). */
  static UncheckedIOException unreadable(String file, Exception err) {
    String message = "cannot read '" + file + "' as Parquet: " + err.getMessage();
    return new UncheckedIOException(new IOException(message, err));
  }

  private static void closeQuietly(VectorizedParquetRecordReader reader) {
    try {
      reader.close();
    } catch (IOException | RuntimeException err) {
      // failed already: the first error is the one reported
    }
  }

  /**
   * Refuses a struct whose fields are not the table's, in its order: Spark casts structs field
   * by position, which would put one field's values in another. (Reading them by name is left
   * to do.)
   */
  private static void checkFields(String file, String column, DataType given, DataType wanted) {
    if (given instanceof StructType g && wanted instanceof StructType w) {
      if (!List.of(g.fieldNames()).equals(List.of(w.fieldNames()))) {
        throw new IllegalArgumentException("column '" + column + "' has the fields ("
            + String.join(", ", g.fieldNames()) + "), not the table's ("
            + String.join(", ", w.fieldNames()) + ") in that order");
      }
      for (StructField field : w.fields()) {
        checkFields(file, column + "." + field.name(), g.apply(field.name()).dataType(),
            field.dataType());
      }
    } else if (given instanceof org.apache.spark.sql.types.ArrayType g
        && wanted instanceof org.apache.spark.sql.types.ArrayType w) {
      checkFields(file, column + "[]", g.elementType(), w.elementType());
    }
  }

  static long rows(String file) {
    try (ParquetFileReader reader = ParquetFileReader.open(
        HadoopInputFile.fromPath(new org.apache.hadoop.fs.Path(file), new Configuration()))) {
      return reader.getRecordCount();
    } catch (IOException | RuntimeException err) {
      throw unreadable(file, err);
    }
  }

  static PartitionReader<InternalRow> reader(StructType columns, String file, long start, long end) {
    Configuration conf = new Configuration();
    VectorizedParquetRecordReader reader = new VectorizedParquetRecordReader(false, BATCH_ROWS);
    UnsafeProjection projection;
    try {
      StructType types = new ParquetToSparkSchemaConverter(SQLConf.get()).convert(footerSchema(file, conf));
      List<String> present = new ArrayList<>();
      List<Expression> values = new ArrayList<>();
      for (StructField column : columns.fields()) {
        DataType wanted = column.dataType();
        if (!List.of(types.fieldNames()).contains(column.name())) {
          values.add(Literal.create(null, wanted));
          continue;
        }
        DataType given = types.apply(column.name()).dataType();
        checkFields(file, column.name(), given, wanted);
        Expression read = new BoundReference(present.size(), given, true);
        present.add(column.name());
        values.add(given.equals(wanted)
            ? read
            : new Cast(read, wanted, Option.apply("UTC"), EvalMode$.MODULE$.ANSI()));
      }
      values.add(Literal.create(null, DataTypes.TimestampType));
      values.add(Literal.create(false, DataTypes.BooleanType));
      projection = UnsafeProjection.create(CollectionConverters.asScala(values).toList());
      reader.initialize(file, present);
    } catch (IOException | RuntimeException err) {
      closeQuietly(reader);
      throw unreadable(file, err);
    }
    reader.resultBatch(); // allocates the batch the reader decodes into
    return new PartitionReader<>() {
      private long row; // of the file, of the next row of the batch
      private ColumnarBatch batch;
      private int index;
      private InternalRow current;

      @Override
      public boolean next() {
        try {
          return advance();
        } catch (IOException | RuntimeException err) {
          throw unreadable(file, err);
        }
      }

      private boolean advance() throws IOException {
        while (end < 0 || row < end) {
          if (batch != null && index < batch.numRows()) {
            current = projection.apply(batch.getRow(index++));
            row++;
            return true;
          }
          if (!reader.nextBatch()) {
            return false;
          }
          batch = reader.resultBatch();
          index = 0;
          // Rows before the range (read by an earlier micro-batch) are decoded, then skipped
          // a batch at a time: no row of them is projected.
          long skip = Math.min(Math.max(start - row, 0), batch.numRows());
          index = (int) skip;
          row += skip;
        }
        return false;
      }

      @Override
      public InternalRow get() {
        return current;
      }

      @Override
      public void close() throws IOException {
        reader.close();
      }
    };
  }
}
