"""Small micro-batches with and without Spark's generated code: ``bench/golden_codegen.py``.

    .venv/bin/python bench/golden_codegen.py [--cases tumble_count,updating_global,...]
        [--rounds 2] [--full-jit]

Golden cases (tests/sql) run as the suite's resumed runs do (two batches of four rows, stopped,
then the rest in batches of 16), each case ``--rounds`` times, in one JVM per mode: Spark's
default (generated code) and its interpreter (``tests.codegen.interpreted``, which the suite's
golden resumed runs take). Prints, side by side, the wall time and the
machine's CPU seconds (from /proc/stat: the JVM, its Python workers and the driver) per mode.
The JVMs run on the quick JIT, as the tests' do, unless ``--full-jit``. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ",".join(
    ("tumble_count", "updating_three_way_join_aggregate", "updating_global", "windowed_joins",
     "session_window")
)  # fmt: skip


def _machine_cpu_s() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return sum(int(x) for x in fields[1:4]) / os.sysconf("SC_CLK_TCK")


def _run_mode(mode: str, cases: list[str], rounds: int) -> None:
    """In this process: one session in ``mode``, every case ``rounds`` times."""
    sys.path.insert(0, str(ROOT))
    from arroyo.engine.session import SessionSettings, get_or_create_session
    from tests.codegen import interpreted
    from tests.sql.harness import QUERIES, render, run_case

    spark = get_or_create_session(
        SessionSettings(parallelism=2, shuffle_partitions=2, java_options="-XX:+UseSerialGC")
    )
    evaluation = interpreted(spark) if mode == "interpreted" else contextlib.nullcontext()
    with evaluation:
        for _ in range(rounds):
            for case in cases:
                with tempfile.TemporaryDirectory(prefix="arroyo-bench-") as tmp:
                    work = Path(tmp)
                    sql = render(QUERIES / f"{case}.sql", work / "out")
                    run_case(spark, sql, work, resume_part_way=True)
    spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--full-jit", action="store_true")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # the child's: one mode
    args = parser.parse_args()
    cases = args.cases.split(",")
    if args.mode:
        _run_mode(args.mode, cases, args.rounds)
        return 0
    from arroyo.engine.session import QUICK_JIT_OPTIONS

    env = dict(os.environ)
    if not args.full_jit:
        env["JDK_JAVA_OPTIONS"] = QUICK_JIT_OPTIONS
    print(f"{len(cases)} golden cases, resumed, {args.rounds} rounds, one JVM per mode")
    print(f"{'mode':12} {'wall s':>8} {'CPU s':>8}")
    for mode in ("generated", "interpreted"):
        cpu, started = _machine_cpu_s(), time.monotonic()
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--cases", args.cases,
             "--rounds", str(args.rounds)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            print(f"{mode}: failed\n{done.stderr[-3000:]}")
            return 1
        wall, used = time.monotonic() - started, _machine_cpu_s() - cpu
        print(f"{mode:12} {wall:8.1f} {used:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
