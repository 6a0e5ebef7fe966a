"""Connecting to NATS with nats-py, as the options say, from code that is not async: a loop on
a thread of its own (``Loop``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from arroyo.connectors.nats.options import NatsConnection

CONNECT_TIMEOUT_S = 10.0
T = TypeVar("T")


class NatsError(RuntimeError):
    """Servers that cannot be reached or refuse us: names them."""


class Loop:
    """An asyncio event loop running on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _auth(conn: NatsConnection) -> dict[str, Any]:
    if conn.auth_type == "credentials":
        return {"user": conn.auth_username, "password": conn.auth_password}
    if conn.auth_type == "token":
        return {"token": conn.auth_token}
    if conn.auth_type == "nkey":
        return {"nkeys_seed_str": conn.auth_nkey_seed}
    if conn.auth_type == "jwt":
        import nkeys  # type: ignore[import-untyped]

        seed = (conn.auth_nkey_seed or "").encode()

        def signature(nonce: str) -> bytes:
            import base64

            key = nkeys.from_seed(seed)
            return base64.b64encode(key.sign(nonce.encode()))

        return {
            "user_jwt_cb": (conn.auth_jwt or "").encode,
            "signature_cb": signature,
        }
    if conn.auth_type == "credentials_file":
        return {"user_credentials": conn.auth_credentials_file}
    return {}


async def connect(conn: NatsConnection) -> Any:
    """A connected client; raises NatsError naming the servers."""
    import nats

    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        errors.append(str(err) or type(err).__name__)

    try:
        return await nats.connect(
            conn.server_urls(),
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=1,
            allow_reconnect=False,
            error_cb=on_error,
            **_auth(conn),
        )
    except Exception as err:  # nats-py's NoServersError, auth errors, OSError...
        why = "; ".join(dict.fromkeys([*errors, str(err) or type(err).__name__]))
        raise NatsError(f"cannot connect to NATS at {conn.servers}: {why}") from err
