"""``arroyo run``, ``arroyo validate``, ``arroyo migrate``, ``arroyo keys`` (cli/keys.py) and
``arroyo certs`` (cli/certs.py).

``validate`` prints the dataflow on stdout and its warnings (a source that cannot replay into
an exactly-once sink) on stderr. Exit codes: 0 success, 1 the pipeline failed while running, 2
the query was refused (diagnostics printed on stderr), 130 stopped by a signal after a final
checkpoint. ``migrate`` exits 1 when it fails.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from arroyo.errors import ArroyoError, PlanningError
from arroyo.logging import configure_logging
from arroyo.program.spec import PipelineProgram
from arroyo_cli.certs import add_certs_parser, run_certs
from arroyo_cli.keys import add_keys_parser, run_keys
from arroyo_cli.services import SERVICES, add_worker_arguments, run_service
from arroyo_cli.timings import CatalystWork, Timings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.connectors.runtime.remote_state import RemoteState
    from arroyo.engine.session import SessionSettings
    from arroyo.udfs import UdfLibrary

# The planner with the catalog it plans against (which imports it), loaded beside the JVM.
_PLANNER_MODULE = "arroyo.engine.catalog"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arroyo", description="Streaming SQL on Spark")
    parser.add_argument("--log-level", default="warning", help="debug, info, warning, error")
    parser.add_argument("--log-json", action="store_true", help="logs as JSON lines")
    parser.add_argument("--config", type=Path, help="a TOML config file (see arroyo.config)")
    # `--config` is accepted after the subcommand too; SUPPRESS keeps the global one otherwise.
    config_option = argparse.ArgumentParser(add_help=False)
    config_option.add_argument("--config", type=Path, default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline on local Spark")
    validate = sub.add_parser("validate", help="plan a query without running it")
    for p in (run, validate):
        p.add_argument("query", help="a .sql file, or - for standard input")
        p.add_argument("--udfs", type=Path, help="a Python file of UDFs (see arroyo_udf)")
        p.add_argument("--parallelism", type=int, default=1)
        p.add_argument(
            "--timings",
            action="store_true",
            help="print where the time went (JVM start, planning, Spark analyses, batches)",
        )
    run.add_argument(
        "--state-dir",
        help="checkpoints live here; run again with it to resume, on this machine or, for an "
        "object store (s3://bucket/prefix; credentials and endpoint from AWS_* variables, or "
        "s3::http://host:port/bucket/prefix), on any (default: a fresh temporary directory)",
    )
    run.add_argument(
        "--real-time",
        type=float,
        metavar="SECONDS",
        help="Spark's real-time mode: each row reaches the sink as it arrives, and a checkpoint "
        "is taken every SECONDS (stateless queries from Kafka or nexmark into Kafka)",
    )
    sub.add_parser(
        "migrate", parents=[config_option], help="create or update the control plane's database"
    )
    add_keys_parser(sub, config_option)
    add_certs_parser(sub, config_option)
    cluster = sub.add_parser(
        "cluster",
        parents=[config_option],
        help="api, controller, compiler and a node on this machine (SQLite, local Spark)",
    )
    cluster.add_argument(
        "--s3",
        action="store_true",
        help="also run an S3 server (versitygw, on 127.0.0.1, data under data_dir/s3) and keep "
        "the jobs' checkpoints in it, as nodes on machines that share no disk do",
    )
    cluster.add_argument(
        "--https",
        action="store_true",
        help="serve the API and web UI over HTTPS with the cluster's certificate for the api "
        "(its CA: data_dir/tls/ca.pem); beyond loopback it does by default",
    )
    for name, what in SERVICES.items():
        service = sub.add_parser(name, parents=[config_option], help=f"run the {what}")
        if name == "worker":
            add_worker_arguments(service)
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_json)
    if args.command == "migrate":
        return _migrate(args.config)
    if args.command == "keys":
        return run_keys(args)
    if args.command == "certs":
        return run_certs(args)
    if args.command in SERVICES or args.command == "cluster":
        return run_service(args)
    timings = Timings(args.timings)
    timings.mark("python start, imports")
    sql = sys.stdin.read() if args.query == "-" else Path(args.query).read_text()
    code = _plan_or_run(args, sql, timings)
    if args.command == "validate" and argv is None:
        # Run as the program: the answer is printed and nothing is left to write; the JVM
        # leaves on its own once its standard input closes (running Spark's shutdown hooks).
        # Tearing down the interpreter's modules and py4j's threads first costs about 0.2 s
        # of a 3.5 s command.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _plan_or_run(args: argparse.Namespace, sql: str, timings: Timings) -> int:
    source_name = "<stdin>" if args.query == "-" else args.query
    try:
        udfs = None
        if args.udfs is not None:
            from arroyo.udfs import load

            udfs = load(args.udfs.read_text(), str(args.udfs))
        if args.command == "validate":
            return _validate(sql, args.parallelism, udfs, timings)
        real_time_ms = None if args.real_time is None else max(1, round(args.real_time * 1000))
        return _run(sql, args.parallelism, args.state_dir, udfs, timings, real_time_ms=real_time_ms)
    except PlanningError as err:
        for d in err.diagnostics:
            print(d.render(source_name), file=sys.stderr)
        return 2
    except ArroyoError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 1
    finally:
        timings.print()


def _migrate(config_path: Path | None) -> int:
    """Bring the configured database's schema up to date; prints the schema version."""
    import asyncio

    from arroyo.config import load_config
    from arroyo.store import open_store

    async def migrate(url: str) -> int:
        store = await open_store(url)
        try:
            return await store.migrate()
        finally:
            await store.close()

    try:
        version = asyncio.run(migrate(load_config(config_path).database_url()))
    except ArroyoError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 1
    print(f"schema version {version}")
    return 0


def _plan(
    sql: str,
    parallelism: int,
    udfs: UdfLibrary | None,
    timings: Timings,
    settings: SessionSettings,
) -> tuple[PipelineProgram, SparkSession]:
    from arroyo.engine.jars import spark_jars
    from arroyo.engine.session import get_or_create_session

    spark_jars()
    timings.mark("jars")
    # The planner's own modules (sqlglot among them) load while this thread waits for the JVM;
    # pyspark's, which both threads need, are loaded here first. The fork that starts the JVM
    # is safe beside the import: CPython holds its import lock across a fork, and the child
    # runs only pyspark's preexec_fn (a signal setting, no import) before it execs.
    import pyspark.sql.functions  # noqa: F401

    imports = threading.Thread(target=importlib.import_module, args=(_PLANNER_MODULE,))
    imports.start()
    spark = get_or_create_session(settings)
    imports.join()
    timings.mark("JVM and SparkSession, planner imported beside it")
    from arroyo.engine.catalog import spark_planner

    before = CatalystWork.read(spark) if timings.enabled else None
    with tempfile.TemporaryDirectory(prefix="arroyo-plan-") as tmp:
        planner = spark_planner(spark, parallelism=parallelism, state_dir=Path(tmp), udfs=udfs)
        program = planner.plan(sql)
    if before is not None:
        timings.mark("planning", _catalyst(CatalystWork.read(spark) - before))
    return program, spark


def _catalyst(work: CatalystWork) -> str:
    return f"{work.analyses} Spark analyses, {work.rules_s:.2f} s in Catalyst rules"


def _validate(sql: str, parallelism: int, udfs: UdfLibrary | None, timings: Timings) -> int:
    from arroyo.engine.session import SessionSettings

    # Planning alone: the quick-starting JIT (see SessionSettings.fast_start) and a small heap.
    settings = SessionSettings(parallelism=parallelism, fast_start=True, driver_memory="1g")
    program, _ = _plan(sql, parallelism, udfs, timings, settings)
    print(describe(program))
    from arroyo.sql.planner.delivery import replay_warnings

    for warning in replay_warnings(program):
        print(f"warning[{warning.code}]: {warning.message}", file=sys.stderr)
    return 0


def describe(program: PipelineProgram) -> str:
    """The dataflow as text: sources, views, sinks, with their schemas."""
    lines = []
    for s in program.sources:
        bounded = "lookup" if s.is_lookup else "bounded" if s.bounded else "unbounded"
        cols = ", ".join(f"{c.name} {c.spark_type}" for c in s.columns)
        fmt = f", format {s.format.name}" if s.format else ""
        lines.append(f"source {s.name} [{s.connector}{fmt}, {bounded}] ({cols})")
    for v in program.views:
        lines.append(f"view {v.name}: {v.sql}")
    for q in program.queries:
        cols = ", ".join(f"{c.name} {c.spark_type}" for c in q.sink.columns)
        fmt = f", format {q.sink.format.name}" if q.sink.format else ""
        lines.append(f"sink {q.sink.name} [{q.sink.connector}{fmt}, {q.output_mode}] ({cols})")
        lines.append(f"  <- {q.sql}")
    return "\n".join(lines)


def _run(
    sql: str,
    parallelism: int,
    state_dir: str | None,
    udfs: UdfLibrary | None,
    timings: Timings,
    *,
    real_time_ms: int | None = None,
) -> int:
    from arroyo.engine.input_size import small_bounded_input
    from arroyo.engine.session import SessionSettings

    started = time.monotonic()
    quick = small_bounded_input(sql, parallelism)
    timings.mark(f"input read for the JIT ({'quick: small and bounded' if quick else 'full'})")
    settings = SessionSettings(parallelism=parallelism, fast_start=quick)
    program, spark = _plan(sql, parallelism, udfs, timings, settings)
    remote = _remote_state(state_dir)
    own_state = state_dir is None or remote is not None
    if state_dir is None or remote is not None:
        state = Path(tempfile.mkdtemp(prefix="arroyo-state-"))
    else:
        state = Path(state_dir)
    try:
        return _run_pipeline(
            spark,
            program,
            state,
            resume_with=state_dir,
            remote=remote(state) if remote is not None else None,
            timings=timings,
            real_time_ms=real_time_ms,
            started=started,
        )
    finally:
        if own_state:
            # Nothing can resume it (its path was never shown, or it is a working copy of a
            # state in an object store): checkpoints do not pile up.
            shutil.rmtree(state, ignore_errors=True)


def _remote_state(state_dir: str | None) -> Callable[[Path], RemoteState] | None:
    """For a state directory in an object store: how to make its copy in a local one."""
    from arroyo.connectors.runtime.remote_state import RemoteState, is_remote

    if state_dir is None or not is_remote(state_dir):
        return None

    return lambda local: RemoteState(state_dir, local)


def _run_pipeline(
    spark: SparkSession,
    program: PipelineProgram,
    state: Path,
    *,
    resume_with: str | None,
    remote: RemoteState | None,
    timings: Timings,
    real_time_ms: int | None,
    started: float,
) -> int:
    from arroyo.engine.runner import BatchReport, PipelineRunner, Progress

    live = sys.stderr.isatty()

    def show(p: Progress) -> None:
        if live:
            wm = p.watermark or "-"
            sys.stderr.write(
                f"\r  batches {p.batches}  rows in {p.rows_in}  "
                f"{p.rows_per_second:,.0f} rows/s  watermark {wm}   "
            )
            sys.stderr.flush()

    batches: list[float] = []

    def on_batch(report: BatchReport) -> None:
        batches.append(time.monotonic())

    runner = PipelineRunner(
        spark,
        program,
        state,
        on_progress=show,
        on_batch=on_batch if timings.enabled else None,
        real_time_batch_ms=real_time_ms,
        remote=remote,
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    first_output = _note_first_output() if timings.enabled else None
    before = CatalystWork.read(spark) if timings.enabled else None
    runner.start()
    if before is not None:
        timings.mark("query start", _catalyst(CatalystWork.read(spark) - before))
    finished = runner.wait()
    if batches:
        timings.mark("first micro-batch committed", at=batches[0])
        timings.mark(f"{len(batches) - 1} more micro-batches", at=batches[-1])
    timings.mark("stop")
    if first_output:
        age = timings.since_start(first_output[0])
        timings.note(f"first output row printed {age:.2f} s after the process started")
    if live:
        sys.stderr.write("\n")
    if runner.progress.dropped_bad_records:
        print(f"dropped {runner.progress.dropped_bad_records} bad records", file=sys.stderr)
    if overflowed := runner.progress.dropped_overflow_messages:
        print(f"dropped {overflowed} messages past a source's buffer", file=sys.stderr)
    if finished:
        print(f"finished in {time.monotonic() - started:.1f}s", file=sys.stderr)
        return 0
    where = "" if resume_with is None else f"; resume with --state-dir {resume_with}"
    print(f"stopped after a checkpoint{where}", file=sys.stderr)
    return 130


def _note_first_output() -> list[float]:
    """Print stdout sinks' rows as they would be, noting when the first ones are printed."""
    from arroyo.connectors.stdout.sink import route_stdout

    first: list[float] = []

    def route(sink: str, rows: list[str]) -> None:
        if not first:
            first.append(time.monotonic())
        sys.stdout.write("".join(f"{row}\n" for row in rows))
        sys.stdout.flush()

    route_stdout(route)
    return first


if __name__ == "__main__":
    sys.exit(main())
