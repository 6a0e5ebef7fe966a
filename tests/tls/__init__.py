"""Tests of arroyo.tls: identities from config (and what is refused), the local CA; and what
they make of the services' traffic (tests/rpc/test_mutual_tls.py, tests/cli/test_https.py)."""

from __future__ import annotations

from pathlib import Path

from arroyo.config import Config, TlsConfig
from arroyo.tls import TlsIdentity, load_identity
from arroyo.tls.authority import ServiceCertificate


def tls_config(files: ServiceCertificate, data_dir: Path | None = None, **api: object) -> Config:
    """A config whose ``tls`` section names ``files`` (and whose api section has ``api``)."""
    config = Config(
        tls=TlsConfig(cert_file=files.cert_file, key_file=files.key_file, ca_file=files.ca_file)
    )
    updates: dict[str, object] = {"api": config.api.model_copy(update=api)}
    if data_dir is not None:
        updates["data_dir"] = data_dir
    return config.model_copy(update=updates)


def identity(files: ServiceCertificate) -> TlsIdentity:
    loaded = load_identity(tls_config(files))
    assert loaded is not None
    return loaded
