package arroyo.files;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Which files a file table reads: a local directory walked with java.nio, an object store's
 * (a URI with a scheme other than {@code file:}: {@code s3a://}, {@code gs://},
 * {@code abfs://}) listed through Hadoop's file system for the scheme, with the session's
 * Hadoop settings (where an object store's endpoint and credentials are:
 * {@code arroyo.connectors.storage}).
 */
final class Listing {
  private Listing() {}

  /**
   * The files a file table reads, in the order it reads them: {@code path} if it is a file, or
   * the visible files at any depth of the directory it is (names starting with {@code .} or
   * {@code _} are hidden), those whose path relative to it {@code pattern} finds when there is
   * one (null or empty: all), in name order. The streaming source and the lookup tables both
   * list through here.
   */
  static List<String> list(String path, String pattern) {
    Pattern matches = pattern == null || pattern.isEmpty() ? null : Pattern.compile(pattern);
    if (remote(path)) {
      return listRemote(path, matches);
    }
    Path given = Paths.get(path);
    if (Files.isRegularFile(given)) {
      return List.of(given.toString());
    }
    if (!Files.isDirectory(given)) {
      return List.of();
    }
    Path root;
    try {
      root = given.toRealPath(); // a link to a directory: walked where it leads
    } catch (IOException err) {
      throw new UncheckedIOException("cannot list '" + path + "'", err);
    }
    try (Stream<Path> walk = Files.walk(root)) {
      return walk.filter(Files::isRegularFile)
          .filter(f -> visible(root.relativize(f).toString().replace('\\', '/'), matches))
          .map(Path::toString)
          .sorted()
          .toList();
    } catch (IOException err) {
      throw new UncheckedIOException("cannot list '" + path + "'", err);
    }
  }

  /** Whether {@code path} is an object store's (a URI with a scheme other than file:). */
  static boolean remote(String path) {
    int colon = path.indexOf("://");
    return colon > 0 && !path.regionMatches(true, 0, "file", 0, colon);
  }

  static org.apache.hadoop.conf.Configuration hadoopConf() {
    return org.apache.spark.sql.SparkSession.active().sessionState().newHadoopConf();
  }

  /** An object store's listing, through Hadoop's file system for the path's scheme. */
  private static List<String> listRemote(String path, Pattern matches) {
    org.apache.hadoop.fs.Path root = new org.apache.hadoop.fs.Path(path);
    org.apache.hadoop.conf.Configuration conf = hadoopConf();
    try {
      org.apache.hadoop.fs.FileSystem fs = root.getFileSystem(conf);
      org.apache.hadoop.fs.FileStatus status;
      try {
        status = fs.getFileStatus(root);
      } catch (java.io.FileNotFoundException missing) {
        return List.of();
      }
      if (status.isFile()) {
        return List.of(status.getPath().toString());
      }
      String base = status.getPath().toString().replaceAll("/+$", "") + "/";
      List<String> found = new ArrayList<>();
      var files = fs.listFiles(status.getPath(), true);
      while (files.hasNext()) {
        String file = files.next().getPath().toString();
        if (file.startsWith(base) && visible(file.substring(base.length()), matches)) {
          found.add(file);
        }
      }
      found.sort(null);
      return found;
    } catch (IOException err) {
      // The whole story in one message (the innermost is what a user is shown), the store's
      // own exception kept beside it for the logs.
      IOException named = new IOException("cannot list '" + path + "' (" + where(root, conf)
          + "): " + err.getMessage());
      named.addSuppressed(err);
      throw new UncheckedIOException(named);
    }
  }

  /** Which server an object store's path is on, for error messages: its bucket's endpoint. */
  static String where(org.apache.hadoop.fs.Path path, org.apache.hadoop.conf.Configuration conf) {
    String bucket = path.toUri().getHost();
    String endpoint = conf.get("fs.s3a.bucket." + bucket + ".endpoint",
        conf.get("fs.s3a.endpoint", ""));
    return "bucket '" + bucket + "' at " + (endpoint.isEmpty() ? "AWS" : endpoint);
  }

  /** Whether a file at {@code relative} (to the listed directory, '/' between parts) is read:
   * no part hidden, and {@code matches} (when there is one) finds in it. */
  private static boolean visible(String relative, Pattern matches) {
    for (String name : relative.split("/")) {
      if (name.startsWith(".") || name.startsWith("_")) {
        return false;
      }
    }
    return matches == null || matches.matcher(relative).find();
  }

}
