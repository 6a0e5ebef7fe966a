"""``arroyo api|controller|compiler|node|worker|cluster``: one service per process.

The services live in ``arroyo_services`` (``services/`` in the checkout) and are imported by
name here, at run time, so the libraries never import a service.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from arroyo.config import ConfigError, load_config

SERVICES = {
    "api": "REST API and web UI",
    "controller": "controller (job state machines, scheduling, recovery)",
    "compiler": "compiler (SQL to pipeline programs)",
    "node": "node (starts worker processes on this machine)",
    "worker": "worker of one job (started by a node)",
}


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job-id")
    parser.add_argument("--generation", type=int)
    parser.add_argument(
        "--warm",
        action="store_true",
        help="start Spark, then read the job to run from standard input as one JSON line "
        '{"job_id", "generation"} (how a node keeps a worker ready)',
    )
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--controller", required=True, help="the controller's host:port")


def run_service(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 2
    if args.command == "cluster":
        from arroyo.cli.cluster import run_cluster

        return run_cluster(config, args.config)
    module = importlib.import_module(f"arroyo_services.{args.command}.main")
    result: int = module.main(config, args)
    return result
