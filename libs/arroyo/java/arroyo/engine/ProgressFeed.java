package arroyo.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.streaming.StreamingQueryListener;

/**
 * Every committed micro-batch's progress, as Spark's JSON, in order, none skipped, for the
 * runner ({@code arroyo.engine.progress}) to take. A listener written in Python costs each
 * batch dozens of calls between the JVM and Python (PySpark reads the progress field by field)
 * on a machine whose cores the batch's tasks need; this one costs a string.
 */
public final class ProgressFeed extends StreamingQueryListener {
  private final LinkedBlockingQueue<String> events = new LinkedBlockingQueue<>();

  @Override
  public void onQueryStarted(QueryStartedEvent event) {}

  @Override
  public void onQueryProgress(QueryProgressEvent event) {
    events.add(event.progress().json());
  }

  @Override
  public void onQueryIdle(QueryIdleEvent event) {}

  @Override
  public void onQueryTerminated(QueryTerminatedEvent event) {}

  /** The progress that arrived, waiting up to {@code waitMillis} for the first. */
  public String[] take(long waitMillis) throws InterruptedException {
    String first = waitMillis > 0 ? events.poll(waitMillis, TimeUnit.MILLISECONDS) : events.poll();
    if (first == null) {
      return new String[0];
    }
    List<String> all = new ArrayList<>();
    all.add(first);
    events.drainTo(all);
    return all.toArray(new String[0]);
  }
}
