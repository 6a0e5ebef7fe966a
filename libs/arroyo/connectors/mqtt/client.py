"""Connecting to an MQTT broker with paho-mqtt, as the options say (TLS, WebSocket, login)."""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

from arroyo.connectors.mqtt.options import MqttConnection, MqttOptions

CONNECT_TIMEOUT_S = 10.0


class MqttError(RuntimeError):
    """A broker that cannot be reached or refuses us: names it."""


def _pem_file(value: str) -> str:
    """A file path as it is; PEM text written to a private temporary file."""
    if "-----BEGIN" not in value:
        return value
    fd, path = tempfile.mkstemp(prefix="arroyo-mqtt-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(value)
    return path


def connect(
    conn: MqttConnection,
    client_id: str,
    *,
    clean_session: bool = True,
    on_message: Any = None,
    subscribe: tuple[str, int] | None = None,
) -> Any:
    """A connected client with its network loop running (``loop_start``); raises MqttError
    naming the broker when it cannot connect within CONNECT_TIMEOUT_S. ``subscribe``: (topic,
    qos) to subscribe to on every (re)connection."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    transport, host, port, tls = conn.endpoint()
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean_session,
        transport=transport,
    )
    if tls:
        client.tls_set(
            ca_certs=_pem_file(conn.tls_ca) if conn.tls_ca else None,
            certfile=_pem_file(conn.tls_cert) if conn.tls_cert else None,
            keyfile=_pem_file(conn.tls_key) if conn.tls_key else None,
        )
    if conn.username:
        client.username_pw_set(conn.username, conn.password)
    connected = threading.Event()
    refused: list[str] = []

    def on_connect(c: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any) -> None:
        if reason.is_failure:
            refused.append(str(reason))
        elif subscribe is not None:
            c.subscribe(subscribe[0], qos=subscribe[1])
        connected.set()

    client.on_connect = on_connect
    if on_message is not None:
        client.on_message = on_message
    try:
        client.connect(host, port, keepalive=10)
    except OSError as err:
        raise MqttError(f"cannot connect to the MQTT broker at {conn.url}: {err}") from err
    client.loop_start()
    if not connected.wait(CONNECT_TIMEOUT_S) or refused:
        client.loop_stop()
        client.disconnect()
        why = refused[0] if refused else f"no answer within {CONNECT_TIMEOUT_S:.0f} s"
        raise MqttError(f"the MQTT broker at {conn.url} refused the connection: {why}")
    return client


def first_messages(opts: MqttOptions, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the messages a subscription to the source's topic receives in about
    ``timeout_s``: the retained ones first, then what is published. A client of its own with a
    clean session, so no pipeline's persistent session loses a message to it."""
    import time
    import uuid

    received: list[bytes] = []
    enough = threading.Event()

    def on_message(_client: Any, _userdata: Any, message: Any) -> None:
        if len(received) < count:
            received.append(bytes(message.payload))
        if len(received) >= count:
            enough.set()

    client_id = f"{opts.client_prefix}-sample-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    client = connect(
        opts, client_id, on_message=on_message, subscribe=(opts.topic, opts.qos_level())
    )
    try:
        enough.wait(max(0.0, timeout_s - (time.monotonic() - started)))
    finally:
        client.loop_stop()
        client.disconnect()
    return list(received[:count])
