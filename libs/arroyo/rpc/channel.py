"""Client channels: keepalive, message limits, and a span per call with W3C trace propagation.

Every outgoing call gets a CLIENT span named after its rpc (``arroyo_rpc.v1.WorkerService/
StopExecution``) whose context travels to the server in the ``traceparent`` metadata entry
(``opentelemetry.propagate``, so the server's span becomes its child), and ends with the call's
gRPC status recorded (``rpc.grpc.status_code``, span status ERROR when not OK). The facades in
``arroyo.rpc.clients`` build on ``channel``; nothing else should open a channel.

Security. Given a ``TlsIdentity`` (``arroyo.tls``: the process's ``config.tls``), a channel is
mutual TLS: it shows the process's certificate, accepts only a server whose certificate the
identity's CA signed, and checks the server's name (the host of ``address``) against that
certificate's subject alternative names. Without one it is plaintext, as every channel is in a
deployment without a ``tls`` section. A server that refuses the certificate, or speaks the
other protocol, fails the call as unreachable (``unavailable``).

Replicas. ``address`` may list several replicas of one service, ``ip:port,ip:port`` (IP
addresses: gRPC's ``ipv4:``/``ipv6:`` targets take no host names; for names, give one DNS name
that resolves to every replica, as a headless service does). How calls are spread over them
is the ``service_config``'s ``loadBalancingConfig``: ``pick_first`` (gRPC's default) keeps to
the first replica that accepts a connection and moves on when it goes, which reaches the one
active replica of a service whose standbys do not listen (the controller);
``round_robin`` (``SPREAD``) sends each call to the next connected replica, skipping those
that are down. With TLS, the name a list's replicas are checked against is its first host
(one channel has one authority): every replica's certificate must name it, as ``arroyo
certs`` makes them on one machine (127.0.0.1); a DNS name is checked as itself.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc
import grpc.aio
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, StatusCode

from arroyo.tls import TlsIdentity

# Limits sized for our traffic: sink rows and pipeline programs travel as JSON strings.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    # Ping an idle connection with calls in flight (a long SubscribeToOutput stream) so a peer
    # that vanished without a FIN is noticed in ~40 s rather than at the TCP timeout.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    # A restarted peer is dialled again within seconds (the default backoff grows to 120 s).
    ("grpc.max_reconnect_backoff_ms", 5_000),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

_TRACER_NAME = "arroyo.rpc"

# Retried attempts may resend a request up to this size (gRPC keeps 256 KiB by default, less
# than a compile request with UDFs and profiles can be).
_RETRY_BUFFER_BYTES = 16 * 1024 * 1024


def spread(service: str) -> dict[str, Any]:
    """A service config for a stateless service's replicas: each call to the next replica
    that is up (``round_robin``), and a call that fails ``UNAVAILABLE`` (its replica died or
    refused it before answering) tried again, on another, up to twice. Only for services whose
    every rpc may safely run twice (``service`` is the proto's full name)."""
    return {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            {
                "name": [{"service": service}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }


class AddressError(ValueError):
    """An address (list) that cannot be dialled as written."""


def target(address: str) -> tuple[str, str | None]:
    """The gRPC target for ``host:port`` or a list of ``ip:port`` (see the module), and the
    host name TLS checks when it is not the target's own (a list's first host)."""
    parts = [p.strip() for p in address.split(",") if p.strip()]
    if len(parts) == 1:
        return parts[0], None
    if not parts:
        raise AddressError(f"no address in '{address}'")
    families, hosts = set(), []
    for part in parts:
        host, sep, port = part.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        try:
            families.add(ipaddress.ip_address(host).version)
        except ValueError:
            host = ""
        if not sep or not port.isdigit() or not host:
            raise AddressError(
                f"'{part}' in '{address}' is not ip:port: a list of replicas is of IP "
                "addresses (for host names, one DNS name that resolves to every replica)"
            )
        hosts.append(host)
    if len(families) > 1:
        raise AddressError(f"'{address}' mixes IPv4 and IPv6 addresses")
    return f"ipv{families.pop()}:{','.join(parts)}", hosts[0]


def channel(
    address: str,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    options: Sequence[tuple[str, Any]] = (),
    tls: TlsIdentity | None = None,
    service_config: Mapping[str, Any] | None = None,
) -> Any:
    """A ``grpc.aio.Channel`` to ``host:port`` (or replicas, see the module) with the client
    tracing interceptor: mutual TLS with ``tls``, plaintext without (see the module).
    ``service_config``: gRPC's, e.g. ``spread(...)``; raises ``AddressError`` for a bad list.

    Call it on the event loop that will use the channel (grpc.aio binds a channel to the loop
    it was made on). Spans go to ``tracer_provider``, by default the process's global one (the
    one ``arroyo.service.serve`` installs). ``options`` are appended to ``CHANNEL_OPTIONS``;
    later entries win. The caller closes the channel (``await channel.close()``).
    """
    interceptors = [ClientTracingInterceptor(tracer_provider)]
    dialled, name = target(address)
    settings: list[tuple[str, Any]] = list(CHANNEL_OPTIONS)
    if service_config is not None:
        settings += [
            ("grpc.service_config", json.dumps(service_config)),
            ("grpc.per_rpc_retry_buffer_size", _RETRY_BUFFER_BYTES),
        ]
    if name is not None and tls is not None:
        settings.append(("grpc.default_authority", name))
    settings += options
    if tls is None:
        return grpc.aio.insecure_channel(dialled, options=settings, interceptors=interceptors)
    return grpc.aio.secure_channel(
        dialled, channel_credentials(tls), options=settings, interceptors=interceptors
    )


def channel_credentials(tls: TlsIdentity) -> Any:
    """A client's half of mutual TLS: the CA it trusts, the certificate and key it shows."""
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca_pem, private_key=tls.key_pem, certificate_chain=tls.cert_pem
    )


def server_credentials(tls: TlsIdentity) -> Any:
    """A server's half: its certificate and key, and a client certificate signed by the CA
    required of every caller (none, or another CA's, is refused during the handshake)."""
    return grpc.ssl_server_credentials(
        ((tls.key_pem, tls.cert_pem),), root_certificates=tls.ca_pem, require_client_auth=True
    )


def method_name(method: str | bytes) -> str:
    """``/pkg.Service/Method`` as OpenTelemetry names an rpc: ``pkg.Service/Method``."""
    text = method.decode() if isinstance(method, bytes) else method
    return text.lstrip("/")


def rpc_attributes(name: str) -> dict[str, str]:
    service, _, rpc = name.partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc}


def record_status(span: trace.Span, status: Any, message: str | None = None) -> None:
    """Put a ``grpc.StatusCode`` on ``span``; every non-OK status marks the span an error."""
    span.set_attribute("rpc.grpc.status_code", status.value[0])
    if status != grpc.StatusCode.OK:
        span.set_status(StatusCode.ERROR, message or status.name)


# grpc ships no type information, so its interceptor bases are Any to mypy; grpc.aio insists
# on instances of them.
class ClientTracingInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.aio.UnaryStreamClientInterceptor,  # type: ignore[misc]
):
    """Opens the CLIENT span of each call and injects its context into the call's metadata."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        name = method_name(details.method)
        with self._tracer.start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=rpc_attributes(name),
            set_status_on_exception=False,
        ) as span:
            call = await continuation(_with_trace_context(details, None), request)
            try:
                response = await call
            except grpc.aio.AioRpcError as err:
                record_status(span, err.code(), err.details())
                raise
            record_status(span, grpc.StatusCode.OK)
            return response

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        name = method_name(details.method)
        # Not a current span: it outlives this coroutine and ends when the stream does.
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=rpc_attributes(name))
        try:
            call = await continuation(
                _with_trace_context(details, trace.set_span_in_context(span)), request
            )
        except BaseException:
            span.end()
            raise
        return _traced_stream(call, span)


async def _traced_stream(call: Any, span: trace.Span) -> AsyncIterator[Any]:
    status: Any = None
    try:
        async for response in call:
            yield response
        status = grpc.StatusCode.OK
    except grpc.aio.AioRpcError as err:
        status = err.code()
        record_status(span, status, err.details())
        raise
    finally:
        if status is None:
            # The caller stopped reading (or was cancelled): end the call rather than leave the
            # server writing into a stream nobody reads.
            call.cancel()
            status = grpc.StatusCode.CANCELLED
            record_status(span, status)
        elif status == grpc.StatusCode.OK:
            record_status(span, status)
        span.end()


def _with_trace_context(details: Any, context: Context | None) -> Any:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    for key, value in carrier.items():
        metadata.add(key, value)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )
