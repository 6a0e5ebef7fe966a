"""A process's TLS identity from config, checked before anything listens or dials.

``load_identity(config)`` reads ``config.tls`` (all three files, or none: plaintext) once, when
a service starts, and checks what gRPC would otherwise report as a bare handshake failure at
the first call: a file that is missing or unreadable, not PEM, a certificate expired or not yet
valid, a key that is not the certificate's, a certificate the CA did not sign. Each is a
``TlsError`` (``error[bad_tls]``) naming the config key and the file. A certificate that
expires while the service runs is not noticed until it restarts.
"""

from __future__ import annotations

import itertools
import ssl
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from arroyo.config import Config, ConfigError


class TlsError(ConfigError):
    """A certificate, key or CA that cannot serve; the message names the key and the file."""

    code = "bad_tls"


@dataclass(frozen=True, slots=True)
class TlsIdentity:
    """Who this process is to its peers (``cert_pem``, a chain whose first certificate is its
    own, and ``key_pem``), and whom it accepts (``ca_pem``): the same pair serves as server
    and as client. Made by ``load_identity``, which checked it; the files are kept for
    ``ssl`` contexts, which load from files."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)
    ca_pem: bytes
    cert_file: Path
    key_file: Path
    ca_file: Path


def load_identity(config: Config) -> TlsIdentity | None:
    """``config.tls`` read and checked, or None when it names no file (plaintext).

    Called by the service bootstrap (the gRPC server), by each service for its clients, and by
    ``arroyo <service>`` before the service starts, so that a bad file is a one-line error
    rather than a failed start. Raises ``TlsError``."""
    tls = config.tls
    named = {"cert_file": tls.cert_file, "key_file": tls.key_file, "ca_file": tls.ca_file}
    given = [f"tls.{key}" for key, path in named.items() if path is not None]
    if not given:
        return None
    if len(given) < len(named):
        missing = [f"tls.{key}" for key, path in named.items() if path is None]
        raise TlsError(
            f"{' and '.join(missing)} not set beside {' and '.join(given)}: mutual TLS needs "
            "the certificate, its key and the CA (all three, or none for plaintext)"
        )
    assert tls.cert_file and tls.key_file and tls.ca_file
    cert_file = config.resolve(tls.cert_file)
    key_file = config.resolve(tls.key_file)
    ca_file = config.resolve(tls.ca_file)
    cert_pem, chain = _certificates("tls.cert_file", cert_file)
    key_pem, key = _private_key("tls.key_file", key_file)
    ca_pem, authorities = _certificates("tls.ca_file", ca_file)
    _check_current("tls.cert_file", cert_file, chain[0])
    for authority in authorities:
        _check_current("tls.ca_file", ca_file, authority)
    _check_pair(("tls.cert_file", cert_file), ("tls.key_file", key_file), chain[0], key)
    _check_issued(cert_file, chain, ca_file, authorities)
    return TlsIdentity(cert_pem, key_pem, ca_pem, cert_file, key_file, ca_file)


def server_context(
    cert_file: Path,
    key_file: Path,
    *,
    names: tuple[str, str] = ("api.https_cert_file", "api.https_key_file"),
) -> ssl.SSLContext:
    """An HTTPS server's context (the api's): ``cert_file``'s chain and ``key_file``, checked
    as ``load_identity`` checks them (no CA: browsers judge it); clients show no certificate.
    ``names`` are the config keys the files came from, for the errors."""
    _, chain = _certificates(names[0], cert_file)
    _, key = _private_key(names[1], key_file)
    _check_current(names[0], cert_file, chain[0])
    _check_pair((names[0], cert_file), (names[1], key_file), chain[0], key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        raise TlsError(f"{names[0]}: {cert_file} with {key_file}: {err}") from err
    return context


def client_context(ca_file: Path | None) -> ssl.SSLContext:
    """An HTTPS client's context that trusts ``ca_file`` (the deployment's CA), or the system's
    CAs when None; host names are checked."""
    try:
        return ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    except (OSError, ssl.SSLError) as err:
        raise TlsError(f"CA file {ca_file}: {err}") from err


def _read(name: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as err:
        raise TlsError(f"{name}: {path} does not exist") from err
    except IsADirectoryError as err:
        raise TlsError(f"{name}: {path} is a directory, not a PEM file") from err
    except OSError as err:
        raise TlsError(f"{name}: cannot read {path}: {err.strerror}") from err


def _certificates(name: str, path: Path) -> tuple[bytes, list[x509.Certificate]]:
    pem = _read(name, path)
    try:
        return pem, x509.load_pem_x509_certificates(pem)
    except ValueError as err:
        raise TlsError(f"{name}: {path} holds no PEM certificate") from err


def _private_key(name: str, path: Path) -> tuple[bytes, PrivateKeyTypes]:
    pem = _read(name, path)
    try:
        return pem, serialization.load_pem_private_key(pem, password=None)
    except TypeError as err:
        raise TlsError(f"{name}: {path} is encrypted; give an unencrypted key") from err
    except (ValueError, UnsupportedAlgorithm) as err:
        raise TlsError(f"{name}: {path} holds no PEM private key") from err


def _check_current(name: str, path: Path, certificate: x509.Certificate) -> None:
    now = datetime.now(UTC)
    subject = certificate.subject.rfc4514_string()
    if now > certificate.not_valid_after_utc:
        expired = certificate.not_valid_after_utc.isoformat(timespec="seconds")
        raise TlsError(f"{name}: the certificate in {path} ({subject}) expired at {expired}")
    if now < certificate.not_valid_before_utc:
        begins = certificate.not_valid_before_utc.isoformat(timespec="seconds")
        raise TlsError(
            f"{name}: the certificate in {path} ({subject}) is not valid before {begins}"
        )


def _check_pair(
    cert: tuple[str, Path], key: tuple[str, Path], certificate: x509.Certificate, private: object
) -> None:
    public = getattr(private, "public_key", None)
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if public is None or public().public_bytes(*spki) != certificate.public_key().public_bytes(
        *spki
    ):
        raise TlsError(
            f"{key[0]}: {key[1]} is not the key of the certificate in {cert[1]} ({cert[0]})"
        )


def _issued(child: x509.Certificate, parent: x509.Certificate) -> bool:
    try:
        child.verify_directly_issued_by(parent)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _check_issued(
    cert_file: Path,
    chain: list[x509.Certificate],
    ca_file: Path,
    authorities: list[x509.Certificate],
) -> None:
    """The chain links up (each certificate signed by the next) to a certificate of the CA
    file, or ends in one."""
    for child, parent in itertools.pairwise(chain):
        if not _issued(child, parent):
            raise TlsError(
                f"tls.cert_file: in {cert_file}, {child.subject.rfc4514_string()} is not signed "
                f"by the next certificate, {parent.subject.rfc4514_string()}"
            )
    last = chain[-1]
    if not any(last == ca or _issued(last, ca) for ca in authorities):
        raise TlsError(
            f"tls.cert_file: the certificate in {cert_file} ({chain[0].subject.rfc4514_string()})"
            f" is not signed by the CA in tls.ca_file ({ca_file}); peers that trust that CA "
            "would refuse it"
        )
