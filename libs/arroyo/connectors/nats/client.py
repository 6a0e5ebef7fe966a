"""Connecting to NATS with nats-py, as the options say, from code that is not async: a loop on
a thread of its own (``Loop``)."""

from __future__ import annotations

from typing import Any

from arroyo.connectors.nats.options import NatsConnection

CONNECT_TIMEOUT_S = 10.0


class NatsError(RuntimeError):
    """Servers that cannot be reached or refuse us: names them."""


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


async def connect(conn: NatsConnection, *, reconnect: bool = False, closed: Any = None) -> Any:
    """A connected client; raises NatsError naming the servers. ``reconnect``: it reconnects
    for as long as it lives (a source's); ``closed``: called if it closes for good."""
    import nats

    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        if len(errors) < 10:
            errors.append(str(err) or type(err).__name__)

    async def on_closed() -> None:
        if closed is not None:
            closed()

    try:
        return await nats.connect(
            conn.server_urls(),
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=-1 if reconnect else 1,
            allow_reconnect=reconnect,
            error_cb=on_error,
            closed_cb=on_closed,
            **_auth(conn),
        )
    except Exception as err:  # nats-py's NoServersError, auth errors, OSError...
        why = "; ".join(dict.fromkeys([*errors, str(err) or type(err).__name__]))
        raise NatsError(f"cannot connect to NATS at {conn.servers}: {why}") from err
