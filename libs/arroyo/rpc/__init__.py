"""gRPC between Arroyo's services: channels, the server interceptor, errors, typed clients.

Domain code calls other services through the facades (``ControllerClient``, ``WorkerClient``,
``NodeClient``, ``CompilerClient``) and never through the generated stubs; servicers raise
``ArroyoError`` subclasses and never set gRPC status codes. The translation between the two is
``arroyo.rpc.status``, and nowhere else.
"""

from arroyo.rpc.channel import CHANNEL_OPTIONS, ClientTracingInterceptor, channel
from arroyo.rpc.clients import (
    DEFAULT_TIMEOUT_S,
    CompilerClient,
    ControllerClient,
    NodeClient,
    WorkerClient,
)
from arroyo.rpc.server import ServerInterceptor
from arroyo.rpc.status import (
    NOT_FOUND,
    STALE_GENERATION,
    UNAVAILABLE,
    RpcError,
    call,
    error_metadata,
    status_for,
    translate,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_TIMEOUT_S",
    "NOT_FOUND",
    "STALE_GENERATION",
    "UNAVAILABLE",
    "ClientTracingInterceptor",
    "CompilerClient",
    "ControllerClient",
    "NodeClient",
    "RpcError",
    "ServerInterceptor",
    "WorkerClient",
    "call",
    "channel",
    "error_metadata",
    "status_for",
    "translate",
]
