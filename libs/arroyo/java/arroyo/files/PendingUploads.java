package arroyo.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.commit.files.SinglePendingCommit;
import org.apache.hadoop.fs.s3a.commit.impl.CommitOperations;
import software.amazon.awssdk.services.s3.model.MultipartUpload;

/**
 * The files a write under an S3A "magic" directory ({@code <dir>/__magic_job-<id>/__base/...})
 * left as pending multipart uploads, each to the same path under {@code <dir>} without the
 * magic part: invisible to every reader until completed here, on the driver, when the
 * filesystem sink commits its micro-batch. A completed upload appears whole at once; an aborted
 * one never appears.
 */
public final class PendingUploads {
  // Removes the magic directories of completed batches, off the batch's critical path.
  private static final ExecutorService CLEANER =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "arroyo-magic-cleaner");
            t.setDaemon(true);
            return t;
          });

  private final String magic;
  private final CommitOperations ops;
  private final List<SinglePendingCommit> commits;

  private PendingUploads(String magic, CommitOperations ops, List<SinglePendingCommit> commits) {
    this.magic = magic;
    this.ops = ops;
    this.commits = commits;
  }

  /**
   * The uploads the attempts Spark {@code committed} left pending under {@code magic}; those of
   * other attempts (failed, or a copy of one committed) are aborted. An attempt whose uploads
   * are fewer than its files wrote them somewhere else: the bucket does not treat the magic
   * path as such, and the batch fails rather than commit without its files.
   */
  public static PendingUploads of(String magic, List<NamedFilesProtocol.Attempt> committed)
      throws IOException {
    Configuration conf = Listing.hadoopConf();
    CommitOperations ops = operations(magic, conf);
    Map<String, Integer> expected = new HashMap<>();
    for (NamedFilesProtocol.Attempt attempt : committed) {
      expected.put(attempt.dir(), attempt.files());
    }
    Map<String, Integer> found = new HashMap<>();
    List<SinglePendingCommit> kept = new ArrayList<>();
    String root = new Path(magic).toUri().getPath() + "/";
    for (Map.Entry<String, SinglePendingCommit> entry : load(magic, conf).entrySet()) {
      String under = entry.getKey().substring(entry.getKey().indexOf(root) + root.length());
      String attempt = under.substring(0, Math.max(0, under.indexOf('/')));
      if (expected.containsKey(attempt)) {
        kept.add(entry.getValue());
        found.merge(attempt, 1, Integer::sum);
      } else {
        // An attempt Spark did not commit (failed, or a copy of one that was).
        try {
          ops.abortSingleCommit(entry.getValue());
        } catch (IOException | RuntimeException ignored) {
          // Pending, never visible: aborted by the bucket's lifecycle rule.
        }
      }
    }
    for (Map.Entry<String, Integer> attempt : expected.entrySet()) {
      int uploads = found.getOrDefault(attempt.getKey(), 0);
      if (uploads != attempt.getValue()) {
        for (SinglePendingCommit commit : kept) {
          abortQuietly(ops, commit);
        }
        throw new IOException(
            "task "
                + attempt.getKey()
                + " wrote "
                + attempt.getValue()
                + " files under "
                + magic
                + " but left "
                + uploads
                + " pending uploads: S3A's magic committer is not on for this bucket");
      }
    }
    return new PendingUploads(magic, ops, kept);
  }

  /** Aborts the uploads recorded under {@code dir} (a task attempt's, on an executor). */
  public static void abortUnder(String dir, Configuration conf) throws IOException {
    CommitOperations ops = operations(dir, conf);
    for (SinglePendingCommit commit : load(dir, conf).values()) {
      abortQuietly(ops, commit);
    }
  }

  private static void abortQuietly(CommitOperations ops, SinglePendingCommit commit)
      throws IOException {
    try {
      ops.abortSingleCommit(commit);
    } catch (java.io.FileNotFoundException gone) {
      // Completed or aborted already.
    }
  }

  /** Their destinations ({@code s3a://bucket/key}). */
  public String[] destinations() {
    List<String> found = new ArrayList<>();
    for (SinglePendingCommit commit : commits) {
      found.add(destination(commit));
    }
    return found.toArray(new String[0]);
  }

  /**
   * Completes the uploads, except those to {@code dropped} (destinations as {@link
   * #destinations} gives them), which are aborted; a batch's uploads are completed together,
   * each one request. Their magic directory is removed in the background: it holds nothing a
   * reader sees, and one a crash left is removed by {@link #sweep}.
   */
  public void complete(String[] dropped) throws IOException {
    Set<String> drop = Set.of(dropped);
    List<SinglePendingCommit> kept = new ArrayList<>();
    for (SinglePendingCommit commit : commits) {
      if (drop.contains(destination(commit))) {
        // Never to be seen; a failure to abort it leaves it pending, not visible.
        try {
          ops.abortSingleCommit(commit);
        } catch (IOException | RuntimeException ignored) {
          // Aborted by the bucket's lifecycle rule.
        }
      } else {
        kept.add(commit);
      }
    }
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(8, kept.size())));
    try {
      List<Future<?>> done = new ArrayList<>();
      for (SinglePendingCommit commit : kept) {
        done.add(
            pool.submit(
                () -> {
                  try {
                    ops.commitOrFail(commit);
                  } catch (IOException e) {
                    throw new UncheckedIOException(e);
                  }
                }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      java.io.InterruptedIOException stop =
          new java.io.InterruptedIOException("interrupted while completing uploads under " + magic);
      stop.initCause(e);
      throw stop;
    } catch (ExecutionException e) {
      Throwable cause = e.getCause() instanceof UncheckedIOException u ? u.getCause() : e;
      throw cause instanceof IOException io ? io : new IOException(cause);
    } finally {
      pool.shutdownNow();
    }
    CLEANER.execute(
        () -> {
          try {
            delete(magic);
          } catch (IOException | RuntimeException e) {
            // Left for the next sweep.
          }
        });
  }

  /** Waits for the magic directories already queued for removal to be gone. */
  public static void awaitRemovals() throws InterruptedException {
    try {
      CLEANER.submit(() -> {}).get();
    } catch (ExecutionException impossible) {
      throw new IllegalStateException(impossible);
    }
  }

  /**
   * Removes the magic directories under {@code dir} named {@code prefix<batch>} of batches up
   * to {@code committed}: what completed batches left when a crash came before their removal.
   */
  public static void sweep(String dir, String prefix, long committed) throws IOException {
    Path root = new Path(dir);
    FileSystem fs = root.getFileSystem(Listing.hadoopConf());
    if (!fs.exists(root)) {
      return;
    }
    for (org.apache.hadoop.fs.FileStatus status : fs.listStatus(root)) {
      String name = status.getPath().getName();
      if (status.isDirectory() && name.startsWith(prefix)) {
        try {
          if (Long.parseLong(name.substring(prefix.length())) <= committed) {
            // A task that closed its file after its batch completed left an upload here.
            abortUnder(status.getPath().toString(), fs.getConf());
            fs.delete(status.getPath(), true);
          }
        } catch (NumberFormatException other) {
          // Not one of the sink's.
        }
      }
    }
  }

  /**
   * Aborts what an attempt of a batch cut short left: the uploads recorded under {@code magic},
   * and any other upload under {@code dir} to a file whose name starts with {@code names} (a
   * task killed before it recorded its upload); then deletes {@code magic}. Only the batch's
   * own names are touched: other writers' uploads to the directory go on.
   */
  public static void abort(String magic, String dir, String names) throws IOException {
    Configuration conf = Listing.hadoopConf();
    CommitOperations ops = operations(magic, conf);
    for (SinglePendingCommit commit : load(magic, conf).values()) {
      // One completed before the attempt was cut short is the sink's to remove, by the
      // batch's record of what it placed.
      abortQuietly(ops, commit);
    }
    for (MultipartUpload upload : ops.listPendingUploadsUnderPath(new Path(dir))) {
      String key = upload.key();
      if (key.substring(key.lastIndexOf('/') + 1).startsWith(names)) {
        try {
          ops.abortMultipartCommit(key, upload.uploadId());
        } catch (java.io.FileNotFoundException gone) {
          // Aborted meanwhile.
        }
      }
    }
    delete(magic);
  }

  private static String destination(SinglePendingCommit commit) {
    return "s3a://" + commit.getBucket() + "/" + commit.getDestinationKey();
  }

  /** The uploads recorded under {@code magic}, by the path of their record. */
  private static Map<String, SinglePendingCommit> load(String magic, Configuration conf)
      throws IOException {
    Path root = new Path(magic);
    FileSystem fs = root.getFileSystem(conf);
    Map<String, SinglePendingCommit> commits = new TreeMap<>();
    if (!fs.exists(root)) {
      return commits;
    }
    RemoteIterator<LocatedFileStatus> files = fs.listFiles(root, true);
    while (files.hasNext()) {
      LocatedFileStatus status = files.next();
      if (status.getPath().getName().endsWith(".pending")) {
        commits.put(
            status.getPath().toUri().getPath(),
            SinglePendingCommit.load(
                fs, status.getPath(), SinglePendingCommit.serializer(), status));
      }
    }
    return commits;
  }

  private static CommitOperations operations(String path, Configuration conf)
      throws IOException {
    FileSystem fs = new Path(path).getFileSystem(conf);
    if (!(fs instanceof S3AFileSystem s3a)) {
      throw new IOException(path + " is not on S3A: its files are not pending uploads");
    }
    return new CommitOperations(s3a);
  }

  private static void delete(String magic) throws IOException {
    Path root = new Path(magic);
    root.getFileSystem(Listing.hadoopConf()).delete(root, true);
  }
}
