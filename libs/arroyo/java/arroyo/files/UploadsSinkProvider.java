package arroyo.files;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.StreamSinkProvider;
import org.apache.spark.sql.streaming.OutputMode;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;

/**
 * The filesystem sink's streaming sink for S3 ({@code format("arroyo.files.UploadsSinkProvider")}):
 * see {@link UploadsSink}. Its options are set by {@code arroyo.connectors.filesystem.uploads}.
 */
public final class UploadsSinkProvider implements StreamSinkProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "arroyo_uploads";
  }

  @Override
  public Sink createSink(
      SQLContext context, Map<String, String> options, Seq<String> partitionBy, OutputMode mode) {
    java.util.Map<String, String> opts = new java.util.HashMap<>();
    scala.collection.Iterator<scala.Tuple2<String, String>> it = options.iterator();
    while (it.hasNext()) {
      scala.Tuple2<String, String> kv = it.next();
      opts.put(kv._1(), kv._2());
    }
    java.util.List<String> partitions = new java.util.ArrayList<>();
    scala.collection.Iterator<String> columns = partitionBy.iterator();
    while (columns.hasNext()) {
      partitions.add(columns.next());
    }
    return new UploadsSink(opts, partitions);
  }
}
