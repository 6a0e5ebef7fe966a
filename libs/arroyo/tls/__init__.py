"""TLS for Arroyo's own traffic: mutual TLS between the services, HTTPS on the api.

``identity``: a process's certificate, key and trusted CA from ``config.tls``, read and checked
once at start (``load_identity``), and the ``ssl`` contexts made of them. ``authority``: the
local CA and per-service certificates that ``arroyo cluster``, ``arroyo certs`` and
docker-compose.yml make at first start and reuse after. The gRPC side of both (credentials for
channels and servers) is in ``arroyo.rpc.channel`` and ``arroyo.service.bootstrap``.

Trust model: one CA per deployment. Every certificate it signs is a service of the deployment,
accepted by every other service as client and as server; a peer whose certificate it did not
sign, or that shows none, is refused during the handshake. Server names are checked against the
certificate's subject alternative names, as a browser does.
"""

from arroyo.tls.identity import (
    TlsError,
    TlsIdentity,
    client_context,
    load_identity,
    server_context,
)

__all__ = [
    "TlsError",
    "TlsIdentity",
    "client_context",
    "load_identity",
    "server_context",
]
