"""The compiler's gRPC surface. Planning blocks on Spark, so it runs on a thread."""

from __future__ import annotations

import asyncio
from typing import Any

from arroyo.compiler import Compiler
from arroyo_rpc.v1 import compiler_pb2 as pb
from arroyo_rpc.v1 import compiler_pb2_grpc


class CompilerServicer(compiler_pb2_grpc.CompilerServiceServicer):  # type: ignore[misc]
    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    async def Compile(self, request: pb.CompileRequest, context: Any) -> Any:
        return await asyncio.to_thread(
            self.compiler.compile,
            request.query,
            request.udfs,
            max(1, request.parallelism),
            request.connection_profiles,
            request.connection_tables,
        )

    async def ValidateUdfs(self, request: pb.ValidateUdfsRequest, context: Any) -> Any:
        return await asyncio.to_thread(self.compiler.validate_udfs, request.udfs)
