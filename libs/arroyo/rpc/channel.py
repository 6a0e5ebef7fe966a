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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
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


def channel(
    address: str,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    options: Sequence[tuple[str, Any]] = (),
    tls: TlsIdentity | None = None,
) -> Any:
    """A ``grpc.aio.Channel`` to ``host:port`` with the client tracing interceptor: mutual TLS
    with ``tls``, plaintext without (see the module).

    Call it on the event loop that will use the channel (grpc.aio binds a channel to the loop
    it was made on). Spans go to ``tracer_provider``, by default the process's global one (the
    one ``arroyo.service.serve`` installs). ``options`` are appended to ``CHANNEL_OPTIONS``;
    later entries win. The caller closes the channel (``await channel.close()``).
    """
    interceptors = [ClientTracingInterceptor(tracer_provider)]
    if tls is None:
        return grpc.aio.insecure_channel(
            address, options=[*CHANNEL_OPTIONS, *options], interceptors=interceptors
        )
    return grpc.aio.secure_channel(
        address,
        channel_credentials(tls),
        options=[*CHANNEL_OPTIONS, *options],
        interceptors=interceptors,
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
