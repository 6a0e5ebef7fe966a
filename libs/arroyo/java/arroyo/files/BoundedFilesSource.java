package arroyo.files;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.GZIPInputStream;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Files as a bounded stream read in the executors' JVMs: the {@code single_file} and
 * {@code filesystem} sources. Mode {@code lines}: one record per non-blank line (JSON, raw
 * text, Debezium JSON...), which Spark SQL then decodes. Mode {@code parquet}: the rows of
 * Parquet files, read by Spark's own Parquet reader a row group per task and cast to the table's
 * columns (see {@link ParquetFiles}).
 *
 * <p>Why not Spark's own file source: a bounded table must end, and its end must push the
 * watermark past every row so that open windows flush (Arroyo's semantics). Spark's file source
 * can do neither; this one knows where its input ends and, after the last record, gives one
 * end-of-input marker row ({@code _eoi}) per batch, the first with the last lines (Parquet's in
 * the batch after). The first marker moves the watermark to the end of time; the batches after
 * it carry a marker too, so they run under that watermark even
 * where Spark schedules no batch without data (stream-stream joins); and a run resumed after the
 * end sees the end again.
 *
 * <p>Rows: lines give {@code value} (the line, UTF-8, malformed bytes replaced); Parquet gives
 * the columns of {@code columns} (Spark DDL). Then {@code _source_time} (null) and
 * {@code _eoi}. Options: {@code path} (a file, or a directory whose visible files at any depth
 * are read in name order), {@code mode}, {@code pattern} (a regular expression that the files'
 * paths relative to the directory contain, as Arroyo's {@code source.regex_pattern}),
 * {@code compression} of lines ({@code none}, {@code gzip} or {@code zstd}) and
 * {@code max_records} (per micro-batch; 0, no cap).
 *
 * <p>Offsets are {@code {"file": i, "pos": p, "eoi": n}}: file {@code i} of the sorted listing,
 * byte {@code p} of its (decompressed) text or row {@code p} of its Parquet, and how many
 * end-of-input batches were given (as the Python source that read files before wrote them, so
 * its checkpoints carry over).
 */
public final class BoundedFilesSource implements TableProvider {
  /** The control columns every row ends with. */
  static final StructType CONTROL = StructType.fromDDL("`_source_time` TIMESTAMP, `_eoi` BOOLEAN");

  /** {@code data}'s columns, then the control columns. */
  static StructType withControl(StructType data) {
    List<StructField> fields = new ArrayList<>(List.of(data.fields()));
    fields.addAll(List.of(CONTROL.fields()));
    return new StructType(fields.toArray(new StructField[0]));
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return new Config(options).schema();
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new FilesTable(schema);
  }

  /** What a query reads: serialisable, as the executors' readers take it. */
  static final class Config implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final String path;
    final boolean parquet;
    final StructType columns;
    final String pattern;
    final String compression;
    final long maxRecords;
    final String useId;
    // bad_data = 'drop': a Parquet file whose footer cannot be read is skipped (and reported
    // in the source's metrics, droppedFiles) rather than failing the query.
    final boolean dropBad;
    // How the executors reach an object store's files (null for local files, read directly).
    final org.apache.spark.util.SerializableConfiguration hadoop;

    Config(CaseInsensitiveStringMap options) {
      path = options.get("path");
      hadoop = Listing.remote(path)
          ? new org.apache.spark.util.SerializableConfiguration(Listing.hadoopConf())
          : null;
      parquet = options.getOrDefault("mode", "lines").equals("parquet");
      columns = parquet ? StructType.fromDDL(options.get("columns")) : null;
      String given = options.getOrDefault("pattern", "");
      pattern = given.isEmpty() ? null : given;
      compression = options.getOrDefault("compression", "none");
      maxRecords = Long.parseLong(options.getOrDefault("max_records", "0"));
      useId = options.getOrDefault("use_id", "");
      dropBad = options.getOrDefault("bad_data", "fail").equals("drop");
      if (!Set.of("none", "gzip", "zstd").contains(compression)) {
        throw new IllegalArgumentException("unknown compression '" + compression + "'");
      }
    }

    StructType schema() {
      return withControl(parquet ? columns : StructType.fromDDL("`value` STRING"));
    }

    /** The input files, in the order they are read. */
    List<String> files() {
      return list(path, pattern);
    }

    /** The file's lines from byte {@code pos} of its (decompressed) text. */
    Lines open(String file, long pos) throws IOException {
      if (hadoop != null) {
        org.apache.hadoop.fs.Path at = new org.apache.hadoop.fs.Path(file);
        org.apache.hadoop.fs.FSDataInputStream in = at.getFileSystem(hadoop.value()).open(at);
        try {
          if (compression.equals("none")) {
            in.seek(pos);
            return new Lines(in, pos, pos);
          }
          return new Lines(decompressed(in), 0, pos);
        } catch (IOException | RuntimeException err) {
          in.close();
          throw err;
        }
      }
      if (compression.equals("none")) {
        SeekableByteChannel channel = Files.newByteChannel(Paths.get(file));
        try {
          channel.position(pos);
          return new Lines(Channels.newInputStream(channel), pos, pos);
        } catch (IOException | RuntimeException err) {
          channel.close();
          throw err;
        }
      }
      InputStream raw = Files.newInputStream(Paths.get(file));
      try {
        return new Lines(decompressed(raw), 0, pos); // a compressed text has no seek
      } catch (IOException | RuntimeException err) {
        raw.close();
        throw err;
      }
    }

    private InputStream decompressed(InputStream raw) throws IOException {
      return compression.equals("gzip")
          ? new GZIPInputStream(raw, 1 << 16)
          : new com.github.luben.zstd.ZstdInputStream(raw);
    }

    IOException unreadable(String file, IOException err) {
      String how = compression.equals("none") ? "" : " as " + compression + " (source.compression)";
      return new IOException("cannot read '" + file + "'" + how + ": " + err.getMessage(), err);
    }
  }

  /** The files a file table reads, in the order it reads them: see {@link Listing#list}. The
   * streaming source and the lookup tables both list through here. */
  public static List<String> list(String path, String pattern) {
    return Listing.list(path, pattern);
  }

  static final class FilesTable implements Table, SupportsRead {
    private final StructType schema;

    FilesTable(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return "arroyo_files";
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new FilesScan(new Config(options));
    }
  }

  /** A scan of the files. (Spark pushes no column pruning into a micro-batch scan: see
   * {@link ColumnUse} for how a Parquet source learns which columns its query uses.) */
  static final class FilesScan implements ScanBuilder, Scan {
    private final Config config;

    FilesScan(Config config) {
      this.config = config;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return config.schema();
    }

    @Override
    public String description() {
      return "arroyo_files(" + config.path + ")";
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new FilesStream(
          config, ColumnUse.used(checkpointLocation, config.useId), checkpointLocation);
    }
  }

  static final class FileOffset extends Offset {
    private static final Pattern FIELD = Pattern.compile("\"(file|pos|eoi)\"\\s*:\\s*(\\d+)");
    final int file;
    final long pos;
    final long eoi;

    FileOffset(int file, long pos, long eoi) {
      this.file = file;
      this.pos = pos;
      this.eoi = eoi;
    }

    static FileOffset fromJson(String json) {
      int file = 0;
      long pos = 0;
      long eoi = 0;
      Matcher m = FIELD.matcher(json);
      while (m.find()) {
        long value = Long.parseLong(m.group(2));
        switch (m.group(1)) {
          case "file" -> file = (int) value;
          case "pos" -> pos = value;
          default -> eoi = value;
        }
      }
      return new FileOffset(file, pos, eoi);
    }

    @Override
    public String json() {
      return "{\"file\": " + file + ", \"pos\": " + pos + ", \"eoi\": " + eoi + "}";
    }
  }

  /** Bytes {@code [start, end)} of one file of lines ({@code end} -1: to its end). Parquet's
   * partitions are {@link ParquetFiles.Part}s. */
  record Range(String file, long start, long end) implements InputPartition {}

  /** The end-of-input marker row. */
  record EndOfInput() implements InputPartition {}

  static final class FilesStream
      implements MicroBatchStream, SupportsAdmissionControl,
          org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics {
    private final Config config;
    private final Map<String, ParquetFiles.Footer> footers = new java.util.HashMap<>();
    // Files skipped as unreadable under bad_data = 'drop', in the order they were met.
    private final java.util.Set<String> dropped = new java.util.LinkedHashSet<>();
    private final ParquetFiles.Readers readers;
    private List<String> listed; // by the last latestOffset
    // Its query's key in FinishedQueries.
    private final String query;

    /** {@code used}: what the query uses of the columns, or null for all. */
    FilesStream(Config config, ColumnUse.Use used, String location) {
      this.config = config;
      this.query = FinishedQueries.starting(location);
      readers = config.parquet ? new ParquetFiles.Readers(
          used == null ? config.columns : used.of(config.columns)) : null;
    }

    @Override
    public Offset initialOffset() {
      return new FileOffset(0, 0, 0);
    }

    @Override
    public Offset deserializeOffset(String json) {
      return FileOffset.fromJson(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return config.maxRecords > 0 ? ReadLimit.maxRows(config.maxRecords) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) is used instead");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
      FileOffset start = (FileOffset) startOffset;
      if (start.eoi > 0 && FinishedQueries.finished(query)) {
        return start; // no more markers: the query is done (FinishedQueries)
      }
      List<String> files = config.files();
      listed = files;
      if (start.file >= files.size()) {
        return new FileOffset(start.file, 0, start.eoi + 1);
      }
      if (!(limit instanceof ReadMaxRows max)) {
        return endOf(files, files.size(), 0);
      }
      long budget = max.maxRows();
      long taken = 0;
      int file = start.file;
      long pos = start.pos;
      while (budget > 0 && file < files.size()) {
        String name = files.get(file);
        if (config.parquet) {
          // Whole row groups while they fit the cap; part of one only when none fit yet.
          ParquetFiles.Footer footer = footer(name);
          long take = Math.min(footer.groupEnd(pos), footer.total()) - pos;
          if (take > budget) {
            if (taken > 0) {
              break;
            }
            take = budget;
          }
          budget -= take;
          taken += take;
          pos += take;
          if (pos >= footer.total()) {
            file++;
            pos = 0;
          }
          continue;
        }
        Lines lines = null;
        try {
          lines = config.open(name, pos);
          while (budget > 0 && lines.next()) {
            if (!lines.blank()) {
              budget--;
            }
          }
          pos = lines.position();
          if (lines.atEnd()) {
            file++;
            pos = 0;
          }
        } catch (IOException err) {
          throw new UncheckedIOException(config.unreadable(name, err));
        } finally {
          closeQuietly(lines);
        }
      }
      return endOf(files, file, pos);
    }

    /** A batch's end at {@code file}, {@code pos}: lines that reach the end carry the first
     * end-of-input marker in the same batch, so a bounded run takes one batch fewer (its next
     * batch, the second marker's, runs under the final watermark). Parquet's marker waits for
     * the next batch: Spark refuses columnar and row partitions in one. */
    private FileOffset endOf(List<String> files, int file, long pos) {
      return new FileOffset(file, pos, !config.parquet && file >= files.size() ? 1 : 0);
    }

    /** A Parquet file's footer, read once per query (the files of a bounded input do not
     * change while it is read). */
    private ParquetFiles.Footer footer(String file) {
      // The session's Hadoop settings, as Spark's readers take them (an object store's
      // credentials among them).
      return footers.computeIfAbsent(file, f -> {
        try {
          return ParquetFiles.footer(f, Listing.hadoopConf());
        } catch (ParquetFiles.NotParquet err) {
          if (!config.dropBad) {
            throw err;
          }
          dropped.add(f);
          return ParquetFiles.Footer.empty();
        }
      });
    }

    /** In each progress record's source metrics: the files skipped so far, and which. */
    @Override
    public Map<String, String> metrics(java.util.Optional<Offset> latestConsumedOffset) {
      if (dropped.isEmpty()) {
        return Map.of();
      }
      return Map.of(
          "droppedFiles", Integer.toString(dropped.size()),
          "droppedFileNames", String.join("\n", dropped));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
      FileOffset start = (FileOffset) startOffset;
      FileOffset end = (FileOffset) endOffset;
      // The listing the end offset was counted on (listed again only for a batch replayed
      // after a restart, whose offsets Spark read from its log).
      List<String> files = listed != null ? listed : config.files();
      List<InputPartition> parts = new ArrayList<>();
      List<Range> parquet = new ArrayList<>();
      for (int i = start.file; i < Math.min(end.file + 1, files.size()); i++) {
        long lo = i == start.file ? start.pos : 0;
        long hi = i == end.file ? end.pos : -1;
        if (i == end.file && hi == 0) {
          continue;
        }
        if (config.parquet) {
          long total = footer(files.get(i)).total();
          parquet.add(new Range(files.get(i), lo, hi < 0 ? total : hi));
          continue;
        }
        parts.add(new Range(files.get(i), lo, hi));
      }
      if (!parquet.isEmpty()) {
        parts.addAll(readers.plan(parquet, this::footer));
      }
      // With lines' last rows, or alone (Parquet's: Spark refuses a batch of columnar and row
      // partitions together, and the marker is a row; see endOf).
      if (end.eoi > start.eoi) {
        parts.add(new EndOfInput());
      }
      return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new ReaderFactory(config);
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
  }

  static final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final Config config;

    ReaderFactory(Config config) {
      this.config = config;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return reader(config, partition);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return partition instanceof ParquetFiles.Part part && part.columnar();
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return ParquetFiles.batches(config.columns, (ParquetFiles.Part) partition);
    }
  }

  static PartitionReader<InternalRow> reader(Config config, InputPartition partition) {
    if (partition instanceof EndOfInput) {
      Object[] marker = new Object[config.schema().length()];
      marker[marker.length - 1] = true;
      return new PartitionReader<>() {
        private boolean given;

        @Override
        public boolean next() {
          boolean first = !given;
          given = true;
          return first;
        }

        @Override
        public InternalRow get() {
          return new GenericInternalRow(marker);
        }

        @Override
        public void close() {}
      };
    }
    if (partition instanceof ParquetFiles.Part part) {
      return ParquetFiles.reader(config.columns, part);
    }
    Range range = (Range) partition;
    Lines lines;
    try {
      lines = config.open(range.file(), range.start());
    } catch (IOException err) {
      throw new UncheckedIOException(config.unreadable(range.file(), err));
    }
    return new PartitionReader<>() {
      private UTF8String current;

      @Override
      public boolean next() throws IOException {
        try {
          while ((range.end() < 0 || lines.position() < range.end()) && lines.next()) {
            if (!lines.blank()) {
              current = lines.text();
              return true;
            }
          }
          return false;
        } catch (IOException err) {
          throw config.unreadable(range.file(), err);
        }
      }

      @Override
      public InternalRow get() {
        return new GenericInternalRow(new Object[] {current, null, false});
      }

      @Override
      public void close() throws IOException {
        lines.close();
      }
    };
  }

  static void closeQuietly(Lines lines) {
    if (lines != null) {
      try {
        lines.close();
      } catch (IOException err) {
        // read to the end or failed already: nothing more to report
      }
    }
  }
}
