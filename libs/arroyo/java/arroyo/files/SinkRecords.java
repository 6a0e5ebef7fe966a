package arroyo.files;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * A filesystem sink's records in its state directory, the same files the Python sink keeps
 * ({@code arroyo.connectors.filesystem.sink}): {@code committed_batch} (the last batch placed)
 * and {@code placing.json} (the files the batch in flight is placing: {@code {"batch": N,
 * "files": [paths relative to the sink's directory], "rel": 1}}).
 *
 * <p>They are written in the local state directory ({@code state}) and, when the pipeline's
 * state is kept in an object store, to its copy there too ({@code state.remote}, the same
 * directory's URI) before the write returns, as {@code remote_state.durable} does.
 */
final class SinkRecords {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final java.nio.file.Path local;
  private final String remote;
  private Long committed; // read from the state once, then kept here

  SinkRecords(String local, String remote) {
    this.local = java.nio.file.Path.of(local);
    this.remote = remote;
  }

  long committed() throws IOException {
    if (committed == null) {
      try {
        committed = Long.parseLong(Files.readString(local.resolve("committed_batch")).strip());
      } catch (NoSuchFileException none) {
        committed = -1L;
      }
    }
    return committed;
  }

  void commit(long batchId) throws IOException {
    write("committed_batch", Long.toString(batchId));
    committed = batchId;
  }

  /** The files the batch is about to place, recorded first: a replay removes them. */
  void placing(long batchId, List<String> files) throws IOException {
    write("placing.json", JSON.writeValueAsString(Map.of("batch", batchId, "files", files, "rel", 1)));
  }

  /**
   * Removes the files an attempt of {@code batchId} cut short placed under {@code dir}: they go
   * before the replay's come (the replay may split its rows into fewer files). A state from
   * before the sink recorded them named them starting {@code stale}, directly in {@code dir}.
   */
  void removePlaced(long batchId, String dir, String stale) throws IOException {
    Path root = new Path(dir);
    FileSystem fs = root.getFileSystem(Listing.hadoopConf());
    JsonNode placing;
    try {
      placing = JSON.readTree(Files.readString(local.resolve("placing.json")));
    } catch (NoSuchFileException none) {
      if (!fs.exists(root)) {
        return;
      }
      RemoteIterator<LocatedFileStatus> files = fs.listFiles(root, false);
      while (files.hasNext()) {
        Path file = files.next().getPath();
        if (file.getName().startsWith(stale)) {
          fs.delete(file, false);
        }
      }
      return;
    }
    if (placing.path("batch").asLong(-1) != batchId) {
      return;
    }
    for (JsonNode name : placing.path("files")) {
      // Records from before "rel" listed local files only: this sink writes to S3.
      fs.delete(new Path(dir + "/" + name.asText()), false);
    }
  }

  private void write(String name, String text) throws IOException {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    Files.createDirectories(local);
    java.nio.file.Path tmp = local.resolve("." + name + ".tmp");
    Files.write(tmp, bytes);
    Files.move(tmp, local.resolve(name), StandardCopyOption.ATOMIC_MOVE);
    if (remote != null) {
      Path stored = new Path(remote + "/" + name);
      FileSystem fs = stored.getFileSystem(Listing.hadoopConf());
      try (OutputStream out = fs.create(stored, true)) {
        out.write(bytes);
      }
    }
  }
}
