"""JVM jars that the pyspark wheel does not carry: Spark's Kafka and Avro connectors, Hadoop's S3A
file system (``hadoop-aws``, with the AWS SDK it is built on), and our own Java
(``libs/arroyo/java``: the Nexmark generator, a Spark data source).

They are resolved from Maven Central once, at setup (``scripts/setup`` runs ``python -m
arroyo.engine.jars``), with the Ivy that ships inside pyspark, into ``jar_dir()``; every
SparkSession then loads them from there, so a run needs no network.

Versions (README, "Versions"): Spark 4.1 is the newest line that Kafka, Avro, Delta and Iceberg
all have builds for. The Kafka connector is the build of pyspark's own version, 4.1.3, whose
progress report no longer fails on the first batch after a restart (SPARK-55271, in 4.1.1); its
token provider and the Avro connector have no build past 4.1.1 on Maven Central, and within a
patch line the data source APIs they use do not change. hadoop-aws is pyspark's Hadoop version.

Our Java is compiled with the JDK's ``javac`` against pyspark's jars and the resolved ones
(hadoop-aws: the S3A commit operations), at setup or at the first
session after its sources change, into a jar named by the sources' hash (so a stale build is
never loaded). A local session puts these jars on its JVM's class path (its executors run
inside it); a session on a Spark master ships them to its executors (``spark.jars``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path


def hadoop_version() -> str:
    """The Hadoop that pyspark is built with (its ``hadoop-client-api`` jar): hadoop-aws must be
    the very same version."""
    for jar in _pyspark_jars().glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise JarResolutionError("pyspark's hadoop-client-api jar is missing: reinstall pyspark")


_TOKEN_PROVIDER = "org.apache.spark:spark-token-provider-kafka-0-10_2.13"


def spark_packages() -> tuple[str, ...]:
    """Maven coordinates, each ``group:artifact:version`` followed by any dependencies to leave
    out (`` !group:artifact``)."""
    return (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3 !{_TOKEN_PROVIDER}",
        f"{_TOKEN_PROVIDER}:4.1.1",
        "org.apache.spark:spark-avro_2.13:4.1.1",
        f"org.apache.hadoop:hadoop-aws:{hadoop_version()}",
        # Delta Lake without its Unity Catalog client (Arroyo writes Delta tables by path).
        "io.delta:delta-spark_4.1_2.13:4.4.0 !io.unitycatalog:unitycatalog-client"
        " !io.unitycatalog:unitycatalog-hadoop",
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
        # The JDBC driver of an iceberg table's catalog on PostgreSQL.
        "org.postgresql:postgresql:42.7.14",
    )


_MANIFEST = "packages.txt"
# Part of the key of a resolution's listing (fetch_spark_jars): changed with what a listing
# holds or how its jars are chosen, so that no checkout reads another's older listing.
_RESOLVED_FORMAT = "1"
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


class JarResolutionError(RuntimeError):
    pass


def jar_dir() -> Path:
    """Where this environment keeps its connector jars (inside the virtualenv)."""
    return Path(sys.prefix) / "share" / "arroyo" / "jars"


def ivy_cache() -> Path:
    """Downloads are kept across virtualenvs, so a fresh checkout does not fetch them again."""
    return Path.home() / ".cache" / "arroyo" / "ivy"


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _artifact(jar: Path) -> str:
    match = _VERSIONED.match(jar.name)
    return match.group("artifact") if match else jar.stem


def retrieve(
    coordinate: str,
    dest: Path,
    *,
    cache: Path | None = None,
    attempts: int = 3,
    module_file: bool = False,
    symlink: bool = False,
) -> list[Path]:
    """Resolve ``group:artifact:version`` and its dependencies from Maven Central into
    ``dest`` with pyspark's Ivy; returns the jars retrieved.

    The cache is shared by every checkout on the machine, so resolutions hold a lock on it (two
    at once, say a setup beside a CI run, fail each other's downloads). With ``module_file``,
    ``coordinate`` is the path of an Ivy module file to resolve instead (classifiers and all).
    With ``symlink``, ``dest`` gets links into the cache rather than copies (for a caller that
    links or copies them on, and must not keep links a cleaned cache would leave dangling).
    A failed download is
    tried again, ``attempts`` times in all, before it is reported: one dropped connection
    should not fail a setup."""
    cache = cache or ivy_cache()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for attempt in range(1, attempts):
            try:
                return _retrieve_once(coordinate, dest, cache, module_file, symlink)
            except JarResolutionError:
                time.sleep(2.0 * attempt)
        return _retrieve_once(coordinate, dest, cache, module_file, symlink)


def _ivy_module(coordinate: str) -> str:
    """An Ivy module file that depends on ``coordinate`` (``group:artifact:version``, then any
    `` !group:artifact`` exclusions)."""
    wanted, *excluded = coordinate.split()
    group, artifact, version = wanted.split(":")
    excludes = "".join(
        '<exclude org="{}" module="{}"/>'.format(*e.removeprefix("!").split(":")) for e in excluded
    )
    return (
        '<ivy-module version="2.0"><info organisation="arroyo" module="jars"/><dependencies>'
        f'<dependency org="{group}" name="{artifact}" rev="{version}" conf="default->default">'
        f"{excludes}</dependency></dependencies></ivy-module>"
    )


def _retrieve_once(
    coordinate: str, dest: Path, cache: Path, module_file: bool, symlink: bool
) -> list[Path]:
    ivy = next(_pyspark_jars().glob("ivy-*.jar"), None)
    if ivy is None:
        raise JarResolutionError("pyspark's Ivy jar is missing: reinstall pyspark")
    dest.mkdir(parents=True, exist_ok=True)
    module = Path(coordinate) if module_file else dest.parent / f".{dest.name}.ivy.xml"
    if not module_file:
        module.write_text(_ivy_module(coordinate))
    command = [
        "java",
        "-jar",
        str(ivy),
        "-ivy",
        str(module),
        "-confs",
        "default",
        "-cache",
        str(cache),
        "-retrieve",
        f"{dest}/[artifact]-[revision](-[classifier]).[ext]",
        # Links into the cache, not copies: hadoop-aws's AWS SDK bundle alone is 640 MB.
        *(["-symlink"] if symlink else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise JarResolutionError(f"could not resolve {coordinate}:\n{tail}")
    return sorted(dest.glob("*.jar"))


def fetch_spark_jars(packages: tuple[str, ...] | None = None) -> list[Path]:
    """Resolve ``packages`` into ``jar_dir()`` unless already there; keep only the jars that
    pyspark does not already have (two versions of a class on one classpath is a bug)."""
    packages = packages or spark_packages()
    target = jar_dir()
    manifest = target / _MANIFEST
    wanted = "\n".join(packages)
    if manifest.exists() and manifest.read_text() == wanted:
        return spark_jars()
    have = {_artifact(j) for j in _pyspark_jars().glob("*.jar")}
    # The jars a resolution chose, as paths in Ivy's cache, kept beside it: the same packages
    # on the same pyspark resolve to the same jars, and a new virtualenv (a fresh checkout,
    # scripts/image-check) links them without starting Ivy's JVM once per package again.
    key = f"{_RESOLVED_FORMAT}\0{wanted}\0{sorted(have)}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    resolved = ivy_cache() / "resolved" / f"{digest}.txt"
    jars = _previously_resolved(resolved)
    with tempfile.TemporaryDirectory() as tmp:
        if jars is None:
            jars = {}
            for coordinate in packages:
                name = coordinate.split()[0].replace(":", "_")
                for jar in retrieve(coordinate, Path(tmp) / name, symlink=True):
                    if _artifact(jar) not in have:
                        jars[jar.name] = jar.resolve()
            # Only links into the cache are worth listing (Ivy copies where it cannot link).
            if all(ivy_cache().resolve() in jar.parents for jar in jars.values()):
                resolved.parent.mkdir(parents=True, exist_ok=True)
                staged = resolved.with_name(f"{resolved.name}.{os.getpid()}")
                staged.write_text("".join(f"{name}\t{jar}\n" for name, jar in jars.items()))
                os.replace(staged, resolved)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name, jar in jars.items():
            _link_or_copy(jar, target / name)
    manifest.write_text(wanted)
    return spark_jars()


def _previously_resolved(listing: Path) -> dict[str, Path] | None:
    """The jars of an earlier resolution, by name, if its listing and all its jars are still
    there (Ivy's cache may have been cleaned since); None otherwise."""
    try:
        lines = [line.split("\t") for line in listing.read_text().splitlines() if line]
    except OSError:
        return None
    jars = {name: Path(path) for name, path in (line for line in lines if len(line) == 2)}
    if not jars or len(jars) != len(lines) or not all(j.is_file() for j in jars.values()):
        return None
    return jars


def _link_or_copy(source: Path, dest: Path) -> None:
    """A hard link to the cache's file where both are on one file system (the cache never
    rewrites a jar it has), else a copy: the virtualenv keeps working if the cache is removed."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def spark_jars() -> list[Path]:
    """The jars every session loads: the connectors this environment has (none before setup
    fetched them) and our own, compiled now if its sources changed."""
    return [*sorted(jar_dir().glob("*.jar")), arroyo_jar()]


def java_sources() -> list[Path]:
    return sorted((Path(__file__).parent.parent / "java").rglob("*.java"))


def arroyo_jar() -> Path:
    """Our Java classes as a jar, compiled once per version of their sources."""
    sources = java_sources()
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    jar = Path(sys.prefix) / "share" / "arroyo" / "java" / f"arroyo-{digest.hexdigest()[:16]}.jar"
    if jar.exists():
        return jar
    javac = shutil.which("javac") or _javac_beside_java()
    if javac is None:
        raise JarResolutionError(
            "javac (a JDK) is needed to build Arroyo's Java classes: run scripts/setup, which "
            "installs one, or install a JDK 17 or later"
        )
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        command = [
            javac, "-nowarn", "-Xlint:none", "--release", "17", "-encoding", "UTF-8",
            "-d", str(classes), "-cp", f"{_pyspark_jars() / '*'}{os.pathsep}{jar_dir() / '*'}",
            *map(str, sources),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JarResolutionError(f"javac failed:\n{done.stdout}{done.stderr}")
        staged = Path(tmp) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for cls in sorted(classes.rglob("*.class")):
                zf.write(cls, cls.relative_to(classes).as_posix())
        # Atomic: processes starting together each build, and the last rename wins.
        os.replace(staged, jar)
    for old in jar.parent.glob("arroyo-*.jar"):
        if old != jar:
            old.unlink(missing_ok=True)
    return jar


def _javac_beside_java() -> str | None:
    java = shutil.which("java")
    if java is None:
        return None
    candidate = Path(os.path.realpath(java)).parent / "javac"
    return str(candidate) if candidate.exists() else None


if __name__ == "__main__":
    for jar in [*fetch_spark_jars(), arroyo_jar()]:
        print(jar)
