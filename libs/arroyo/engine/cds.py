"""A class-data-sharing archive of the classes a pipeline's JVM loads, made once at setup.

A fresh JVM loads, verifies and links some 15,000 classes from pyspark's 280 jars before its
first micro-batch commits, and that was the largest single part of a cold ``arroyo run``. The
JDK can instead map those classes, already parsed and verified, from an archive made by an
earlier run (AppCDS: ``-XX:ArchiveClassesAtExit`` to make it, ``-XX:SharedArchiveFile`` to use
it). ``scripts/setup`` runs ``python -m arroyo.engine.cds``, which starts a session with the
first option, plans and runs a small sample of the common paths (a windowed aggregate into a
sink, a bare SELECT), and lets the JVM write the archive as it exits. Every session this
package starts afterwards maps it (``arroyo.engine.session``).

In local mode the connector jars and ours are on the JVM's own class path (not Spark's
``spark.jars``), so the archive covers them too. It does not cover classes of signed jars
(janino, which generates code) nor classes generated at run time. The archive is named by
what the JVM checks it against (the java binary, the class path, our jar's build), so a change
of any makes setup build a new one rather than a mismatch; a JVM that cannot use an archive
(one made before our Java changed, say, until setup runs again) runs without it, silently.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

_SUFFIX = ".jsa"
_PARTIAL = ".partial"
# The sample takes half a minute on two cores; past this something is stuck.
_TRAINING_TIMEOUT_S = 600.0
# The JVM reports on stdout why it cannot map an archive (another JDK, a moved virtualenv):
# running without one is the designed fallback, not something a user should read.
_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path(extra_jars: list[Path] | None = None) -> Path | None:
    """Where this environment's archive is (whether it exists yet or not); None without java.
    ``extra_jars``: the class path's jars besides pyspark's (default: ``spark_jars()``, which
    a caller that already has them passes instead of reading them again)."""
    # The java that spark-submit runs: JAVA_HOME's, else the one on PATH.
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not os.path.exists(java):
        return None
    import pyspark

    from arroyo.engine.jars import spark_jars

    extra_jars = spark_jars() if extra_jars is None else extra_jars
    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256()
    for part in (os.path.realpath(java), pyspark.__version__, str(jars)):
        digest.update(part.encode() + b"\0")
    # The JVM checks each jar of the class path by path, size and modification time.
    for jar in [*sorted(jars.glob("*.jar")), *extra_jars]:
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return Path(sys.prefix) / "share" / "arroyo" / "cds" / f"spark-{digest.hexdigest()[:16]}.jsa"


def use_options(extra_jars: list[Path]) -> str:
    """JVM options that map the archive, or nothing while there is none (not made yet)."""
    archive = archive_path(extra_jars)
    if archive is None or not archive.exists():
        return ""
    return f"-XX:SharedArchiveFile={archive} {_QUIET}"


def dump_options(target: Path) -> str:
    """JVM options that write the classes this JVM loaded to ``target`` as it exits."""
    return f"-XX:ArchiveClassesAtExit={target} {_QUIET}"


def build(*, force: bool = False) -> Path | None:
    """Make the archive unless it exists (``force``: again). Returns its path, or None where
    it could not be made (no ``java``, or the sample failed: the reason is printed on standard
    error). Best effort, like any cache: Arroyo runs without an archive, only slower.

    Runs the sample in a child process, whose JVM writes the archive as it exits; the archive
    appears under its final name only once complete, so two builds at once (two setups) each
    write their own and the last rename wins."""
    archive = archive_path()
    if archive is None:
        return None
    if archive.exists() and not force:
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}{_PARTIAL}")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "arroyo.engine.cds", "--train", str(partial)],
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            timeout=_TRAINING_TIMEOUT_S,
        )
        if done.returncode != 0 or not partial.exists():
            print(f"cds: no class archive made (exit {done.returncode})", file=sys.stderr)
            return None
        os.replace(partial, archive)
    except subprocess.TimeoutExpired:
        print(f"cds: no class archive made in {_TRAINING_TIMEOUT_S:.0f}s", file=sys.stderr)
        return None
    finally:
        partial.unlink(missing_ok=True)
    for old in [*archive.parent.glob(f"*{_SUFFIX}"), *archive.parent.glob(f"*{_PARTIAL}")]:
        if old != archive:
            old.unlink(missing_ok=True)
    return archive


def _train(target: Path) -> None:
    """Start a session that dumps its classes to ``target`` at exit, run the sample, and wait
    for the JVM to exit (the dump is written then)."""
    from arroyo.connectors.stdout.sink import route_stdout
    from arroyo.engine.session import SessionSettings, get_or_create_session
    from arroyo.engine.warmup import TRAINING_QUERIES, run_sample

    spark = get_or_create_session(SessionSettings(class_archive=target))
    route_stdout(lambda sink, rows: None)
    for sql in TRAINING_QUERIES:
        if not run_sample(spark, sql):
            raise SystemExit("the sample pipeline failed: no class archive made")
    gateway = spark.sparkContext._gateway
    spark.stop()
    assert gateway is not None
    process = gateway.proc
    # The JVM exits when its standard input closes (pyspark's gateway), and dumps then.
    gateway.shutdown()
    process.stdin.close()
    try:
        process.wait(timeout=_TRAINING_TIMEOUT_S / 2)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit("the JVM did not exit: no class archive made") from None


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--train":
        _train(Path(sys.argv[2]))
    else:
        path = build(force="--force" in sys.argv)
        print(path if path is not None else "no class archive: Arroyo runs without one")
