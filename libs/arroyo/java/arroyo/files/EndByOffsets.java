package arroyo.files;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.CollectMetrics;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.classic.Dataset;

import scala.jdk.javaapi.CollectionConverters;

/**
 * A stateless query over file sources alone, without its event-time machinery.
 *
 * <p>Every bounded source is built with a watermark operator and, above it, an observer of its
 * end-of-input marker ({@code eoi:<table>}): that is how a stateful query's windows close at the
 * end of the input and how the engine learns that the input has ended. Neither operator runs as
 * generated code, so each makes Spark turn the source's columns into whole rows, every column
 * copied, before the query's own filter and projection run. A query that keeps no state needs
 * neither: no window waits on its watermark, and a file source's offsets say when it has read its
 * last batch ({@code "eoi"} above 0: {@link BoundedFilesSource}). Without them, the scan, the
 * query's filter and its projection fuse into one generated loop that copies only the columns
 * and rows that leave it.
 *
 * <p>The engine asks for this only for a query it has found stateless
 * ({@code arroyo.engine.plans.without_event_time}); this class checks that every stream the query
 * reads is a file source.
 */
public final class EndByOffsets {
  private EndByOffsets() {}

  /** {@code query} without its watermark operators and end-of-input observers, or null when one
   * of the streams it reads is not a file source (whose end its offsets would not show). */
  public static Dataset<Row> stateless(Dataset<Row> query) {
    LogicalPlan plan = query.queryExecution().analyzed();
    for (LogicalPlan leaf : CollectionConverters.asJava(plan.collectLeaves())) {
      if (leaf.isStreaming()
          && !(leaf instanceof StreamingRelationV2 relation
              && relation.table() instanceof BoundedFilesSource.FilesTable)) {
        return null;
      }
    }
    return Dataset.ofRows(query.sparkSession(), strip(plan));
  }

  private static LogicalPlan strip(LogicalPlan node) {
    if (node instanceof EventTimeWatermark watermark) {
      return strip(watermark.child());
    }
    if (node instanceof CollectMetrics observer && observer.name().startsWith("eoi:")) {
      return strip(observer.child());
    }
    List<LogicalPlan> children = CollectionConverters.asJava(node.children());
    List<LogicalPlan> stripped = new ArrayList<>(children.size());
    boolean changed = false;
    for (LogicalPlan child : children) {
      LogicalPlan next = strip(child);
      changed |= next != child;
      stripped.add(next);
    }
    return changed ? node.withNewChildren(CollectionConverters.asScala(stripped).toSeq()) : node;
  }
}
