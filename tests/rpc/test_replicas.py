"""Clients of replicated services (arroyo.rpc.channel's address lists): compiles spread over the
compilers and a call a killed compiler held made again on another; the controller's list
reaches whichever one listens."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest

from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.rpc.channel import AddressError, target
from arroyo.testing.ports import free_port
from arroyo_rpc.v1 import compiler_pb2, controller_pb2
from tests.services import ScriptedController, controller_service, serving

# A compiler that answers its name after a delay, as a process a test can kill -9.
COMPILER = """
import asyncio, sys
import grpc.aio
from arroyo_rpc.v1 import compiler_pb2, compiler_pb2_grpc

class Slow(compiler_pb2_grpc.CompilerServiceServicer):
    async def Compile(self, request, context):
        await asyncio.sleep(float(sys.argv[3]))
        return compiler_pb2.CompileResponse(program_json=sys.argv[2])

async def main():
    server = grpc.aio.server()
    compiler_pb2_grpc.add_CompilerServiceServicer_to_server(Slow(), server)
    server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
    await server.start()
    print("up", flush=True)
    await server.wait_for_termination()

asyncio.run(main())
"""


def compiler(port: int, name: str, delay_s: float) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", COMPILER, str(port), name, str(delay_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "up\n"
    return process


def test_targets_of_addresses_and_lists() -> None:
    assert target("compiler:5117") == ("compiler:5117", None)
    assert target("127.0.0.1:1, 127.0.0.2:2") == ("ipv4:127.0.0.1:1,127.0.0.2:2", "127.0.0.1")
    assert target("[::1]:1,[::1]:2") == ("ipv6:[::1]:1,[::1]:2", "::1")
    for bad in ("a:1,b:2", "127.0.0.1,127.0.0.2:2", "127.0.0.1:1,[::1]:2"):
        with pytest.raises(AddressError):
            target(bad)


async def test_compiles_spread_and_one_a_killed_compiler_held_is_made_again() -> None:
    ports = [free_port(), free_port()]
    a, b = compiler(ports[0], "a", 0.3), compiler(ports[1], "b", 0.3)
    try:
        client = CompilerClient(",".join(f"127.0.0.1:{p}" for p in ports), timeout_s=20)
        async with client:
            # Round robin: both answer, each once connected.
            seen = set()
            for _ in range(10):
                seen.add((await client.compile(compiler_pb2.CompileRequest())).program_json)
            assert seen == {"a", "b"}
            calls = [
                asyncio.create_task(client.compile(compiler_pb2.CompileRequest())) for _ in range(4)
            ]
            await asyncio.sleep(0.15)  # every call is in a compiler's hands, half in a's
            a.send_signal(signal.SIGKILL)
            answered = [r.program_json for r in await asyncio.gather(*calls)]
            assert answered == ["b"] * 4
    finally:
        for process in (a, b):
            process.kill()
            process.wait()


async def test_a_controller_list_reaches_the_one_that_listens() -> None:
    standby, active = free_port(), free_port()
    async with serving(controller_service(ScriptedController()), port=active):
        client = ControllerClient(f"127.0.0.1:{standby},127.0.0.1:{active}")
        async with client:
            await client.list_nodes(controller_pb2.ListNodesRequest())
