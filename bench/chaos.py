"""Chaos at length: a Kafka -> tumble -> Kafka exactly-once pipeline fed at a steady rate on a
cluster on PostgreSQL, while a seeded schedule kills -9 each service and the worker, restarts
PostgreSQL and pauses the Kafka broker; then an independent read_committed consumer checks the
windows. The faults, the definition of recovery and the check are ``tests/cluster/chaos.py``'s
(``tests/cluster/test_chaos.py`` runs one of each in CI).

    PYTHONPATH=libs:. .venv/bin/python bench/chaos.py [--seed 32] [--minutes 10] [--faults 24]
        [--rate 500] [--pause 20] [--baseline 3] [--compilers 2] [--keep DIR]

Starts its own PostgreSQL server, Kafka broker and services (api, controller, two compilers
(``--compilers``: the ``compiler`` fault kills one, in turn; with 1 the api waits out its
restart), node: ``tests/cluster/harness.py``) on free ports on 127.0.0.1, in a temporary
directory (``--keep``: in DIR, logs kept), and stops them all at the end, also on failure.
Prints each fault as it recovers, then the figures; never fails on a figure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from arroyo.testing.kafka import KafkaBroker
from arroyo.testing.postgres import running_postgres_server
from tests.cluster.chaos import GOAL_S, Chaos, schedule
from tests.cluster.harness import WARM_WORKER, running_cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--minutes", type=float, default=10.0, help="the faults' time span")
    parser.add_argument("--faults", type=int, default=24)
    parser.add_argument("--rate", type=int, default=500, help="input events per second")
    parser.add_argument("--pause", type=float, default=20.0, help="seconds the broker stops")
    parser.add_argument("--baseline", type=int, default=3, help="catch-ups timed at no fault")
    parser.add_argument("--compilers", type=int, default=2, help="compiler replicas")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep its logs")
    args = parser.parse_args()

    seconds = args.minutes * 60
    faults = schedule(args.seed, args.faults, seconds)
    print(
        f"chaos: seed {args.seed}, {args.faults} faults over {args.minutes:g} min, "
        f"{args.rate} events/s, broker paused {args.pause:g} s, {args.compilers} "
        f"compiler(s); goal: every recovery under "
        f"{GOAL_S:g} s, no row lost or duplicated",
        flush=True,
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arroyo-chaos-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        with (
            running_postgres_server() as postgres,
            KafkaBroker.start(root / "kafka") as broker,
            running_cluster(
                root / "cluster",
                postgres.url,
                # Workers as a deployment runs them (the tests' cluster makes them C1-only and
                # keeps no warm one).
                {"ARROYO__WORKER__JVM_OPTIONS": "", **WARM_WORKER},
                tls=True,
                compilers=args.compilers,
            ) as cluster,
        ):
            say = lambda line: print(line, flush=True)  # noqa: E731
            chaos = Chaos(cluster, broker, postgres, pause_s=args.pause, say=say)
            report = chaos.run(faults, rate=args.rate, seconds=seconds, baseline=args.baseline)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nran {(time.monotonic() - started) / 60:.1f} min in all; load average now {load}")
    print("\n".join(report.lines()))


if __name__ == "__main__":
    main()
