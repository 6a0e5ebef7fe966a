"""``arroyo api|controller|compiler|node|worker|cluster``: one service per process.

The services live in ``arroyo_services`` (``services/`` in the checkout), below this package.
Each is imported only when it is the one to run: the compiler and the worker bring Spark with
them, which the api, the controller and the node never load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from arroyo.config import Config, ConfigError, load_config

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
    """Exit codes: a service's own, or 2 for a bad config (its TLS files included: a missing,
    expired or mismatched certificate is a one-line ``error[bad_tls]``, before anything
    starts)."""
    try:
        config = load_config(args.config)
        if args.command == "cluster":
            from arroyo_cli.cluster import run_cluster

            return run_cluster(config, args.config, s3=args.s3, https=args.https)
        check_tls(config, args.command)
        return _service_main(args.command)(config, args)
    except ConfigError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 2


def check_tls(config: Config, service: str) -> None:
    """Raise ``arroyo.tls.TlsError`` when the service's TLS files (and the api's HTTPS
    certificate) cannot serve; cheap, so every start does it first."""
    from arroyo.tls import load_identity

    load_identity(config)
    if service == "api":
        from arroyo.api.https import https_context

        https_context(config)


def _service_main(name: str) -> Callable[[Config, argparse.Namespace], int]:
    if name == "api":
        from arroyo_services.api.main import main as api

        return api
    if name == "controller":
        from arroyo_services.controller.main import main as controller

        return controller
    if name == "compiler":
        from arroyo_services.compiler.main import main as compiler

        return compiler
    if name == "node":
        from arroyo_services.node.main import main as node

        return node
    from arroyo_services.worker.main import main as worker

    return worker
