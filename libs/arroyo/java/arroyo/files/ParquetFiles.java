package arroyo.files;

import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.paths.SparkPath$;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.InternalRow$;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.CreateNamedStruct;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.datasources.FileFormat$;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.PartitionedFile$;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Parquet files for {@link BoundedFilesSource}, read by Spark's own Parquet reader (the one
 * {@code spark.read.parquet} uses: vectorised, nested columns, INT96 and legacy timestamps,
 * the session's Parquet settings) and cast to the table's columns as Spark SQL casts them under
 * ANSI rules (a value that does not fit fails the query, naming the file).
 *
 * <p>Columns and struct fields are matched by name (case-insensitively, as Spark does); one the
 * file lacks is null. The unit of parallelism is the row group: the rows of a micro-batch are
 * cut at row groups into about one partition per core, and the source ends its batches at
 * row-group boundaries where its cap allows, so no task decodes rows it does not give. Whole
 * row groups of files with the table's columns are read as columnar batches, as Spark reads
 * its own Parquet tables; anything else a row at a time, cast.
 */
final class ParquetFiles {
  private ParquetFiles() {}

  /** An error that names the file (Spark's own name the column where they know it). */
  static UncheckedIOException unreadable(String file, Exception err) {
    String message = "cannot read '" + file + "' as Parquet: " + err.getMessage();
    IOException cause = new IOException(message, err);
    return corrupt(err) ? new NotParquet(cause) : new UncheckedIOException(cause);
  }

  /** A file that was read and is not Parquet (or is cut short): bad data, which bad_data =
   * 'drop' skips. A file that could not be read (a timeout, a refused connection, a missing
   * permission) is not: it fails the query, which a restart retries. */
  static final class NotParquet extends UncheckedIOException {
    NotParquet(IOException cause) {
      super(cause);
    }
  }

  private static boolean corrupt(Exception err) {
    // Parquet's reader throws RuntimeException for a bad magic number or footer length, and
    // an EOFException for a file shorter than its footer says; the object store's client
    // errors are IOExceptions of other kinds.
    return err instanceof RuntimeException || err instanceof java.io.EOFException;
  }

  /** A file's row groups (rows, and bytes from the first page to the last) and columns. */
  record Footer(long size, long[] rows, long[] firstRows, long[] starts, long[] ends,
      StructType schema) {
    /** A file without row groups: what an unreadable file dropped under bad_data is. */
    static Footer empty() {
      return new Footer(0, new long[0], new long[0], new long[0], new long[0], new StructType());
    }

    long total() {
      return rows.length == 0 ? 0 : firstRows[rows.length - 1] + rows[rows.length - 1];
    }

    /** The row group that holds row {@code row} (the last one past the end). */
    int group(long row) {
      int at = java.util.Arrays.binarySearch(firstRows, row);
      int g = at >= 0 ? at : -at - 2; // the last group starting at or before the row
      // Empty groups share their first row with the next: the one that holds a row is the last.
      while (g < rows.length - 1 && firstRows[g] + rows[g] <= row) {
        g++;
      }
      return Math.max(g, 0);
    }

    /** The row after the group that holds {@code row}. */
    long groupEnd(long row) {
      int g = group(row);
      return rows.length == 0 ? 0 : firstRows[g] + rows[g];
    }
  }

  static Footer footer(String file, Configuration conf) {
    HadoopInputFile input;
    try {
      input = HadoopInputFile.fromPath(new org.apache.hadoop.fs.Path(file), conf);
    } catch (IOException err) {
      throw unreadable(file, err);
    }
    try (ParquetFileReader reader = ParquetFileReader.open(input)) {
      List<BlockMetaData> blocks = reader.getFooter().getBlocks();
      int n = blocks.size();
      long[] rows = new long[n];
      long[] firstRows = new long[n];
      long[] starts = new long[n];
      long[] ends = new long[n];
      long row = 0;
      for (int g = 0; g < n; g++) {
        BlockMetaData block = blocks.get(g);
        rows[g] = block.getRowCount();
        firstRows[g] = row;
        row += rows[g];
        starts[g] = block.getStartingPos();
        ends[g] = block.getStartingPos() + block.getCompressedSize();
      }
      StructType schema = new ParquetToSparkSchemaConverter(SQLConf.get())
          .convert(reader.getFooter().getFileMetaData().getSchema());
      return new Footer(input.getLength(), rows, firstRows, starts, ends, schema);
    } catch (IOException | RuntimeException err) {
      throw unreadable(file, err);
    }
  }

  /**
   * Rows {@code [start, end)} of a file, in its row groups whose bytes are
   * {@code [byteStart, byteEnd)} and whose first row is {@code firstRow}; read as {@code read}
   * (the table's columns the query uses and the file has, with the file's types) by
   * {@code reader}, Spark's, in columnar batches when {@code columnar} (then {@code read} has
   * the table's types). The table's other columns are null.
   */
  record Part(String file, long size, long firstRow, long start, long end, long byteStart,
      long byteEnd, StructType read, boolean columnar,
      Function1<PartitionedFile, Iterator<InternalRow>> reader) implements InputPartition {}

  /** Spark's Parquet readers, built on the driver once per schema read and kind (each
   * broadcasts its Hadoop configuration). */
  static final class Readers {
    // Of the table's columns, the ones read (the others are null), each struct with the fields
    // read (the others are null).
    private final StructType used;
    private final Map<List<Object>, Function1<PartitionedFile, Iterator<InternalRow>>> built =
        new HashMap<>();

    Readers(StructType used) {
      this.used = used;
    }

    /**
     * The partitions of one micro-batch, rows {@code [start, end)} of each range's file: the
     * row groups in order, cut into about one partition per core (a partition is whole row
     * groups, but for rows of a group an earlier or later batch reads). When every partition
     * is whole row groups of files whose columns are the table's, they are read as columnar
     * batches, as Spark reads its own Parquet tables; otherwise a row at a time, cast.
     */
    List<InputPartition> plan(List<BoundedFilesSource.Range> ranges,
        java.util.function.Function<String, Footer> footers) {
      SparkSession spark = SparkSession.active();
      long total = 0;
      for (BoundedFilesSource.Range range : ranges) {
        total += range.end() - range.start();
      }
      int cores = Math.max(1, spark.sparkContext().defaultParallelism());
      long target = Math.max(1, (total + cores - 1) / cores);
      List<Chunk> chunks = new ArrayList<>();
      boolean columnar = new ParquetFileFormat().supportBatch(spark,
          BoundedFilesSource.withControl(used));
      for (BoundedFilesSource.Range range : ranges) {
        if (range.start() >= range.end()) {
          continue; // a file without rows: nothing of it is read
        }
        Footer footer = footers.apply(range.file());
        StructType read = requested(range.file(), used, footer.schema());
        columnar &= DataType.equalsIgnoreNullability(read, used);
        int g = footer.group(range.start());
        while (g < footer.rows().length && footer.firstRows()[g] < range.end()) {
          int first = g;
          long rows = 0;
          do {
            rows += Math.min(range.end(), footer.firstRows()[g] + footer.rows()[g])
                - Math.max(range.start(), footer.firstRows()[g]);
            g++;
          } while (rows < target && g < footer.rows().length
              && footer.firstRows()[g] < range.end());
          chunks.add(new Chunk(range, footer, read, first, g - 1));
          columnar &= footer.firstRows()[first] >= range.start();
          columnar &= footer.firstRows()[g - 1] + footer.rows()[g - 1] <= range.end();
        }
      }
      List<InputPartition> parts = new ArrayList<>();
      boolean batches = columnar;
      for (Chunk chunk : chunks) {
        Footer footer = chunk.footer();
        StructType read = batches ? used : chunk.read();
        Function1<PartitionedFile, Iterator<InternalRow>> reader = built.computeIfAbsent(
            List.of(read, batches), key -> sparkReader(read, batches));
        long from = footer.firstRows()[chunk.first()];
        long to = footer.firstRows()[chunk.last()] + footer.rows()[chunk.last()];
        parts.add(new Part(chunk.range().file(), footer.size(), from,
            Math.max(chunk.range().start(), from), Math.min(chunk.range().end(), to),
            footer.starts()[chunk.first()], footer.ends()[chunk.last()], read, batches, reader));
      }
      return parts;
    }
  }

  /** Row groups {@code first..last} of a range's file, read as {@code read}. */
  private record Chunk(BoundedFilesSource.Range range, Footer footer, StructType read, int first,
      int last) {}

  private static Function1<PartitionedFile, Iterator<InternalRow>> sparkReader(StructType read,
      boolean columnar) {
    SparkSession spark = SparkSession.active();
    ParquetFileFormat format = new ParquetFileFormat();
    scala.collection.immutable.Map<String, String> options =
        new scala.collection.immutable.Map.Map1<>(FileFormat$.MODULE$.OPTION_RETURNING_BATCH(),
            String.valueOf(columnar));
    return format.buildReaderWithPartitionValues(spark, read,
        // The control columns, as constants of each file (Spark's partition values).
        columnar ? BoundedFilesSource.CONTROL : new StructType(), read,
        CollectionConverters.asScala(List.<Filter>of()).toList(), options,
        format.getHadoopConf(spark, options));
  }

  /**
   * What to read of a file for the table's {@code columns}: each column the file has, named as
   * the table names it, with the file's types where they are leaves and the table's structure
   * (fields in its order, by name) where they are structs, arrays or maps. Cast to the table's
   * type by position after that, each value lands in its own field.
   */
  static StructType requested(String file, StructType columns, StructType given) {
    List<StructField> fields = new ArrayList<>();
    for (StructField column : columns.fields()) {
      StructField found = find(given, column.name());
      if (found != null) {
        DataType type = requested(column.dataType(), found.dataType());
        if (!type.equals(column.dataType()) && !Cast.canAnsiCast(type, column.dataType())) {
          // No cause under it: the message a user is shown is the innermost one.
          throw new UncheckedIOException(new IOException("cannot read '" + file
              + "' as Parquet: column '" + column.name() + "' is "
              + found.dataType().simpleString() + " in the file, which cannot be cast to the"
              + " table's " + column.dataType().simpleString()));
        }
        fields.add(new StructField(column.name(), type, true, column.metadata()));
      }
    }
    return new StructType(fields.toArray(new StructField[0]));
  }

  private static DataType requested(DataType wanted, DataType given) {
    if (wanted instanceof StructType w && given instanceof StructType g) {
      List<StructField> fields = new ArrayList<>();
      for (StructField field : w.fields()) {
        StructField found = find(g, field.name());
        // A field the file lacks is read as null (Spark's reader fills missing fields).
        DataType type = found == null ? field.dataType() : requested(field.dataType(),
            found.dataType());
        fields.add(new StructField(field.name(), type, true, field.metadata()));
      }
      return new StructType(fields.toArray(new StructField[0]));
    }
    if (wanted instanceof ArrayType w && given instanceof ArrayType g) {
      return new ArrayType(requested(w.elementType(), g.elementType()), true);
    }
    if (wanted instanceof MapType w && given instanceof MapType g) {
      return new MapType(requested(w.keyType(), g.keyType()),
          requested(w.valueType(), g.valueType()), true);
    }
    return given;
  }

  private static StructField find(StructType struct, String name) {
    for (StructField field : struct.fields()) {
      if (field.name().equals(name)) {
        return field;
      }
    }
    for (StructField field : struct.fields()) {
      if (field.name().equalsIgnoreCase(name)) {
        return field;
      }
    }
    return null;
  }

  /** The table's row (its columns, then the two control columns) from a row read as
   * {@code read}. */
  private static UnsafeProjection projection(StructType columns, StructType read) {
    List<Expression> values = new ArrayList<>();
    for (StructField column : columns.fields()) {
      int index = List.of(read.fieldNames()).indexOf(column.name());
      DataType wanted = column.dataType();
      if (index < 0) {
        values.add(Literal.create(null, wanted));
        continue;
      }
      DataType given = read.fields()[index].dataType();
      values.add(value(new BoundReference(index, given, true), given, wanted));
    }
    values.add(Literal.create(null, DataTypes.TimestampType));
    values.add(Literal.create(false, DataTypes.BooleanType));
    return UnsafeProjection.create(CollectionConverters.asScala(values).toList());
  }

  /** {@code value}, read as {@code given}, as the table's {@code wanted}: cast, and a struct
   * read with some of its fields made whole, the others null. */
  private static Expression value(Expression value, DataType given, DataType wanted) {
    if (given.equals(wanted)) {
      return value;
    }
    if (wanted instanceof StructType w && given instanceof StructType g
        && g.length() < w.length()) {
      List<Expression> fields = new ArrayList<>();
      List<String> read = List.of(g.fieldNames());
      for (StructField field : w.fields()) {
        int at = read.indexOf(field.name());
        fields.add(Literal.create(field.name(), DataTypes.StringType));
        fields.add(at < 0 ? Literal.create(null, field.dataType()) : value(
            new GetStructField(value, at, Option.apply(field.name())),
            g.fields()[at].dataType(), field.dataType()));
      }
      return new If(new IsNull(value), Literal.create(null, wanted),
          new CreateNamedStruct(CollectionConverters.asScala(fields).toList()));
    }
    return new Cast(value, wanted, Option.apply("UTC"), EvalMode$.MODULE$.ANSI());
  }

  private static PartitionedFile split(Part part, InternalRow constants) {
    return PartitionedFile$.MODULE$.apply(constants, SparkPath$.MODULE$.fromPathString(
        part.file()), part.byteStart(), part.byteEnd() - part.byteStart(), new String[0], 0L,
        part.size(), scala.collection.immutable.Map$.MODULE$.empty());
  }

  /** A partition's rows as Spark's reader decodes them: columnar batches of the table's
   * columns and the control columns (null, false). */
  static PartitionReader<ColumnarBatch> batches(StructType columns, Part part) {
    Iterator<?> batches;
    try {
      batches = part.reader().apply(split(part, new GenericInternalRow(new Object[] {null,
          false})));
    } catch (RuntimeException err) {
      throw unreadable(part.file(), err);
    }
    List<String> read = List.of(part.read().fieldNames());
    return new PartitionReader<>() {
      private ColumnarBatch source; // the reader's batch, which it refills
      private int capacity;
      private ColumnarBatch current;
      private long given;

      @Override
      public boolean next() {
        try {
          if (!batches.hasNext()) {
            checkCount(part, given);
            return false;
          }
          ColumnarBatch batch = (ColumnarBatch) batches.next();
          given += batch.numRows();
          if (batch != source || batch.numRows() > capacity) {
            source = batch;
            capacity = batch.numRows();
            current = widen(batch);
          }
          current.setNumRows(batch.numRows());
          return true;
        } catch (RuntimeException err) {
          throw unreadable(part.file(), err);
        }
      }

      /** The table's columns over the reader's (whose vectors it reuses batch to batch):
       * those not read are null; the control columns are the reader's last two. */
      private ColumnarBatch widen(ColumnarBatch batch) {
        int n = columns.length();
        ColumnVector[] vectors = new ColumnVector[n + 2];
        for (int i = 0; i < n; i++) {
          StructField column = columns.fields()[i];
          int at = read.indexOf(column.name());
          DataType given = at < 0 ? null : part.read().fields()[at].dataType();
          if (given != null && !given.equals(column.dataType())) { // a struct, some fields read
            vectors[i] = new FieldsOfStruct((StructType) column.dataType(), batch.column(at),
                (StructType) given, batch.numRows());
          } else if (at >= 0) {
            vectors[i] = batch.column(at);
          } else {
            ConstantColumnVector nulls = new ConstantColumnVector(batch.numRows(),
                columns.fields()[i].dataType());
            nulls.setNull();
            vectors[i] = nulls;
          }
        }
        vectors[n] = batch.column(read.size());
        vectors[n + 1] = batch.column(read.size() + 1);
        return new ColumnarBatch(vectors, batch.numRows());
      }

      @Override
      public ColumnarBatch get() {
        return current;
      }

      @Override
      public void close() throws IOException {
        ParquetFiles.close(batches);
      }
    };
  }

  /** Fails unless a partition gave its rows: a row group missed or read twice (Parquet picks a
   * split's groups by where their middles are) would otherwise lose or repeat rows silently. */
  private static void checkCount(Part part, long given) {
    if (given != part.end() - part.start()) {
      throw new IllegalStateException("rows " + part.start() + " to " + part.end()
          + " gave " + given + " rows (bytes " + part.byteStart() + " to " + part.byteEnd()
          + " did not select their row groups)");
    }
  }

  /** Closes Spark's iterator over a file; one that cannot be closed (the reader that is not
   * vectorised gives such) is read to its end, which closes its file. */
  private static void close(Iterator<?> rows) throws IOException {
    if (rows instanceof Closeable closeable) {
      closeable.close();
      return;
    }
    while (rows.hasNext()) {
      rows.next();
    }
  }

  static PartitionReader<InternalRow> reader(StructType columns, Part part) {
    String file = part.file();
    UnsafeProjection projection;
    Iterator<InternalRow> rows;
    try {
      projection = projection(columns, part.read());
      rows = part.reader().apply(split(part, InternalRow$.MODULE$.empty()));
    } catch (RuntimeException err) {
      throw unreadable(file, err);
    }
    return new PartitionReader<>() {
      private long row = part.firstRow(); // of the file, of the next row of rows
      private InternalRow current;

      @Override
      public boolean next() {
        try {
          // Rows before the range (an earlier micro-batch's) are decoded, and not projected.
          while (row < part.start() && rows.hasNext()) {
            rows.next();
            row++;
          }
          if (row >= part.end()) {
            return false;
          }
          if (!rows.hasNext()) {
            checkCount(part, row - part.start());
            return false;
          }
          current = projection.apply(rows.next());
          row++;
          return true;
        } catch (RuntimeException err) {
          throw unreadable(file, err);
        }
      }

      @Override
      public InternalRow get() {
        return current;
      }

      @Override
      public void close() throws IOException {
        ParquetFiles.close(rows);
      }
    };
  }
}
