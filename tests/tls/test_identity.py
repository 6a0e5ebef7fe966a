"""arroyo.tls.load_identity and the api's HTTPS certificate: every bad file is refused before
anything listens, with an error that names the config key and the file."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from arroyo.api.https import https_context, https_enabled
from arroyo.config import Config, TlsConfig, load_config
from arroyo.tls import TlsError, load_identity
from arroyo.tls.authority import ServiceCertificate, ensure_certificates
from tests.tls import tls_config


@pytest.fixture
def files(tmp_path: Path) -> ServiceCertificate:
    return ensure_certificates(tmp_path / "ours", ["node"]).services["node"]


def refusal(config: Config) -> str:
    with pytest.raises(TlsError) as refused:
        load_identity(config)
    assert refused.value.code == "bad_tls"
    return refused.value.message


def test_none_is_plaintext_and_all_three_from_the_environment(
    tmp_path: Path, files: ServiceCertificate
) -> None:
    assert load_identity(Config()) is None
    environ = {
        "ARROYO__DATA_DIR": str(files.cert_file.parent),
        # Relative paths are under data_dir.
        "ARROYO__TLS__CERT_FILE": files.cert_file.name,
        "ARROYO__TLS__KEY_FILE": files.key_file.name,
        "ARROYO__TLS__CA_FILE": str(files.ca_file),
    }
    loaded = load_identity(load_config(environ=environ, cwd=tmp_path))
    assert loaded is not None
    assert loaded.cert_file == files.cert_file
    assert loaded.key_pem == files.key_file.read_bytes()
    assert "PRIVATE" not in repr(loaded)


def test_bad_files_are_named(tmp_path: Path, files: ServiceCertificate) -> None:
    good = tls_config(files)
    half = Config(tls=TlsConfig(cert_file=files.cert_file))
    assert refusal(half).startswith("tls.key_file and tls.ca_file not set beside tls.cert_file")

    missing = tmp_path / "nowhere.pem"
    tls = good.tls.model_copy(update={"ca_file": missing})
    assert refusal(good.model_copy(update={"tls": tls})) == f"tls.ca_file: {missing} does not exist"

    not_pem = tmp_path / "junk.pem"
    not_pem.write_text("not a certificate")
    tls = good.tls.model_copy(update={"cert_file": not_pem})
    assert refusal(good.model_copy(update={"tls": tls})) == (
        f"tls.cert_file: {not_pem} holds no PEM certificate"
    )

    # Another service's key.
    other = ensure_certificates(files.cert_file.parent, ["api"]).services["api"]
    tls = good.tls.model_copy(update={"key_file": other.key_file})
    assert refusal(good.model_copy(update={"tls": tls})) == (
        f"tls.key_file: {other.key_file} is not the key of the certificate in "
        f"{files.cert_file} (tls.cert_file)"
    )


def test_expired_and_foreign_certificates_are_refused(
    tmp_path: Path, files: ServiceCertificate
) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=900)
    expired = ensure_certificates(tmp_path / "old", ["node"], now=long_ago).services["node"]
    message = refusal(tls_config(expired))
    assert message.startswith(f"tls.cert_file: the certificate in {expired.cert_file} (")
    assert " expired at " in message

    # Our certificate and key, but a CA that did not sign them.
    foreign = ensure_certificates(tmp_path / "theirs", ["node"]).services["node"]
    config = tls_config(files)
    tls = config.tls.model_copy(update={"ca_file": foreign.ca_file})
    message = refusal(config.model_copy(update={"tls": tls}))
    assert message.startswith(f"tls.cert_file: the certificate in {files.cert_file}")
    assert f"is not signed by the CA in tls.ca_file ({foreign.ca_file})" in message


def test_https_on_the_api(tmp_path: Path, files: ServiceCertificate) -> None:
    # Off by default on loopback, on by default beyond it when there is a certificate.
    assert not https_enabled(tls_config(files))
    assert https_enabled(tls_config(files, bind_host="0.0.0.0"))
    assert not https_enabled(Config(api=Config().api.model_copy(update={"bind_host": "0.0.0.0"})))
    assert https_context(tls_config(files, https=False, bind_host="0.0.0.0")) is None
    context = https_context(tls_config(files, https=True))
    assert isinstance(context, ssl.SSLContext)
    # Asked for without a certificate, or with half of one of its own.
    with pytest.raises(TlsError, match=r"^api\.https is true but there is no certificate"):
        https_context(Config(api=Config().api.model_copy(update={"https": True})))
    half = tls_config(files, https_cert_file=files.cert_file)
    with pytest.raises(
        TlsError, match=r"^api\.https_cert_file is set but api\.https_key_file is not"
    ):
        https_context(half)
