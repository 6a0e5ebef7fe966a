"""arroyo.tls.authority: a CA and per-service certificates made once, kept while they serve,
made again when they do not."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509

from arroyo.tls.authority import RENEW_BEFORE, SERVICE_VALID, ensure_certificates
from tests.tls import identity

SERVICES = ("api", "controller")


def names(path: Path) -> set[str]:
    certificate = x509.load_pem_x509_certificate(path.read_bytes())
    alternatives = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return {str(n.value) for n in alternatives.value}


def test_made_at_first_start_then_kept(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path, SERVICES, hosts=["node-7.example", "0.0.0.0"])
    assert len(first.written) == 2 + 2 * len(SERVICES)
    api = first.services["api"]
    assert names(api.cert_file) == {"api", "localhost", "127.0.0.1", "::1", "node-7.example"}
    for path in (api.key_file, first.services["controller"].key_file, tmp_path / "ca-key.pem"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # Each service's files make an identity its peers accept (load_identity checks the chain).
    assert identity(api).ca_pem == first.ca_file.read_bytes()

    again = ensure_certificates(tmp_path, SERVICES, hosts=["node-7.example"])
    assert again.written == []
    assert again.services == first.services


def test_made_again_when_they_no_longer_serve(tmp_path: Path) -> None:
    made = ensure_certificates(tmp_path, SERVICES)
    ca = made.ca_file.read_bytes()
    # A host now asked for: the services' certificates again, under the same CA.
    wider = ensure_certificates(tmp_path, SERVICES, hosts=["arroyo.internal"])
    assert set(wider.written) == {
        f for s in wider.services.values() for f in (s.cert_file, s.key_file)
    }
    assert made.ca_file.read_bytes() == ca
    assert "arroyo.internal" in names(wider.services["api"].cert_file)
    # Near their end: made again.
    later = datetime.now(UTC) + SERVICE_VALID - RENEW_BEFORE + timedelta(days=1)
    renewed = ensure_certificates(tmp_path, SERVICES, hosts=["arroyo.internal"], now=later)
    assert len(renewed.written) == 2 * len(SERVICES)
    # The CA gone: a new one, and every certificate signed by it.
    made.ca_file.unlink()
    fresh = ensure_certificates(tmp_path, SERVICES)
    assert made.ca_file.read_bytes() != ca
    assert len(fresh.written) == 2 + 2 * len(SERVICES)
    identity(fresh.services["controller"])
