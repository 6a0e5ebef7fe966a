"""A deployment's own CA and its services' certificates, made at first start and kept.

``ensure_certificates(directory, services)`` is what ``arroyo cluster``, ``arroyo certs`` and
docker-compose.yml's ``certs`` service run: in ``directory`` it makes a CA (``ca.pem``, and its
key ``ca-key.pem`` or ``ca_key_file``) and, per service, ``<service>.pem`` and
``<service>-key.pem``, each signed by the CA. On later starts it reuses every file that still
serves, and makes again only what does not: a certificate within ``RENEW_BEFORE`` of its end,
one that lacks a host name now asked for, one of another CA; a new CA (the old one missing,
unreadable or ending) means new certificates for every service. Keys are written mode 0600,
whole (a reader never sees half a file); processes that start at once take turns on a lock.

Keys are ECDSA P-256, signatures SHA-256, all through ``cryptography``. A service's certificate
serves as server and as client (extended key usage both) and names, as subject alternative
names, the service itself (its host name in a container network), ``localhost``, 127.0.0.1, ::1
and the ``hosts`` given. The CA can sign only end certificates (path length 0).
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from arroyo.filelock import file_lock

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
CA_VALID = timedelta(days=3650)
SERVICE_VALID = timedelta(days=825)
# A certificate this close to its end is made again at the next start.
RENEW_BEFORE = timedelta(days=30)
_ALWAYS = ("localhost", "127.0.0.1", "::1")
# Bind-every-interface addresses: no peer dials them.
_NOT_HOSTS = ("", "0.0.0.0", "::", "*")


@dataclass(frozen=True, slots=True)
class ServiceCertificate:
    """One service's files: its certificate and key, and the CA's certificate."""

    service: str
    cert_file: Path
    key_file: Path
    ca_file: Path

    def environment(self) -> dict[str, str]:
        """The ``ARROYO__TLS__*`` variables that give a service these files."""
        return {
            "ARROYO__TLS__CERT_FILE": str(self.cert_file),
            "ARROYO__TLS__KEY_FILE": str(self.key_file),
            "ARROYO__TLS__CA_FILE": str(self.ca_file),
        }


@dataclass(frozen=True, slots=True)
class CertificateSet:
    """What ``ensure_certificates`` left in place: each service's files, and which files it
    wrote now (empty when all were reused)."""

    ca_file: Path
    services: dict[str, ServiceCertificate]
    written: list[Path] = field(default_factory=list)


def ensure_certificates(
    directory: Path,
    services: Sequence[str],
    *,
    hosts: Iterable[str] = (),
    ca_key_file: Path | None = None,
    now: datetime | None = None,
) -> CertificateSet:
    """The CA and a certificate per service in ``directory``, made or reused; see the module.
    ``hosts``: more names or addresses every certificate names (where peers dial)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key_file = ca_key_file or directory / CA_KEY
    ca_key_file.parent.mkdir(parents=True, exist_ok=True)
    now = now or datetime.now(UTC)
    wanted_hosts = _hosts(hosts)
    written: list[Path] = []
    with file_lock(directory / ".lock"):
        ca_file = directory / CA_CERT
        authority = _usable_authority(ca_file, ca_key_file, now)
        if authority is None:
            authority = _new_authority(now)
            _write(ca_key_file, _key_pem(authority[1]), 0o600)
            _write(ca_file, authority[0].public_bytes(serialization.Encoding.PEM), 0o644)
            written += [ca_file, ca_key_file]
        certificates: dict[str, ServiceCertificate] = {}
        for service in services:
            files = ServiceCertificate(
                service, directory / f"{service}.pem", directory / f"{service}-key.pem", ca_file
            )
            names = (service, *wanted_hosts)
            if not _usable(files, authority[0], names, now):
                certificate, key = _issue(service, names, authority, now)
                _write(files.key_file, _key_pem(key), 0o600)
                _write(files.cert_file, certificate.public_bytes(serialization.Encoding.PEM), 0o644)
                written += [files.cert_file, files.key_file]
            certificates[service] = files
    return CertificateSet(ca_file, certificates, written)


def _hosts(hosts: Iterable[str]) -> tuple[str, ...]:
    found = list(_ALWAYS)
    for given in hosts:
        host = given.strip().strip("[]")
        if host not in _NOT_HOSTS and host not in found:
            found.append(host)
    return tuple(found)


def _alternative_names(names: Iterable[str]) -> list[x509.GeneralName]:
    alternatives: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    return alternatives


def _new_authority(now: datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Arroyo"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"Arroyo local CA {now:%Y-%m-%d}"),
        ]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + CA_VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(signs_certificates=True),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def _issue(
    service: str,
    names: Sequence[str],
    authority: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    now: datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca, ca_key = authority
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Arroyo"),
            x509.NameAttribute(NameOID.COMMON_NAME, service),
        ]
    )
    not_after = min(now + SERVICE_VALID, ca.not_valid_after_utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            _key_usage(signs_certificates=False),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(_alternative_names(names)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return certificate, key


def _load(
    cert_file: Path, key_file: Path
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The certificate and key, when both read, parse, and belong together."""
    try:
        certificate = x509.load_pem_x509_certificate(cert_file.read_bytes())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != certificate.public_key().public_bytes(*spki):
        return None
    return certificate, key


def _current(certificate: x509.Certificate, now: datetime) -> bool:
    return (
        certificate.not_valid_before_utc <= now
        and certificate.not_valid_after_utc - now > RENEW_BEFORE
    )


def _usable_authority(
    ca_file: Path, ca_key_file: Path, now: datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    loaded = _load(ca_file, ca_key_file)
    if loaded is None or not _current(loaded[0], now):
        return None
    try:
        constraints = loaded[0].extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return None
    return loaded if constraints.ca else None


def _usable(
    files: ServiceCertificate, ca: x509.Certificate, names: Sequence[str], now: datetime
) -> bool:
    loaded = _load(files.cert_file, files.key_file)
    if loaded is None or not _current(loaded[0], now):
        return False
    certificate = loaded[0]
    try:
        certificate.verify_directly_issued_by(ca)
        alternatives = certificate.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    return set(_alternative_names(names)) <= set(alternatives)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    """Written under another name with its mode set, then renamed over ``path``: a key is never
    readable by others, even for a moment, and a reader sees the old file or the new one."""
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """Signatures, and for a CA the signing of certificates and revocation lists."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )
