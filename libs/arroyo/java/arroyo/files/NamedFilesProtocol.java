package arroyo.files;

import java.io.Serializable;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.internal.io.FileCommitProtocol;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * A Spark file write whose files go straight to their final paths, under names the caller
 * chooses, with nothing committed: the filesystem sink on S3 writes under an S3A "magic" path,
 * where every file is a multipart upload left pending, and completes the uploads itself when
 * the micro-batch commits ({@link PendingUploads}, {@link UploadsSink}).
 *
 * <p>Each task attempt writes under a directory of its own, {@code <path>/<attempt>/__base/}
 * (S3A drops everything from the magic directory to {@code __base} from the upload's key), so
 * that two attempts of one task (a speculative copy, a zombie of a failed stage) never share a
 * record of their uploads: the driver completes only those of the attempts Spark committed
 * ({@link #committed}), and an attempt that fails aborts its own.
 *
 * <p>Names come from the protocol's template, in which {@code {n}} is the
 * file's number: the task's partition (five digits), then {@code -<k>} for the task's k-th file
 * in a directory after its first there. The same batch written again names its files the same.
 */
public final class NamedFilesProtocol extends FileCommitProtocol implements Serializable {
  private static final long serialVersionUID = 1L;

  /** A task attempt Spark committed: its directory under the job's path and its file count. */
  public record Attempt(String dir, int files) implements Serializable {}

  private final String path;
  private final String template;
  private transient java.util.Map<String, Integer> opened;
  // The attempts Spark committed, on the driver once the job is.
  private transient java.util.List<Attempt> committed;

  /** A write under {@code path} whose files are named by {@code template}. */
  public NamedFilesProtocol(String path, String template) {
    if (!template.contains("{n}")) {
      throw new IllegalArgumentException("a file name template needs {n}: " + template);
    }
    this.path = path;
    this.template = template;
  }

  @Override
  public void setupJob(JobContext job) {}

  @Override
  public void commitJob(JobContext job, Seq<TaskCommitMessage> messages) {
    java.util.List<Attempt> attempts = new java.util.ArrayList<>();
    scala.collection.Iterator<TaskCommitMessage> it = messages.iterator();
    while (it.hasNext()) {
      attempts.add((Attempt) it.next().obj());
    }
    committed = attempts;
  }

  /** The task attempts Spark committed (on the driver, once the job is). */
  public java.util.List<Attempt> committed() {
    if (committed == null) {
      throw new IllegalStateException("the write under " + path + " was not committed");
    }
    return committed;
  }

  @Override
  public void abortJob(JobContext job) {}

  @Override
  public void setupTask(TaskAttemptContext task) {
    opened = new java.util.HashMap<>();
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext task, Option<String> dir, String ext) {
    return newTaskTempFile(task, dir, new FileNameSpec("", ext));
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext task, Option<String> dir, FileNameSpec spec) {
    int partition = task.getTaskAttemptID().getTaskID().getId();
    String under = dir.isDefined() ? partitionDir(dir.get()) : "";
    if (opened == null) {
      opened = new java.util.HashMap<>();
    }
    int before = opened.merge(under, 1, Integer::sum) - 1;
    String number = String.format("%05d", partition) + (before == 0 ? "" : "-" + before);
    String name = template.replace("{n}", number);
    String base = path + "/" + attemptDir(task) + "/__base";
    return under.isEmpty() ? base + "/" + name : base + "/" + under + "/" + name;
  }

  /**
   * The sink's partition directory for Spark's {@code <column>=<escaped value>/...}: each
   * level's value unescaped (it may hold '/', a time pattern's levels), an empty value
   * (Spark's {@code __HIVE_DEFAULT_PARTITION__}) no level at all, and no part that climbs out
   * of the sink's directory. As {@code arroyo.connectors.filesystem.sink._partition_dir}.
   */
  static String partitionDir(String spark) {
    StringBuilder out = new StringBuilder();
    for (String level : spark.split("/")) {
      String value = ExternalCatalogUtils.unescapePathName(level.substring(level.indexOf('=') + 1));
      if (value.equals(ExternalCatalogUtils.DEFAULT_PARTITION_NAME())) {
        continue;
      }
      for (String part : value.split("/")) {
        if (part.isEmpty()) {
          continue;
        }
        out.append(out.length() == 0 ? "" : "/")
            .append(part.equals(".") || part.equals("..") ? part.replace(".", "%2E") : part);
      }
    }
    return out.toString();
  }

  @Override
  public String newTaskTempFileAbsPath(TaskAttemptContext task, String absoluteDir, String ext) {
    throw new UnsupportedOperationException("NamedFilesProtocol writes under its path only");
  }

  private static String attemptDir(TaskAttemptContext task) {
    org.apache.hadoop.mapreduce.TaskAttemptID id = task.getTaskAttemptID();
    // Spark's attempt ids start again with each driver: the job's id keeps apart an executor
    // a killed driver left running.
    String job = task.getConfiguration().get("spark.sql.sources.writeJobUUID", "");
    return "task-" + job + "-" + id.getTaskID().getId() + "-" + id.getId();
  }

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext task) {
    int files = 0;
    if (opened != null) {
      for (int n : opened.values()) {
        files += n;
      }
    }
    return new TaskCommitMessage(new Attempt(attemptDir(task), files));
  }

  @Override
  public void abortTask(TaskAttemptContext task) {
    // The attempt's files were closed (as uploads left pending) before this: abort them.
    try {
      PendingUploads.abortUnder(
          path + "/" + attemptDir(task), task.getConfiguration());
    } catch (java.io.IOException | RuntimeException e) {
      // Aborted with the batch's leftovers when it is replayed, or by a lifecycle rule.
    }
  }
}
