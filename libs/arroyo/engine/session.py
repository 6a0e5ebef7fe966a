"""The SparkSession every pipeline runs in.

One session per process: the CLI, a worker, or the test suite. Settings that change query
semantics (UTC session time, no-data batches so the watermark alone can close windows) are fixed
here, not left to callers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# Spark's RocksDB store, plus ``updating_ttl`` for updating aggregates (libs/arroyo/java).
STATE_STORE_PROVIDER = "arroyo.state.IdleExpiringStateStoreProvider"
PROVIDER_CLASS = "spark.sql.streaming.stateStore.providerClass"
# Checkpoint files on local disks without Hadoop's forks (see LocalCheckpointFileManager.java).
CHECKPOINT_FILE_MANAGER = "arroyo.state.LocalCheckpointFileManager"
# Set per query: the TTL in ms of the updating aggregate whose state directory follows.
UPDATING_TTL_PREFIX = "spark.sql.streaming.stateStore.arroyo.updatingTtlMs."
_TRACK_ROWS = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
# The quick JIT (C1) alone. Its code cache then has the non-tiered default size, 48 MiB, not
# the tiered JIT's 240, and Spark's code compiled by C1 fills that within minutes (a test
# session's driver: 44 of 48 MiB used after 14 minutes); JDK 17 then sweeps the cache over and
# over to make room, and its sweeper was 17% of a long-lived driver's CPU (async-profiler,
# golden cases on one session). With the tiered JIT's size the sweeper all but never runs (JDK
# 20 and later have no sweeper; the size does no harm there). The cache is reserved address
# space, committed as it fills. Of the product's JVMs on this JIT, the compiler service lives
# long.
QUICK_JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# The quick JIT alone and the smallest collector: a cold JVM starts 1-2 s sooner (the launcher
# JVM, which only prints the driver's command line, always; others per SessionSettings.fast_start).
_FAST_JVM_OPTIONS = f"{QUICK_JIT_OPTIONS} -XX:+UseSerialGC"
# One log4j2 context for the whole JVM. By default log4j2 picks a context per class loader, so
# each logger lookup walks the caller's stack to find its class; Spark looks a logger up each
# time its rule executor runs (a new PlanChangeLogger per run), and code generation inside tasks
# runs it once per expression: a streaming aggregate of collect_set/approx_count_distinct spent
# a fifth of its tasks' time in those stack walks (golden case updating_global: tasks 10% less
# CPU without them). Spark and Arroyo's jars share one class loader here anyway.
_ONE_LOGGER_CONTEXT = (
    "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector"
)


# How long a micro-batch query waits, when its last look found no new input, before it asks its
# sources again (Spark's internal ``spark.sql.streaming.pollingDelay``: 10 ms). Each look asks
# every source for its latest offset (a Kafka source: a request to the broker), so an idle
# pipeline at 10 ms kept a fifth of a core busy, and its broker a seventh (a Kafka -> file
# pipeline with no input: 6.7 CPU-s in 30 s, the broker 4.1; at 100 ms, 1.8 and 1.5). Input
# that reaches an idle query waits up to about 90 ms longer: after a pause, and at each stage
# of a pipeline of several queries (the query reading a stage idles while the one writing it
# runs its batch). A query whose batches find input each time looks again at once; a trigger
# interval under 100 ms becomes 100 ms while idle; real-time mode (``arroyo run --real-time``)
# does not poll.
IDLE_POLL_MS = 100


@dataclass(frozen=True, slots=True)
class SessionSettings:
    master: str | None = None
    parallelism: int = 1
    shuffle_partitions: int | None = None
    app_name: str = "arroyo"
    # The quick JIT alone (C1; no C2 compiling beside the work on two cores) starts ~1 s
    # faster and runs a small input's first batches ~1.5 s faster, but heavy queries ~3.5x
    # slower: for short-lived processes (validate, planning, `arroyo run` of a small bounded
    # input: see ``arroyo.engine.input_size``) only.
    fast_start: bool = False
    # Heap of the JVM this process starts (local mode runs its executors inside it).
    driver_memory: str = "4g"
    # More options for that JVM, after Arroyo's own (a later -XX flag wins): the worker's
    # ``worker.jvm_options``; the tests' session takes the serial collector.
    java_options: str = ""
    # Set only by ``arroyo.engine.cds``: the JVM writes its class archive here as it exits,
    # rather than mapping the existing one.
    class_archive: Path | None = None


def state_rows_counted(spark: SparkSession) -> bool:
    """Whether streaming progress counts the rows in keyed state (``numRowsTotal``)."""
    provider = spark.conf.get(PROVIDER_CLASS) or ""
    rocksdb = provider in (ROCKSDB_PROVIDER, STATE_STORE_PROVIDER)
    return not rocksdb or spark.conf.get(_TRACK_ROWS) != "false"


_DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# The tasks Delta Lake reads its log with to build a table's snapshot (at every commit of the
# delta sink): 50 by default, sized for tables of millions of files. A micro-batch sink's
# commits each built a snapshot in 50 tasks, 3 s a commit on two cores; set to the session's
# parallelism (0.6-0.9 s).
DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def get_or_create_session(settings: SessionSettings = SessionSettings()) -> SparkSession:
    """Return the process's SparkSession, creating it on first use."""
    # Python workers must run the interpreter that has pyarrow and this package installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    cores = max(1, settings.parallelism)
    master = settings.master or f"local[{max(cores, 2)}]"
    builder = (
        SparkSession.builder.master(master)
        .appName(settings.app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions or cores))
        .config(DELTA_SNAPSHOT_PARTITIONS, str(settings.shuffle_partitions or cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        .config("spark.sql.streaming.pollingDelay", f"{IDLE_POLL_MS}ms")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.memory", settings.driver_memory)
        # Keyed state (windows, joins) lives in RocksDB, off the JVM heap, and checkpoints as a
        # changelog per batch rather than a full snapshot: large state neither exhausts the heap
        # nor makes each commit slower as it grows. (Arroyo's subclass adds ``updating_ttl``.)
        .config(PROVIDER_CLASS, STATE_STORE_PROVIDER)
        .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILE_MANAGER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        # Counting state rows costs a read before every write (Nexmark q5: a quarter of its
        # time); progress then reports the rows as 0, which the runner reports as not counted.
        .config(_TRACK_ROWS, "false")
        # Stream-stream joins keep their rows in one RocksDB store (column families) rather
        # than four (version 2). Spark 4.1's newest version; later Spark's version 4 also orders
        # them by event time, so that dropping the rows the watermark has passed reads only
        # those rows instead of all of a join's state (for a join bounded by updating_ttl, a
        # day of rows). A query keeps the version its checkpoint started with.
        .config("spark.sql.streaming.join.stateFormatVersion", "3")
        # Parquet timestamps as INT64 microseconds (Spark's own unit), not the deprecated
        # 12-byte INT96: what other readers expect of a file sink, and cheaper to write (a stage
        # handing a join's rows to an aggregate, Nexmark q4/q9, spent about 5% of its CPU time
        # writing INT96 times through Parquet's binary dictionary).
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # The delta sink writes through Delta Lake's Spark integration, which needs its
        # extension and catalog (both static: they cannot be set once the session runs).
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", _DELTA_CATALOG)
    )
    log_config = Path(__file__).with_name("log4j2.properties")
    # -Xss: a query stopped while a foreachBatch function (a sink on the driver) runs a Spark
    # job gets the Python traceback as its error, which Spark matches against a regex
    # (StreamExecution.PROXY_ERROR) whose depth grows with the text: with the default 1 MiB
    # thread stacks that overflowed (StackOverflowError printed at stop). Stacks are reserved,
    # not committed, memory.
    java_options = f"-Dlog4j2.configurationFile=file:{log_config} {_ONE_LOGGER_CONTEXT} -Xss64m"
    if settings.fast_start:
        java_options = f"{java_options} {_FAST_JVM_OPTIONS}"
    if settings.java_options.strip():
        java_options = f"{java_options} {settings.java_options.strip()}"
    from arroyo.engine import cds
    from arroyo.engine.jars import spark_jars

    jars = spark_jars()
    if settings.class_archive is not None:
        java_options = f"{java_options} {cds.dump_options(settings.class_archive)}"
    else:
        java_options = f"{java_options} {cds.use_options(jars)}".rstrip()
    # spark-submit first runs a small JVM that only prints the driver's command line.
    os.environ.setdefault("SPARK_LAUNCHER_OPTS", _FAST_JVM_OPTIONS)
    builder = builder.config("spark.driver.extraJavaOptions", java_options)
    if master == "local" or master.startswith("local["):
        # Executors run in this JVM: the jars go on its own class path, where the class archive
        # covers them and no task fetches them, rather than to a class loader of Spark's.
        builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(map(str, jars)))
    elif jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    session = builder.getOrCreate()
    return session


@contextmanager
def temporary_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Spark SQL settings of ``spark`` for the work done inside, restored after it."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
