"""Clients of replicated services (arroyo.rpc.channel's address lists): compiles spread over the
compilers and a call a killed compiler held made again on another; the controller's list
reaches whichever one listens."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.rpc.channel import AddressError, target
from arroyo.testing.ports import free_port
from arroyo_rpc.v1 import compiler_pb2, controller_pb2
from tests.services import ScriptedController, controller_service, serving
from tests.waiting import eventually

# A compiler that answers its name, as a process a test can kill -9. Each call is logged (a
# line in argv[3]) when it arrives, and held while the file argv[4] exists.
COMPILER = """
import asyncio, os, sys
import grpc.aio
from arroyo_rpc.v1 import compiler_pb2, compiler_pb2_grpc

class Held(compiler_pb2_grpc.CompilerServiceServicer):
    async def Compile(self, request, context):
        with open(sys.argv[3], "a") as log:
            log.write("call\\n")
        while os.path.exists(sys.argv[4]):
            await asyncio.sleep(0.01)
        return compiler_pb2.CompileResponse(program_json=sys.argv[2])

async def main():
    server = grpc.aio.server()
    compiler_pb2_grpc.add_CompilerServiceServicer_to_server(Held(), server)
    server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
    await server.start()
    print("up", flush=True)
    await server.wait_for_termination()

asyncio.run(main())
"""


def compiler(port: int, name: str, calls: Path, hold: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", COMPILER, str(port), name, str(calls), str(hold)],
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


async def test_compiles_spread_and_one_a_killed_compiler_held_is_made_again(
    tmp_path: Path,
) -> None:
    ports = [free_port(), free_port()]
    logs, hold = [tmp_path / "a.calls", tmp_path / "b.calls"], tmp_path / "hold"
    a, b = compiler(ports[0], "a", logs[0], hold), compiler(ports[1], "b", logs[1], hold)

    def arrived() -> list[int]:
        return [len(log.read_text().splitlines()) if log.exists() else 0 for log in logs]

    try:
        client = CompilerClient(",".join(f"127.0.0.1:{p}" for p in ports), timeout_s=20)
        async with client:
            # Round robin: both answer, each once connected.
            seen = set()
            for _ in range(10):
                seen.add((await client.compile(compiler_pb2.CompileRequest())).program_json)
            assert seen == {"a", "b"}
            before = arrived()
            hold.touch()  # the compilers hold the next calls until it goes
            calls = [
                asyncio.create_task(client.compile(compiler_pb2.CompileRequest())) for _ in range(4)
            ]

            async def in_hand() -> bool:
                now = arrived()
                return sum(now) - sum(before) == 4 and now[0] > before[0]

            await eventually("every call in a compiler's hands, some in a's", in_hand, 20)
            a.send_signal(signal.SIGKILL)
            hold.unlink()
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
