"""``arroyo api``: the REST API and the web UI on ``config.api.port``, over HTTPS or HTTP
(``arroyo.api.https``); its channels to the compiler and controller are mutual TLS with
``config.tls``.

The api keeps nothing between requests but caches (the key ring's, readiness's "seen ready"):
what it knows is in the database. So replicas need nothing from each other: with
``api.reuse_port`` they share one port on a machine (``SO_REUSEPORT``: the kernel hands each
new connection to one of them), each with an admin port of its own (that port is never
shared: a probe must know which replica it asks). A replica that dies takes its connections
and their requests in flight with it; a client's retry is a new connection, to a replica that
lives. Across machines, a load balancer does the same with each replica's ``/status``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from aiohttp import web

from arroyo.api import create_app, web_root
from arroyo.api.auth import KeyRing, NoApiKeyError, is_loopback, refuse_open_bind
from arroyo.api.https import https_context
from arroyo.config import Config
from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.service import DEFAULT_GRACE_S, Listen, RunningService, serve, store_ready
from arroyo.store import open_store
from arroyo.store.api_keys import bootstrap_api_key
from arroyo.store.secrets import secret_box
from arroyo.tls import load_identity


def main(config: Config, args: argparse.Namespace) -> int:
    try:
        asyncio.run(_serve(config))
    except NoApiKeyError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 2
    return 0


async def _serve(config: Config) -> None:
    tls = load_identity(config)
    https = https_context(config)
    store = await open_store(config.database_url(), secrets=secret_box(config))
    await store.migrate()
    host = config.api.bind_host
    if config.api.bootstrap_key is not None:
        await store.put_bootstrap_api_key(
            bootstrap_api_key(config.api.bootstrap_key.get_secret_value())
        )
    try:
        refuse_open_bind(host, await store.list_api_keys())
    except NoApiKeyError:
        await store.close()
        raise
    keys = KeyRing(store, always=not is_loopback(host))
    # A cold compiler starts Spark before its first answer.
    compiler = CompilerClient(config.compiler.dial(), timeout_s=120, tls=tls)
    controller = ControllerClient(config.controller.dial(), tls=tls)
    app = create_app(
        store,
        compiler,
        controller,
        web_root=web_root(),
        compiler_wait_s=config.api.compiler_wait_s,
        keys=keys,
    )
    # At shutdown the server stops listening and gives requests in flight the same grace as
    # the gRPC services give theirs; then it cancels them.
    runner = web.AppRunner(app, shutdown_timeout=DEFAULT_GRACE_S)

    async def startup(running: RunningService) -> None:
        await runner.setup()
        await web.TCPSite(
            runner,
            config.api.bind_host,
            config.api.port,
            ssl_context=https,
            reuse_port=config.api.reuse_port or None,
        ).start()

    async def shutdown() -> None:
        await runner.cleanup()
        await compiler.close()
        await controller.close()
        await store.close()

    # The API is HTTP(S), not gRPC: the bootstrap runs only its admin server.
    await serve(
        "api",
        config,
        listen=Listen(config.api.bind_host, None, config.api.admin_port),
        startup=startup,
        shutdown=shutdown,
        readiness=store_ready(store),
    )
