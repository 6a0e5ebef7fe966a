package arroyo.files;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.FileFormatWriter;
import org.apache.spark.sql.execution.datasources.WriteJobStatsTracker;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.text.TextFileFormat;
import scala.Option;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * The filesystem sink on S3, run in the JVM: a micro-batch's files go straight to their keys
 * as multipart uploads left pending (under the batch's S3A magic directory, {@code
 * __magic_job-<sink>-<batch>}, named by {@link NamedFilesProtocol}), and are completed together
 * when the batch commits ({@link PendingUploads}). No reader sees a file before its batch
 * commits, nothing is copied, and the batch costs what Spark's own file sink costs: no Python
 * runs per batch.
 *
 * <p>The sink's records ({@link SinkRecords}) say which batch it committed last (one at or
 * before it is run but not written again) and which files the batch in flight is placing (a
 * replay removes them before it places its own). A batch's first attempt in this process, or a
 * replay, first aborts what an earlier attempt left pending.
 *
 * <p>Options, set by {@code arroyo.connectors.filesystem.uploads}: {@code path} (the sink's
 * directory, {@code s3a://}), {@code sink} (its id), {@code name} (the file name template, with
 * {@code {batch}} and {@code {n}}), {@code own_names} ({@code true} when names hold the sink's
 * id, so only its own attempts can have taken them), {@code format}, {@code table} and {@code
 * where} (for errors), {@code state} and {@code state.remote} (see {@link SinkRecords}), and
 * {@code write.*} (the write's own options).
 */
public final class UploadsSink implements Sink {
  // Writes cut short (a bounded run's end stops the batch in flight), aborted again once the
  // run's queries are gone: Spark's cancelled tasks may go on starting uploads after the
  // batch's own abort. Each is {magic, dir, names}.
  private static final List<String[]> CUT_SHORT = new ArrayList<>();
  // Where batches are completed, out of reach of the interrupt that stops a query.
  private static final java.util.concurrent.ExecutorService PLACING =
      java.util.concurrent.Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "arroyo-uploads-placing");
            t.setDaemon(true);
            return t;
          });

  private final Map<String, String> options;
  private final List<String> partitions;
  private final String path;
  private final String sinkId;
  private final SinkRecords records;
  private final Set<Long> attempted = new HashSet<>();

  UploadsSink(Map<String, String> options, List<String> partitions) {
    this.options = options;
    this.partitions = partitions;
    this.path = required("path");
    this.sinkId = required("sink");
    this.records = new SinkRecords(required("state"), options.get("state.remote"));
  }

  private String required(String key) {
    String value = options.get(key);
    if (value == null) {
      throw new IllegalArgumentException("the uploads sink needs the option '" + key + "'");
    }
    return value;
  }

  @Override
  public void addBatch(long batchId, Dataset<Row> data) {
    org.apache.spark.sql.classic.Dataset<Row> batch =
        (org.apache.spark.sql.classic.Dataset<Row>) data;
    SparkSession session = batch.sparkSession();
    try {
      if (batchId <= records.committed()) {
        // Run all the same: a stateful query's batch must run to its end. A crash after the
        // batch was recorded, before its magic directory went, left that behind.
        batch.queryExecution().executedPlan().execute().foreachPartition(new Consume());
        PendingUploads.sweep(path, magicPrefix(), records.committed());
        return;
      }
      write(session, batch, batchId);
    } catch (SinkError named) {
      throw named;
    } catch (Exception err) {
      if (stopping(err)) {
        // The query is stopping: Spark tells that from a failure by an interruption.
        InterruptedException stop = new InterruptedException("sink stopped in batch " + batchId);
        stop.initCause(err);
        throw UploadsSink.<RuntimeException>rethrow(stop);
      }
      // Spark's or the store's error, with where the files were going: an object store's
      // message names neither the endpoint nor, often, the bucket.
      throw new SinkError(
          "sink '"
              + options.getOrDefault("table", "?")
              + "': cannot write batch "
              + batchId
              + " to "
              + options.getOrDefault("where", path)
              + ": "
              + summary(err),
          err);
    }
  }

  /**
   * Whether {@code err} is the query's stop reaching the sink: the thread's interruption, or
   * the cancelled job it interrupted. Not a store's time-out, although S3A's are {@code
   * InterruptedIOException}s too.
   */
  private static boolean stopping(Throwable err) {
    if (Thread.currentThread().isInterrupted()) {
      return true;
    }
    for (Throwable e = err; e != null; e = e.getCause() == e ? null : e.getCause()) {
      if (e instanceof InterruptedException
          || e instanceof java.nio.channels.ClosedByInterruptException
          || e.getClass() == java.io.InterruptedIOException.class
          || (e instanceof org.apache.spark.SparkException
              && String.valueOf(e.getMessage()).contains("cancelled job group"))) {
        return true;
      }
    }
    return false;
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E rethrow(Throwable err) throws E {
    throw (E) err;
  }

  private String magicPrefix() {
    return "__magic_job-" + sinkId + "-";
  }

  private void write(
      SparkSession session, org.apache.spark.sql.classic.Dataset<Row> batch, long batchId)
      throws IOException, InterruptedException {
    String magic = path + "/" + magicPrefix() + batchId;
    String template = required("name").replace("{batch}", String.format("%010d", batchId));
    String names = template.substring(0, template.indexOf("{n}"));
    // An earlier attempt of this batch ran in another process (this is the first batch this
    // one writes) or failed in this one: what it left pending goes first.
    boolean earlier = attempted.isEmpty() || attempted.contains(batchId);
    if (attempted.isEmpty()) {
      requireMagicPaths(session);
      PendingUploads.sweep(path, magicPrefix(), records.committed());
    }
    attempted.add(batchId);
    if (earlier) {
      // The magic directory an earlier attempt here completed is removed in the background:
      // gone before this attempt writes into it again.
      PendingUploads.awaitRemovals();
      PendingUploads.abort(magic, path, names);
      records.removePlaced(batchId, path, "part-" + sinkId + "-" + String.format("%010d", batchId));
    }
    EmptyFiles empty = new EmptyFiles();
    NamedFilesProtocol protocol = new NamedFilesProtocol(magic, template);
    PendingUploads pending;
    List<String> dropped = new ArrayList<>();
    try {
      save(session, batch, magic, protocol, empty);
      pending = prepare(session, batchId, magic, protocol.committed(), empty.found(), dropped);
    } catch (Exception | Error err) {
      // A write that failed, was interrupted, or was not placed: its uploads would otherwise
      // stay pending, stored and billed, until the batch is replayed, and a run that ends is
      // not replayed. Spark's cancelled tasks may start more after this abort: remembered, and
      // aborted again at the run's end.
      try {
        PendingUploads.abort(magic, path, names);
      } catch (Exception ignored) {
        // Aborted at the run's end or at the replay.
      }
      synchronized (CUT_SHORT) {
        CUT_SHORT.add(new String[] {magic, path, names});
      }
      throw err;
    }
    place(batchId, pending, dropped);
  }

  /**
   * The uploads of the committed tasks, their destinations recorded first (a replay removes
   * them); the files without rows go in {@code dropped}.
   */
  private PendingUploads prepare(
      SparkSession session,
      long batchId,
      String magic,
      List<NamedFilesProtocol.Attempt> committed,
      List<String> empty,
      List<String> dropped)
      throws IOException {
    PendingUploads pending = PendingUploads.of(magic, committed);
    String root = path + "/";
    // Spark's first task writes a file even without rows (for the format's schema): dropped.
    for (String file : empty) {
      dropped.add(root + file.substring(file.indexOf("/__base/") + "/__base/".length()));
    }
    List<String> targets = new ArrayList<>();
    for (String uri : pending.destinations()) {
      if (!uri.startsWith(root)) {
        throw new IOException("an upload to " + uri + " is not under " + root);
      }
      if (!dropped.contains(uri)) {
        targets.add(uri.substring(root.length()));
      }
    }
    targets.sort(null);
    if (!"true".equals(options.get("own_names"))) {
      refuseTaken(session, targets);
    }
    records.placing(batchId, targets);
    return pending;
  }

  /**
   * Completes the batch's uploads and records it committed, whatever interrupts the stream's
   * thread meanwhile (a query's stop): once the batch began to appear, it appears whole. The
   * stop is told after.
   */
  private void place(long batchId, PendingUploads pending, List<String> dropped)
      throws IOException, InterruptedException {
    java.util.concurrent.Future<Void> placed =
        PLACING.submit(
            () -> {
              pending.complete(dropped.toArray(new String[0]));
              records.commit(batchId);
              return null;
            });
    boolean stopped = false;
    while (true) {
      try {
        placed.get();
        break;
      } catch (InterruptedException stop) {
        stopped = true;
      } catch (java.util.concurrent.ExecutionException failed) {
        Throwable cause = failed.getCause();
        if (cause instanceof IOException io) {
          throw io;
        }
        throw new IOException(cause);
      }
    }
    if (stopped) {
      Thread.currentThread().interrupt();
      throw new InterruptedException("stopped after batch " + batchId + " was placed");
    }
  }

  /** Refuses a bucket whose S3A client would write the magic paths as they are. */
  private void requireMagicPaths(SparkSession session) throws IOException {
    Path dir = new Path(path);
    FileSystem fs = dir.getFileSystem(session.sessionState().newHadoopConf());
    if (!fs.hasPathCapability(dir, "fs.s3a.capability.magic.committer")) {
      throw new SinkError(
          "sink '"
              + options.getOrDefault("table", "?")
              + "': S3A's magic committer is off for "
              + path
              + " (fs.s3a.committer.magic.enabled): its files would be visible before their"
              + " batch commits",
          null);
    }
  }

  /**
   * Writes the batch's rows under {@code magic}, as Spark's file sink writes a batch (its plan
   * as it is, not planned again), with the files named by {@code protocol}.
   */
  private void save(
      SparkSession session,
      org.apache.spark.sql.classic.Dataset<Row> batch,
      String magic,
      NamedFilesProtocol protocol,
      EmptyFiles empty) {
    java.util.Map<String, String> written = new java.util.HashMap<>();
    for (Map.Entry<String, String> option : options.entrySet()) {
      if (option.getKey().startsWith("write.")) {
        written.put(option.getKey().substring("write.".length()), option.getValue());
      }
    }
    scala.collection.immutable.Map<String, String> writeOptions = scalaMap(written);
    List<Attribute> columns = new ArrayList<>();
    for (String name : partitions) {
      columns.add(column(batch, name));
    }
    QueryExecution qe = batch.queryExecution();
    FileFormat format =
        "parquet".equals(required("format")) ? new ParquetFileFormat() : new TextFileFormat();
    FileFormatWriter.write(
        session,
        qe.executedPlan(),
        format,
        protocol,
        new FileFormatWriter.OutputSpec(magic, scalaMap(Map.of()), qe.analyzed().output()),
        session.sessionState().newHadoopConfWithOptions(writeOptions),
        CollectionConverters.asScala(columns).toList(),
        Option.empty(),
        CollectionConverters.asScala(List.<WriteJobStatsTracker>of(empty)).toList(),
        writeOptions,
        0);
  }

  private static Attribute column(org.apache.spark.sql.classic.Dataset<Row> batch, String name) {
    scala.collection.Iterator<Attribute> it = batch.logicalPlan().output().iterator();
    while (it.hasNext()) {
      Attribute attribute = it.next();
      if (attribute.name().equals(name)) {
        return attribute;
      }
    }
    throw new IllegalArgumentException("no partition column " + name + " in the batch");
  }

  private static <K, V> scala.collection.immutable.Map<K, V> scalaMap(Map<K, V> map) {
    return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(map));
  }

  /** Reads a partition's rows and nothing more. */
  private static final class Consume
      extends AbstractFunction1<Iterator<InternalRow>, BoxedUnit>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public BoxedUnit apply(Iterator<InternalRow> rows) {
      while (rows.hasNext()) {
        rows.next();
      }
      return BoxedUnit.UNIT;
    }
  }

  private void refuseTaken(SparkSession session, List<String> targets) throws IOException {
    FileSystem fs = new Path(path).getFileSystem(session.sessionState().newHadoopConf());
    for (String target : targets) {
      Path file = new Path(path + "/" + target);
      if (fs.exists(file)) {
        // Not this sink's (its own were removed above): another pipeline's, or a run's before
        // this one started afresh. Replacing it would lose that data.
        throw new SinkError(
            "sink '"
                + options.getOrDefault("table", "?")
                + "': "
                + file
                + " exists and is not this pipeline's (filename.strategy = '"
                + options.getOrDefault("strategy", "?")
                + "' names files by batch alone; write to a fresh path or use the default"
                + " names or 'uuid')",
            null);
      }
    }
  }

  /** What went wrong, in a line: the exception, and its root cause when that says more. */
  static String summary(Throwable err) {
    String outer = firstLine(err.toString());
    Throwable root = err;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String inner = firstLine(root.toString());
    return root == err || outer.contains(inner) ? outer : outer + " (caused by " + inner + ")";
  }

  private static String firstLine(String text) {
    int end = text.indexOf('\n');
    return end < 0 ? text : text.substring(0, end);
  }

  /**
   * Aborts the uploads of the writes cut short in this JVM, once Spark's tasks are gone (at
   * most {@code waitMillis}): the runner's end, when every query has stopped.
   */
  public static void abortCutShort(long waitMillis) throws InterruptedException {
    List<String[]> cut;
    synchronized (CUT_SHORT) {
      cut = new ArrayList<>(CUT_SHORT);
      CUT_SHORT.clear();
    }
    if (cut.isEmpty()) {
      return;
    }
    long deadline = System.currentTimeMillis() + waitMillis;
    SparkContext context = SparkContext.getOrCreate();
    while (context.statusTracker().getActiveStageIds().length > 0
        && System.currentTimeMillis() < deadline) {
      Thread.sleep(100);
    }
    for (String[] write : cut) {
      try {
        PendingUploads.abort(write[0], write[1], write[2]);
      } catch (IOException | RuntimeException e) {
        // Aborted at the batch's replay, or by the bucket's lifecycle rule.
      }
    }
  }

  @Override
  public String toString() {
    return "ArroyoUploadsSink[" + path + "]";
  }

  /** A sink error whose message says what and where; the runner shows the message. */
  public static final class SinkError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    SinkError(String message, Throwable cause) {
      super(message, cause);
    }
  }
}
