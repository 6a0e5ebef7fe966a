package arroyo.files;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The queries of a bounded pipeline that are done while others still run, by checkpoint
 * directory. A bounded source gives an end-of-input marker every batch once it has ended, which
 * is how a query's windows close and how a query resumed after its end still sees that end
 * ({@link BoundedFilesSource}). Once the runner has seen a query done (its sources ended, its
 * state flushed, its sink told: a stage's reader then ends too), those batches would only
 * repeat, half a second to a second of CPU each, until the pipeline's last query ends: a query
 * writing a stage ran two or three times as many batches as the query reading it. So the runner
 * calls {@link #finish}, and the query's file sources then have no new data: a query reading
 * files alone idles until the runner stops it with the others (one that reads another bounded
 * source too, a stage or a generator, still runs that source's markers). Stopping it at once
 * could cut short a batch inside its foreachBatch function, whose cancelled job fails the query.
 *
 * <p>A query starting again on the same checkpoint (a resumed run, in the same JVM) gets its
 * markers again: its sources forget the mark when Spark makes them, at the query's start.
 */
public final class FinishedQueries {
  private static final Set<String> DONE = ConcurrentHashMap.newKeySet();

  private FinishedQueries() {}

  /** The query whose checkpoint directory is {@code checkpoint} is done. */
  public static void finish(String checkpoint) {
    DONE.add(ColumnUse.checkpointKey(checkpoint));
  }

  /** The key of the query whose source's checkpoint directory is {@code location}
   * ({@code <checkpoint>/sources/<n>}), for {@link #finished}; null where it is not so. A source
   * takes it when Spark makes it, at the query's start, which is when the query is not done
   * (yet): a mark a run before it left is forgotten. */
  static String starting(String location) {
    String query = ColumnUse.queryCheckpoint(location);
    if (query == null) {
      return null;
    }
    String key = ColumnUse.checkpointKey(query);
    DONE.remove(key);
    return key;
  }

  /** Whether the query of {@code key} ({@link #starting}) is done. */
  static boolean finished(String key) {
    return key != null && DONE.contains(key);
  }
}
