"""A local certificate authority and a server certificate it signed, for the test servers'
TLS listeners (MQTT, Kafka), made with the ``cryptography`` library in milliseconds.

Clients trust the CA file; the server certificate names its host both as an IP address and as a
DNS name, since clients differ in which they match a numeric host against (Java and Python's
``ssl`` the IP address, librdkafka's OpenSSL hostname check the name). Valid for a day.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
from pathlib import Path
from typing import NamedTuple


class Certificates(NamedTuple):
    """PEM files: the CA's certificate, the server's certificate, and its unencrypted key."""

    ca: Path
    cert: Path
    key: Path


def write_certificates(root: Path, host: str) -> Certificates:
    """Write a new CA and a certificate for ``host`` (a name or an IP address) that it signed
    into ``root`` (``ca.pem``, ``server.pem``, ``server.key``), replacing any there."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "arroyo test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = [x509.DNSName(host)]
    with contextlib.suppress(ValueError):  # not an IP address
        names.append(x509.IPAddress(ipaddress.ip_address(host)))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    root.mkdir(parents=True, exist_ok=True)
    paths = Certificates(root / "ca.pem", root / "server.pem", root / "server.key")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths
