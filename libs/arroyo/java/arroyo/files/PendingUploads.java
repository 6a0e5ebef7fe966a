package arroyo.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
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

  private PendingUploads(String magic) throws IOException {
    this.magic = magic;
    this.ops = operations(magic);
    this.commits = load(magic);
  }

  /** The uploads a batch's write left pending under {@code magic}. */
  public static PendingUploads of(String magic) throws IOException {
    return new PendingUploads(magic);
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
    ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, Math.min(8, commits.size())));
    try {
      List<Future<?>> done = new ArrayList<>();
      for (SinglePendingCommit commit : commits) {
        done.add(
            pool.submit(
                () -> {
                  try {
                    if (drop.contains(destination(commit))) {
                      ops.abortSingleCommit(commit);
                    } else {
                      ops.commitOrFail(commit);
                    }
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
      throw new IOException("interrupted while completing uploads under " + magic, e);
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
    CommitOperations ops = operations(magic);
    for (SinglePendingCommit commit : load(magic)) {
      try {
        ops.abortSingleCommit(commit);
      } catch (java.io.FileNotFoundException gone) {
        // Completed before the attempt was cut short (or aborted already): its file is the
        // sink's to remove, by the batch's record of what it placed.
      }
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

  private static List<SinglePendingCommit> load(String magic) throws IOException {
    Path root = new Path(magic);
    FileSystem fs = root.getFileSystem(Listing.hadoopConf());
    List<SinglePendingCommit> commits = new ArrayList<>();
    if (!fs.exists(root)) {
      return commits;
    }
    RemoteIterator<LocatedFileStatus> files = fs.listFiles(root, true);
    while (files.hasNext()) {
      LocatedFileStatus status = files.next();
      if (status.getPath().getName().endsWith(".pending")) {
        commits.add(
            SinglePendingCommit.load(
                fs, status.getPath(), SinglePendingCommit.serializer(), status));
      }
    }
    return commits;
  }

  private static CommitOperations operations(String path) throws IOException {
    Configuration conf = Listing.hadoopConf();
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
