package arroyo.state;

import java.io.BufferedOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint files (offset and commit logs, state store changelogs and snapshots) on a
 * local disk through java.nio; any other file system goes to Spark's own manager, as Spark
 * would choose it.
 *
 * <p>Why: without Hadoop's native library (pyspark ships none), Hadoop's local file system forks
 * a process for file operations Spark's manager asks of it: {@code chmod} for each file it
 * creates, {@code readlink} for each rename. Measured on Nexmark q1 at 100 K events/s on 2
 * cores: about 90 forks per second, and writing the offset log and the commit log took 33 ms
 * each of a 102 ms micro-batch (the same on tmpfs: the time is the forks, not the disk).
 *
 * <p>Same guarantees as Spark's manager: a file is written under a temporary name in its
 * directory and renamed into place when closed, so readers see it whole or not at all; a file
 * that must not be overwritten (a batch's offsets) is linked into place, which fails if another
 * writer got there first ({@link FileAlreadyExistsException}, as Spark expects).
 */
public class LocalCheckpointFileManager
    implements CheckpointFileManager, CheckpointFileManager.RenameHelperMethods {
  private final CheckpointFileManager other; // a non-local path: Spark's manager does it all
  private final RawLocalFileSystem raw;
  private final Path root;

  public LocalCheckpointFileManager(Path path, Configuration conf) throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    if (fs instanceof LocalFileSystem || fs instanceof RawLocalFileSystem) {
      raw = new RawLocalFileSystem();
      raw.initialize(URI.create("file:///"), conf);
      root = raw.makeQualified(path);
      other = null;
    } else {
      raw = null;
      root = path;
      other = sparkManager(path, conf);
    }
  }

  /** Spark's own choice (CheckpointFileManager.create without a configured class). */
  private static CheckpointFileManager sparkManager(Path path, Configuration conf) {
    try {
      return new FileContextBasedCheckpointFileManager(path, conf);
    } catch (Exception e) {
      if (!(e instanceof UnsupportedFileSystemException)) {
        throw sneaky(e);
      }
      return new FileSystemBasedCheckpointFileManager(path, conf);
    }
  }

  /** Rethrows a checked exception undeclared, as Scala does: Spark catches Hadoop's
   * FileAlreadyExistsException and FileNotFoundException from these methods. */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }

  private java.nio.file.Path local(Path path) {
    return java.nio.file.Paths.get(raw.makeQualified(path).toUri().getPath());
  }

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    if (other != null) {
      return other.createAtomic(path, overwriteIfPossible);
    }
    return new RenameBasedFSDataOutputStream(this, path, overwriteIfPossible);
  }

  @Override
  public FSDataOutputStream createTempFile(Path path) {
    try {
      java.nio.file.Path file = local(path);
      Files.createDirectories(file.getParent());
      OutputStream out =
          Files.newOutputStream(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
      return new FSDataOutputStream(new BufferedOutputStream(out, 64 * 1024), null);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public void renameTempFile(Path src, Path dst, boolean overwriteIfPossible) {
    java.nio.file.Path from = local(src);
    java.nio.file.Path to = local(dst);
    try {
      if (overwriteIfPossible) {
        Files.move(from, to, StandardCopyOption.ATOMIC_MOVE);
        Files.deleteIfExists(checksumOf(to)); // a stale one would fail Hadoop's reads of it
        return;
      }
      try {
        Files.createLink(to, from); // atomic, and fails if the target exists
      } catch (java.nio.file.FileAlreadyExistsException e) {
        throw new FileAlreadyExistsException(dst + " already exists");
      } finally {
        Files.deleteIfExists(from);
      }
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  /**
   * Hadoop's checksum file beside {@code file}: Spark's own manager writes one per file (through
   * Hadoop's checksummed local file system), and Hadoop's reads check it when it is there (the
   * RocksDB store reads snapshot zips so). This manager writes none, so a checkpoint begun under
   * Spark's manager must lose a file's checksum when the file is replaced or deleted.
   */
  private static java.nio.file.Path checksumOf(java.nio.file.Path file) {
    return file.resolveSibling("." + file.getFileName() + ".crc");
  }

  private static boolean isChecksum(String name) {
    return name.startsWith(".") && name.endsWith(".crc");
  }

  @Override
  public FSDataInputStream open(Path path) {
    if (other != null) {
      return other.open(path);
    }
    try {
      return raw.open(path);
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    if (other != null) {
      return other.list(path, filter);
    }
    java.nio.file.Path dir = local(path);
    Path parent = raw.makeQualified(path);
    List<FileStatus> found = new ArrayList<>();
    DirectoryStream<java.nio.file.Path> children;
    try {
      children = Files.newDirectoryStream(dir);
    } catch (java.nio.file.NoSuchFileException e) {
      throw sneaky(new FileNotFoundException(path + " does not exist"));
    } catch (IOException e) {
      throw sneaky(e);
    }
    try (children) {
      for (java.nio.file.Path child : children) {
        String childName = child.getFileName().toString();
        if (isChecksum(childName)) {
          continue; // Hadoop's side files, which Spark's manager never lists either
        }
        // As Hadoop names children: a name with a colon is not read as a URI scheme.
        Path name = new Path(parent, new Path(null, null, childName));
        if (!filter.accept(name)) {
          continue;
        }
        BasicFileAttributes a;
        try {
          a = Files.readAttributes(child, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (java.nio.file.NoSuchFileException gone) {
          continue; // deleted while listing (RocksDB's maintenance deletes old files so)
        }
        found.add(
            new FileStatus(
                a.size(), a.isDirectory(), 1, 0, a.lastModifiedTime().toMillis(), name));
      }
    } catch (IOException e) {
      throw sneaky(e);
    }
    return found.toArray(new FileStatus[0]);
  }

  @Override
  public void mkdirs(Path path) {
    if (other != null) {
      other.mkdirs(path);
      return;
    }
    try {
      Files.createDirectories(local(path));
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean exists(Path path) {
    return other != null ? other.exists(path) : Files.exists(local(path));
  }

  @Override
  public void delete(Path path) {
    if (other != null) {
      other.delete(path);
      return;
    }
    java.nio.file.Path target = local(path);
    if (!Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
      return; // as Spark's manager: deleting what is not there is not an error
    }
    try (Stream<java.nio.file.Path> walk = Files.walk(target)) {
      for (java.nio.file.Path p : (Iterable<java.nio.file.Path>)
          walk.sorted(Comparator.reverseOrder())::iterator) {
        Files.deleteIfExists(p);
      }
      Files.deleteIfExists(checksumOf(target));
    } catch (java.nio.file.NoSuchFileException | java.io.UncheckedIOException e) {
      return; // deleted meanwhile by someone else: gone is what was asked
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @Override
  public boolean isLocal() {
    return other == null || other.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    if (other != null) {
      return other.createCheckpointDirectory();
    }
    mkdirs(root);
    return root;
  }
}
