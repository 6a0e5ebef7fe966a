"""Tests of the REST API (``arroyo.api``) over a real HTTP server, a real SQLite store, the
real compiler service and the real controller service over a ``ScriptedController``.

``running_api`` starts those servers for one test and yields its ``Env``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from arroyo.api import create_app
from arroyo.api.auth import KeyRing
from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.store import Store, open_store
from arroyo.testing.ports import free_port
from tests.services import (
    ScriptedController,
    compiler_service,
    controller_service,
    serving,
)

if TYPE_CHECKING:
    from arroyo.compiler import Compiler

QUERY = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM impulse;"""
# `countr` is at line 3, column 24.
BAD_QUERY = QUERY.replace("SELECT counter", "SELECT countr")


@dataclass
class Env:
    client: TestClient[web.Request, web.Application]
    store: Store
    # None when the controller is down.
    controller: ScriptedController | None
    # Where the api dials the compiler (nothing listens there when it is down).
    compiler_address: str

    async def create(self, name: str = "p", query: str = QUERY, **fields: Any) -> dict[str, Any]:
        response = await self.client.post(
            "/api/v1/pipelines", json=dict(name=name, query=query, **fields)
        )
        body: dict[str, Any] = await response.json()
        assert response.status == 201, body
        return body


@asynccontextmanager
async def running_api(
    tmp_path: Path,
    compiler: Compiler | None = None,
    *,
    controller_up: bool = True,
    web_root: Path | None = None,
    extra_routes: Callable[[web.Application], None] | None = None,
    compiler_wait_s: float = 0.5,
    keys_always: bool | None = None,
) -> AsyncIterator[Env]:
    """The api over a fresh store; ``compiler`` None or ``controller_up`` False leave that
    service's address unanswered. ``compiler_wait_s``: short, so that a test of a compiler that
    is down does not wait the minute a deployment waits for one. ``keys_always``: None, no API
    keys; else the api checks them (``arroyo.api.auth``), always (True) or once one exists."""
    async with AsyncExitStack() as stack:
        store = await open_store(f"sqlite:///{tmp_path / 'arroyo.db'}")
        stack.push_async_callback(store.close)
        await store.migrate()

        compiler_address = f"127.0.0.1:{free_port()}"
        if compiler is not None:
            running = await stack.enter_async_context(
                serving(compiler_service(compiler), name="compiler")
            )
            compiler_address = str(running.grpc_address)

        controller_address = f"127.0.0.1:{free_port()}"
        controller = None
        if controller_up:
            controller = ScriptedController(store)
            running = await stack.enter_async_context(
                serving(controller_service(controller), name="controller")
            )
            controller_address = str(running.grpc_address)

        compiler_client = await stack.enter_async_context(CompilerClient(compiler_address))
        controller_client = await stack.enter_async_context(ControllerClient(controller_address))
        app = create_app(
            store,
            compiler_client,
            controller_client,
            web_root=web_root,
            compiler_wait_s=compiler_wait_s,
            # The keys read at every request: a test sees a key it made or revoked at once.
            keys=None if keys_always is None else KeyRing(store, keys_always, refresh_s=0),
        )
        if extra_routes is not None:
            extra_routes(app)
        client = await stack.enter_async_context(TestClient(TestServer(app)))
        yield Env(client, store, controller, compiler_address)


async def error_of(response: Any, status: int) -> str:
    """The message of an error response, after checking its status and shape."""
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert isinstance(body["error"], str) and body["error"]
    return str(body["error"])
