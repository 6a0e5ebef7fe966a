package arroyo.files;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.WriteJobStatsTracker;
import org.apache.spark.sql.execution.datasources.WriteTaskStats;
import org.apache.spark.sql.execution.datasources.WriteTaskStatsTracker;
import scala.collection.immutable.Seq;

/**
 * The files a Spark write opened without writing a row to them: Spark's first task writes one
 * even when it has no rows (for the format's schema), and the batch of a sink that writes no
 * file without rows drops it. Counted per file as the rows are written (a comparison per row),
 * by the task attempts Spark committed only.
 */
final class EmptyFiles implements WriteJobStatsTracker {
  private static final long serialVersionUID = 1L;

  private final transient List<String> found = new ArrayList<>();

  /** The paths (as the write named them) of the files without rows, once the write is done. */
  List<String> found() {
    return found;
  }

  @Override
  public WriteTaskStatsTracker newTaskInstance() {
    return new Task();
  }

  @Override
  public void processStats(Seq<WriteTaskStats> stats, long jobCommitTime) {
    scala.collection.Iterator<WriteTaskStats> it = stats.iterator();
    while (it.hasNext()) {
      found.addAll(((Empty) it.next()).files);
    }
  }

  private record Empty(List<String> files) implements WriteTaskStats {}

  private static final class Task implements WriteTaskStatsTracker {
    private final Set<String> empty = new LinkedHashSet<>();
    private String written; // the file the last row went to

    @Override
    public void newPartition(InternalRow values) {}

    @Override
    public void newFile(String path) {
      empty.add(path);
    }

    @Override
    public void closeFile(String path) {}

    @Override
    public void newRow(String path, InternalRow row) {
      if (path != written) { // the same String while a file is open: no hashing per row
        empty.remove(path);
        written = path;
      }
    }

    @Override
    public WriteTaskStats getFinalStats(long taskCommitTime) {
      return new Empty(new ArrayList<>(empty));
    }
  }
}
