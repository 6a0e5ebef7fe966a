"""Nexmark on Flink SQL through PyFlink: the harness's Flink peer (bench/nexmark.py).

    FLINK_PYTHON bench/nexmark_flink.py --parquet DIR --query q5 [--parallelism 2]

(``FLINK_PYTHON``: ``flink_python()``; run with another python, the script re-executes itself
with that one) runs ``bench/nexmark/flink/<query>.sql`` in a local mini-cluster in STREAMING
mode over the events that bench/nexmark_events.py wrote to ``DIR`` (``DIR/events``, Parquet,
and the manifest ``DIR/nexmark.json``), waits for the job to finish (the input is bounded: at
its end the watermark jumps to the end of time and every window fires), and prints one line of
JSON to stdout; everything else, the JVM's log included, goes to stderr. A failing query exits
1 with the Flink error's first lines, and last its root cause, on stderr. ``--explain`` prints
the plan instead; ``--set KEY=VALUE`` overrides a Flink setting; ``--query`` also takes the path
of a ``.sql`` file (the events table and views are defined for it too).

The events must be in no more files than the parallelism (bench/nexmark_events.py writes one per
reader): Flink hands files to its readers in no particular order, and a reader given a later file
first would drop the earlier one's events as late.

PyFlink lives in a virtualenv of its own (``flink_python()``, created on first use): its pinned
dependencies conflict with ours. This module's top level imports only the standard library, so
our main virtualenv imports it too. Jars that the apache-flink package does not ship (the
Parquet format, and the Hadoop classes it needs) are fetched once into ``~/.cache/arroyo`` with
pyspark's Ivy, as arroyo.engine.jars fetches Spark's connectors; the Flink virtualenv has no
pyspark, so it asks our main virtualenv's python to fetch them.

The events table and the views ``person``, ``auction`` and ``bid`` over it are the nexmark-flink
project's, over our Parquet layout; the event time is ``date_time`` with our engine's default
watermark for a table that declares none (1 second behind the largest time seen).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

FLINK_VERSION = "2.3.0"
HADOOP_VERSION = "3.4.1"
# The SQL Parquet format (Parquet shaded in); it uses Hadoop's Configuration and file API,
# which Flink leaves to the user: Hadoop's shaded client jars, without their dependencies.
FLINK_JARS: tuple[str, ...] = (
    f"org.apache.flink:flink-sql-parquet:{FLINK_VERSION}",
    f"org.apache.hadoop:hadoop-client-api:{HADOOP_VERSION}",
    f"org.apache.hadoop:hadoop-client-runtime:{HADOOP_VERSION}",
)
PYTHON = "python3.11"
WATERMARK_DELAY = "INTERVAL '1' SECOND"  # the engine's default, as for the nexmark connector
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
QUERIES = BENCH / "nexmark" / "flink"
MANIFEST = "nexmark.json"
_COMPLETE = "complete"
# When this process started, as seconds since boot (field 22 of /proc/self/stat, in ticks).
_STARTED_S = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / os.sysconf(
    "SC_CLK_TCK"
)

# Nested Parquet timestamps: Flink's Parquet reader reads INT64 timestamps only at the top level
# (in a ROW it reads INT96 alone), so the structs' times are read as their raw microseconds. They
# are not needed as times: every struct's ``datetime`` is the event's ``date_time``, which the
# views use (as nexmark-flink's do). Struct fields are declared in the file's order.
EVENTS_DDL = """
CREATE TABLE nexmark (
    event_type INT,
    person ROW<id BIGINT, name STRING, email_address STRING, credit_card STRING, city STRING,
        state STRING, `datetime` BIGINT, extra STRING>,
    auction ROW<id BIGINT, item_name STRING, description STRING, initial_bid BIGINT,
        reserve BIGINT, `datetime` BIGINT, expires BIGINT, seller BIGINT, category BIGINT,
        extra STRING>,
    bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
        `datetime` BIGINT, extra STRING>,
    date_time TIMESTAMP(3),
    WATERMARK FOR date_time AS date_time - {delay}
) WITH (
    'connector' = 'filesystem',
    'path' = '{path}',
    'format' = 'parquet'
);

CREATE VIEW person AS
SELECT person.id AS id, person.name AS name, person.email_address AS email_address,
       person.credit_card AS credit_card, person.city AS city, person.state AS state,
       date_time, person.extra AS extra
FROM nexmark WHERE event_type = 0;

CREATE VIEW auction AS
SELECT auction.id AS id, auction.item_name AS item_name, auction.description AS description,
       auction.initial_bid AS initial_bid, auction.reserve AS reserve, date_time,
       CAST(TO_TIMESTAMP_LTZ(auction.expires / 1000, 3) AS TIMESTAMP(3)) AS expires,
       auction.seller AS seller, auction.category AS category, auction.extra AS extra
FROM nexmark WHERE event_type = 1;

CREATE VIEW bid AS
SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price,
       bid.channel AS channel, bid.url AS url, date_time, bid.extra AS extra
FROM nexmark WHERE event_type = 2;
"""

# The nexmark-flink project's settings (its conf/config.yaml), less what a bounded run on one
# machine does not use (checkpoints: none are taken). Its task managers give RocksDB about 1 GB
# of managed memory; a local mini-cluster's default, 128 MB for all its slots, starves it
# (q7 on 1 M events: 110 s against 44 s with 1 GB).
SETTINGS: dict[str, str] = {
    "execution.runtime-mode": "streaming",
    "table.local-time-zone": "UTC",
    "state.backend.type": "rocksdb",
    "taskmanager.memory.managed.size": "1g",
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2s",
    "table.exec.mini-batch.size": "50000",
    "table.optimizer.distinct-agg.split.enabled": "true",
}

# The JVM's log: warnings and errors to its stdout, which is our stderr (see main).
_LOG4J = """
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = CONSOLE
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.hadoopnative.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoopnative.level = OFF
"""


class FlinkSetupError(RuntimeError):
    """The Flink virtualenv or jars could not be set up."""


# --- the virtualenv and the jars ------------------------------------------------------------


def cache_dir() -> Path:
    return Path.home() / ".cache" / "arroyo"


def flink_venv() -> Path:
    return cache_dir() / "flink-venv"


def flink_python() -> Path:
    """The python of the PyFlink virtualenv, ``~/.cache/arroyo/flink-venv``, created with
    apache-flink ``FLINK_VERSION`` on first use (a no-op once there). Safe to call from several
    processes at once: a file lock, and the venv counts only once marked complete."""
    venv = flink_venv()
    python = venv / "bin" / "python"
    marker = venv / _COMPLETE
    wanted = f"apache-flink=={FLINK_VERSION}\n"
    if marker.is_file() and marker.read_text() == wanted:
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    from arroyo.filelock import file_lock  # runs in our .venv, which has arroyo

    with file_lock(venv.parent / f"{venv.name}.lock"):
        if marker.is_file() and marker.read_text() == wanted:
            return python
        if venv.exists():
            shutil.rmtree(venv)
        _log(f"creating {venv} with apache-flink {FLINK_VERSION} (once)")
        for command in (
            [PYTHON, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", f"apache-flink=={FLINK_VERSION}"],
        ):
            done = subprocess.run(
                command, check=False, stdout=sys.stderr, stderr=subprocess.PIPE, text=True
            )
            if done.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                tail = "\n".join(done.stderr.splitlines()[-20:])
                raise FlinkSetupError(f"{' '.join(command[:4])} failed:\n{tail}")
        marker.write_text(wanted)
    return python


def flink_jar_dir() -> Path:
    return cache_dir() / f"flink-{FLINK_VERSION}-jars"


def _jar_name(coordinate: str) -> str:
    _, artifact, version = coordinate.split(":")
    return f"{artifact}-{version}.jar"


def flink_jars() -> list[Path]:
    """The jars in ``FLINK_JARS``, fetched once into ``flink_jar_dir()``."""
    target = flink_jar_dir()
    if not (target / _COMPLETE).is_file():
        if _has_ivy():
            _fetch_jars(target)
        else:
            # The Flink virtualenv has no pyspark (whose Ivy resolves jars): our main one fetches.
            main_python = REPO / ".venv" / "bin" / "python"
            command = [str(main_python), str(Path(__file__).resolve()), "--fetch-jars"]
            if subprocess.run(command, check=False, stdout=sys.stderr).returncode != 0:
                raise FlinkSetupError(f"could not fetch Flink's jars with {main_python}")
    return [target / _jar_name(c) for c in FLINK_JARS]


def _has_ivy() -> bool:
    try:
        import arroyo.engine.jars  # noqa: F401
    except ImportError:
        return False
    return True


def _fetch_jars(target: Path) -> None:
    from arroyo.engine.jars import retrieve

    target.parent.mkdir(parents=True, exist_ok=True)
    from arroyo.filelock import file_lock

    with file_lock(target.parent / f"{target.name}.lock"):
        if (target / _COMPLETE).is_file():
            return
        for stale in target.parent.glob(f"{target.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
        try:
            for coordinate in FLINK_JARS:
                # Ivy resolves each one's dependencies too; only the jar itself is kept.
                resolved = retrieve(coordinate, staging / "resolved")
                jar = next((j for j in resolved if j.name == _jar_name(coordinate)), None)
                if jar is None:
                    raise FlinkSetupError(f"Ivy resolved no {_jar_name(coordinate)}")
                shutil.copy2(jar, staging / jar.name)
            shutil.rmtree(staging / "resolved")
            (staging / _COMPLETE).write_text("\n".join(FLINK_JARS) + "\n")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- SQL --------------------------------------------------------------------------------------


def split_statements(text: str) -> list[str]:
    """The statements of a SQL script, without ``--`` comments; ``;`` ends a statement outside
    quotes (single, double and back quotes)."""
    statements: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            current.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            statements.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    statements.append("".join(current).strip())
    return [s for s in statements if s]


def query_statements(query: str, events_dir: Path) -> list[str]:
    """The events table, the views, then the query's own statements (``query`` names one of
    ours, or is the path of a ``.sql`` file)."""
    path = Path(query) if query.endswith(".sql") else QUERIES / f"{query}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no Flink SQL for {query}: {path}")
    from nexmark_side_input import side_input_file

    prelude = EVENTS_DDL.format(delay=WATERMARK_DELAY, path=events_dir.resolve().as_uri())
    text = path.read_text().replace("$side_input", side_input_file().as_uri())
    return split_statements(prelude) + split_statements(text)


# --- measuring --------------------------------------------------------------------------------


def _process_usage(pid: int) -> tuple[float, float]:
    """CPU seconds (user and system) and peak resident MiB of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    peak_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak_kb = int(line.split()[1])
    return cpu, peak_kb / 1024


def _since_start_s() -> float:
    return float(Path("/proc/uptime").read_text().split()[0]) - _STARTED_S


def _java_error(err: BaseException) -> list[str]:
    """The first lines of a (Java) error, without stack frames, and last its root cause."""
    lines = [ln for ln in str(err).splitlines() if ln.strip() and not ln.startswith("\t")]
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    return [*lines[:12], causes[-1] if causes else lines[0] if lines else repr(err)]


# --- a run --------------------------------------------------------------------------------------


def run(
    parquet: Path,
    query: str,
    parallelism: int,
    *,
    explain: bool = False,
    settings: dict[str, str] | None = None,
) -> Any:
    """Runs ``query`` over the events in ``parquet`` to the end of the input; returns the
    figures (with ``explain``, returns the plan instead of running it). Everything PyFlink and
    its JVM print goes to stderr."""
    events = int(json.loads((parquet / MANIFEST).read_text())["events"])
    files = [p for p in (parquet / "events").iterdir() if p.suffix == ".parquet"]
    if len(files) > parallelism:
        # See the module's docstring.
        raise SystemExit(
            f"{parquet} has {len(files)} Parquet files, more than the parallelism "
            f"({parallelism}): write it with --parallelism {parallelism}"
        )
    statements = query_statements(query, parquet / "events")
    jars = flink_jars()

    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, TableEnvironment

    jvm_pid = int(get_gateway().jvm.java.lang.ProcessHandle.current().pid())
    _log(f"{_since_start_s():6.1f} s  JVM {jvm_pid} up")
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = t_env.get_config()
    for key, value in {**SETTINGS, **(settings or {})}.items():
        config.set(key, value)
    config.set("parallelism.default", str(parallelism))
    config.set("pipeline.name", f"nexmark {query}")
    config.set("pipeline.jars", ";".join(j.resolve().as_uri() for j in jars))

    inserts = []
    for statement in statements:
        if re.match(r"(?is)^\s*INSERT\s", statement):
            inserts.append(statement)
        else:
            t_env.execute_sql(statement)
    if not inserts:
        raise SystemExit(f"{query}: no INSERT INTO sink")
    statement_set = t_env.create_statement_set()
    for insert in inserts:
        statement_set.add_insert_sql(insert)
    if explain:
        return statement_set.explain()
    result = statement_set.execute()
    client = result.get_job_client()
    assert client is not None
    _log(f"{_since_start_s():6.1f} s  job {client.get_job_id()} submitted")
    done = client.get_job_execution_result().result()
    job_s = done.get_net_runtime() / 1000
    wall_s = _since_start_s()
    _log(f"{wall_s:6.1f} s  job finished after {job_s:.1f} s")

    jvm_cpu, jvm_peak = _process_usage(jvm_pid)
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return {
        "engine": "flink",
        "query": query,
        "events": events,
        "parallelism": parallelism,
        "job_s": job_s,
        "wall_s": wall_s,
        "events_per_s": events / job_s,
        "events_per_s_with_startup": events / wall_s,
        "cpu_s": jvm_cpu + own_cpu,
        "peak_rss_mb": jvm_peak + me.ru_maxrss / 1024,
    }


def _quiet_jvm(log_dir: Path) -> None:
    """The JVM that PyFlink starts logs warnings and errors to its stdout (``_LOG4J``); its
    log directory (where nothing is written) is ``log_dir``, not PyFlink's package."""
    config = log_dir / "log4j.properties"
    config.write_text(_LOG4J)
    os.environ["LOG4J_PROPERTIES"] = str(config)
    os.environ["FLINK_LOG_DIR"] = str(log_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parquet", type=Path, help="a directory bench/nexmark_events.py wrote")
    parser.add_argument(
        "--query", help="e.g. q5: runs bench/nexmark/flink/q5.sql (or the path of a .sql file)"
    )
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a Flink setting"
    )
    parser.add_argument("--explain", action="store_true", help="print the plan, do not run")
    parser.add_argument("--fetch-jars", action="store_true", help="fetch the jars and exit")
    args = parser.parse_args()
    if args.fetch_jars:
        for jar in flink_jars():
            print(jar)
        return
    if args.parquet is None or args.query is None:
        parser.error("--parquet and --query are required")
    try:
        import pyflink  # noqa: F401
    except ImportError:
        # Not the Flink virtualenv: run there (the same process, so wall_s counts this too).
        python = str(flink_python())
        os.execv(python, [python, str(Path(__file__).resolve()), *sys.argv[1:]])

    # Our stdout carries the one line of figures; everything else, the JVM (which inherits our
    # file descriptors) included, writes to stderr.
    sys.stdout.flush()
    figures_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    with tempfile.TemporaryDirectory(prefix="nexmark-flink-") as tmp:
        _quiet_jvm(Path(tmp))
        try:
            settings = dict(item.split("=", 1) for item in args.set)
            figures = run(
                args.parquet, args.query, args.parallelism, explain=args.explain, settings=settings
            )
        except Exception as err:  # a Py4JJavaError carries the Java stack in its text
            *head, cause = _java_error(err)
            for line in head:
                _log(line)
            _log(f"flink {args.query} failed: {cause[:300]}")
            sys.exit(1)
    figures_out.write((figures if args.explain else json.dumps(figures)) + "\n")
    figures_out.flush()


if __name__ == "__main__":
    main()
