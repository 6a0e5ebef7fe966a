"""Whether the api serves HTTPS, and with which certificate.

``api.https``: true serves HTTPS (a certificate is then required), false plain HTTP; unset
(the default) serves HTTPS when ``api.https_cert_file`` is given, or when the api listens
beyond loopback and the service has a certificate (``tls``): TLS by default off loopback, as API
keys are (``arroyo.api.auth``), and plain HTTP on loopback, where a browser would otherwise
warn about a CA it does not know. The certificate is ``api.https_cert_file`` and
``api.https_key_file`` (one that browsers trust, say), else the service's own ``tls.cert_file``
and ``tls.key_file``. Clients show no certificate to the api: its callers are browsers and
scripts, authenticated by API key. A client that speaks plain HTTP to an HTTPS api gets no
answer (the handshake fails).
"""

from __future__ import annotations

import ssl
from pathlib import Path

from arroyo.api.auth import is_loopback
from arroyo.config import Config
from arroyo.tls import TlsError, server_context

_HTTPS_KEYS = ("api.https_cert_file", "api.https_key_file")
_TLS_KEYS = ("tls.cert_file", "tls.key_file")


def https_certificate(config: Config) -> tuple[Path, Path, tuple[str, str]] | None:
    """The api's HTTPS certificate and key files (resolved), with the keys they came from; None
    when neither pair is configured. A half-given pair is a ``TlsError``."""
    api = config.api
    for (cert, key), names in (
        ((api.https_cert_file, api.https_key_file), _HTTPS_KEYS),
        ((config.tls.cert_file, config.tls.key_file), _TLS_KEYS),
    ):
        if cert is not None and key is not None:
            return config.resolve(cert), config.resolve(key), names
        if cert is not None or key is not None:
            given, missing = names if cert is not None else names[::-1]
            raise TlsError(f"{given} is set but {missing} is not: HTTPS needs both")
    return None


def https_enabled(config: Config) -> bool:
    """Whether the api serves HTTPS under ``config`` (see the module)."""
    if config.api.https is not None:
        return config.api.https
    if config.api.https_cert_file is not None:
        return True
    return config.tls.cert_file is not None and not is_loopback(config.api.bind_host)


def https_context(config: Config) -> ssl.SSLContext | None:
    """The api's HTTPS context, or None for plain HTTP. Raises ``TlsError`` naming the key and
    file when the certificate cannot serve, or HTTPS is asked for without one."""
    certificate = https_certificate(config)
    if not https_enabled(config):
        return None
    if certificate is None:
        raise TlsError(
            "api.https is true but there is no certificate: set api.https_cert_file and "
            "api.https_key_file, or tls.cert_file and tls.key_file"
        )
    cert_file, key_file, names = certificate
    return server_context(cert_file, key_file, names=names)
