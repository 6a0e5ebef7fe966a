"""``arroyo compiler``."""

from __future__ import annotations

import argparse
import asyncio

from arroyo.compiler import Compiler
from arroyo.config import Config
from arroyo.service import Listen, serve
from arroyo_rpc.v1 import compiler_pb2_grpc

from .servicer import CompilerServicer


def main(config: Config, args: argparse.Namespace) -> int:
    from arroyo.engine.session import SessionSettings, get_or_create_session
    from arroyo.engine.warmup import plan_sample

    # Before any gRPC thread exists: PySpark forks the JVM's launcher with a preexec_fn, which
    # can deadlock in a process whose other threads hold locks at the fork. Planning only
    # analyses queries: a small, quick-starting JVM will do.
    spark = get_or_create_session(
        SessionSettings(fast_start=True, driver_memory="1g", app_name="arroyo-compiler")
    )
    plan_sample(spark)  # the first plan in a JVM is slow: not a user's
    asyncio.run(_serve(config, Compiler(spark)))
    return 0


async def _serve(config: Config, compiler: Compiler) -> None:
    servicer = CompilerServicer(compiler)

    await serve(
        "compiler",
        config,
        listen=Listen.of(config.compiler),
        register=lambda server: compiler_pb2_grpc.add_CompilerServiceServicer_to_server(
            servicer, server
        ),
        readiness=compiler.readiness,
    )
