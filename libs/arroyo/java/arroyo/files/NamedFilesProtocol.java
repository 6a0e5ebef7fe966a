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
 * the micro-batch commits ({@link PendingUploads}).
 *
 * <p>Names come from the write's option {@value #NAME}, a template in which {@code {n}} is the
 * file's number: the task's partition (five digits), then {@code -<k>} for the task's k-th file
 * in a directory after its first there. The same batch written again names its files the same.
 */
public final class NamedFilesProtocol extends FileCommitProtocol implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final String NAME = "arroyo.files.name";

  private final String path;
  private transient java.util.Map<String, Integer> opened;

  public NamedFilesProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    if (dynamicPartitionOverwrite) {
      throw new IllegalArgumentException("NamedFilesProtocol never overwrites partitions");
    }
    this.path = path;
  }

  @Override
  public void setupJob(JobContext job) {}

  @Override
  public void commitJob(JobContext job, Seq<TaskCommitMessage> messages) {}

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
    String template = task.getConfiguration().get(NAME);
    if (template == null || !template.contains("{n}")) {
      throw new IllegalStateException("a NamedFilesProtocol write needs the option " + NAME);
    }
    int partition = task.getTaskAttemptID().getTaskID().getId();
    String under = dir.isDefined() ? partitionDir(dir.get()) : "";
    if (opened == null) {
      opened = new java.util.HashMap<>();
    }
    int before = opened.merge(under, 1, Integer::sum) - 1;
    String number = String.format("%05d", partition) + (before == 0 ? "" : "-" + before);
    String name = template.replace("{n}", number);
    return under.isEmpty() ? path + "/" + name : path + "/" + under + "/" + name;
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

  @Override
  public TaskCommitMessage commitTask(TaskAttemptContext task) {
    return new TaskCommitMessage(null);
  }

  @Override
  public void abortTask(TaskAttemptContext task) {}
}
