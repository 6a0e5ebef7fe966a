"""Connecting to NATS with nats-py, as the options say, from code that is not async: a loop on
a thread of its own (``Loop``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arroyo.connectors.nats.options import NatsConnection, NatsOptions

CONNECT_TIMEOUT_S = 10.0
# A source's client that loses its servers tries each again every RECONNECT_WAIT_S seconds, up
# to RECONNECT_ATTEMPTS times (about two minutes): a server back within that is a pause, one
# that is not fails the query, naming the servers and why, rather than leaving it waiting.
RECONNECT_WAIT_S = 2.0
RECONNECT_ATTEMPTS = 60


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


async def connect(
    conn: NatsConnection,
    *,
    reconnect_attempts: int = 0,
    closed: Callable[[str], None] | None = None,
) -> Any:
    """A connected client; raises NatsError naming the servers. ``reconnect_attempts``: how
    often it tries each server again after losing them (a source's; 0: it does not reconnect);
    ``closed``: called, with why, when it closes (having given up on the servers, or asked to
    by its owner)."""
    import nats

    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        errors.append(str(err) or type(err).__name__)
        del errors[:-10]

    async def on_closed() -> None:
        if closed is not None:
            why = errors[-1] if errors else "closed"
            closed(
                f"lost the connection to NATS at {conn.servers} and could not connect again "
                f"in {reconnect_attempts} attempts: {why}"
            )

    try:
        return await nats.connect(
            conn.server_urls(),
            connect_timeout=CONNECT_TIMEOUT_S,
            allow_reconnect=reconnect_attempts > 0,
            max_reconnect_attempts=max(reconnect_attempts, 1),
            reconnect_time_wait=RECONNECT_WAIT_S,
            error_cb=on_error,
            closed_cb=on_closed,
            **_auth(conn),
        )
    except Exception as err:  # nats-py's NoServersError, auth errors, OSError...
        why = "; ".join(dict.fromkeys([*errors, str(err) or type(err).__name__]))
        raise NatsError(f"cannot connect to NATS at {conn.servers}: {why}") from err


async def newest_messages(opts: NatsOptions, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the newest messages a source with ``opts`` reads. A JetStream
    stream: its last ``count`` messages of the consumer's filter subjects, fetched by
    sequence (no consumer is made, so no durable consumer's position moves). A core
    subject: the first ``count`` published in about ``timeout_s`` (it keeps nothing to read
    back)."""
    import asyncio

    import nats.errors

    client = await connect(opts)
    try:
        if opts.stream is not None:
            return await asyncio.wait_for(_last_of_stream(client, opts, count), timeout_s)
        subscription = await client.subscribe(str(opts.subject))  # set when stream is not
        received: list[bytes] = []
        deadline = asyncio.get_running_loop().time() + timeout_s
        while len(received) < count:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                received.append((await subscription.next_msg(timeout=left)).data)
            except nats.errors.TimeoutError:
                break
        return received
    except TimeoutError:
        raise NatsError(
            f"NATS at {opts.servers}: stream '{opts.stream}' not read within {timeout_s:g} s"
        ) from None
    finally:
        await client.close()


def _matches(subject: str, pattern: str) -> bool:
    """Whether ``subject`` is one of ``pattern``'s (``*``: one token, ``>``: the rest)."""
    tokens, wanted = subject.split("."), pattern.split(".")
    for i, want in enumerate(wanted):
        if want == ">":
            return len(tokens) > i
        if i >= len(tokens) or (want != "*" and want != tokens[i]):
            return False
    return len(tokens) == len(wanted)


# How many of a stream's last messages a sample looks through for its filter's subjects.
_SAMPLE_SCAN = 1000


async def _last_of_stream(client: Any, opts: NatsOptions, count: int) -> list[bytes]:
    """The stream's last ``count`` messages of the consumer's filter subjects (all, with no
    filter), fetched by sequence from the newest back, looking through at most _SAMPLE_SCAN."""
    import nats.errors
    import nats.js.errors

    filters = [s.strip() for s in (opts.consumer_filter_subjects or "").split(",") if s.strip()]
    js = client.jetstream()
    where = f"stream '{opts.stream}' of NATS at {opts.servers}"
    try:
        state = (await js.stream_info(opts.stream)).state
        found: list[bytes] = []
        seq = state.last_seq
        while seq >= max(state.first_seq, 1) and len(found) < count:
            if state.last_seq - seq >= _SAMPLE_SCAN:
                break
            try:
                message = await js.get_msg(opts.stream, seq)
            except nats.js.errors.NotFoundError:  # deleted
                message = None
            if message is not None and (
                not filters or any(_matches(message.subject or "", f) for f in filters)
            ):
                found.append(message.data or b"")
            seq -= 1
    except nats.js.errors.NotFoundError:
        raise NatsError(
            f"NATS at {opts.servers}: no JetStream stream named '{opts.stream}'"
        ) from None
    except nats.errors.Error as err:
        raise NatsError(f"cannot read {where}: {err or type(err).__name__}") from err
    return found[::-1]
