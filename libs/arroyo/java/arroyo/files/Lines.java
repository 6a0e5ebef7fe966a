package arroyo.files;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

import org.apache.spark.unsafe.types.UTF8String;

/** Lines read from a stream, each with the position after it (bytes of the text). */
final class Lines {
  private final InputStream in;
  private final byte[] buffer = new byte[1 << 16];
  private int at;
  private int filled;
  private long pos;
  private byte[] line = new byte[256];
  private int length;

  /** The lines of {@code in}, which is at byte {@code at} of the text, from byte {@code pos}
   * (the bytes between read and dropped here). Closes {@code in} if that fails. */
  Lines(InputStream in, long at, long pos) throws IOException {
    this.in = in;
    this.pos = at;
    try {
      while (this.pos < pos && fill()) {
        int n = (int) Math.min(filled - this.at, pos - this.pos);
        this.at += n;
        this.pos += n;
      }
    } catch (IOException | RuntimeException err) {
      in.close();
      throw err;
    }
  }

  void close() throws IOException {
    in.close();
  }

  private boolean fill() throws IOException {
    if (at < filled) {
      return true;
    }
    int n = in.read(buffer);
    while (n == 0) {
      n = in.read(buffer);
    }
    at = 0;
    filled = Math.max(n, 0);
    return n > 0;
  }

  /** The next line (without its newline) into {@link #line}; false at the end. */
  boolean next() throws IOException {
    length = 0;
    boolean any = false;
    while (fill()) {
      any = true;
      int start = at;
      int newline = -1;
      for (int k = at; k < filled; k++) {
        if (buffer[k] == '\n') {
          newline = k;
          break;
        }
      }
      int stop = newline < 0 ? filled : newline;
      append(start, stop - start);
      at = newline < 0 ? filled : newline + 1;
      pos += at - start;
      if (newline >= 0) {
        return true;
      }
    }
    return any;
  }

  private void append(int from, int n) {
    if (length + n > line.length) {
      line = java.util.Arrays.copyOf(line, Math.max(line.length * 2, length + n));
    }
    System.arraycopy(buffer, from, line, length, n);
    length += n;
  }

  long position() {
    return pos;
  }

  boolean blank() {
    for (int i = 0; i < length; i++) {
      byte b = line[i];
      if (b != ' ' && b != '\t' && b != '\r' && b != 0x0b && b != 0x0c) {
        return false;
      }
    }
    return true;
  }

  UTF8String text() {
    int end = length;
    while (end > 0 && line[end - 1] == '\r') {
      end--;
    }
    // Decoded and encoded again: malformed bytes become U+FFFD, as Python's "replace".
    return UTF8String.fromString(new String(line, 0, end, StandardCharsets.UTF_8));
  }

  boolean atEnd() throws IOException {
    return !fill();
  }
}
