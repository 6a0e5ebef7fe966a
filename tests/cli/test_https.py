"""TLS from the command line, as real processes: ``arroyo certs`` makes a CA and the services'
certificates (and keeps them); ``arroyo api`` serves HTTPS with its certificate, to clients
that trust the CA (the CLI's readiness check, a browser's page load), and nothing to plain HTTP;
a service given a bad certificate says which and exits, with no traceback."""

from __future__ import annotations

import http.client
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from arroyo.testing.ports import free_port, service_ports
from arroyo.testing.processes import stop
from arroyo.tls import client_context
from arroyo.tls.authority import ServiceCertificate
from arroyo_cli.cluster import _status
from tests.waiting import wait_until

ARROYO = [sys.executable, "-m", "arroyo_cli.main"]


def arroyo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ARROYO, *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_certs_then_an_https_api(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        **os.environ,
        "ARROYO__DATA_DIR": str(data),
        # Nothing answers there: the api starts without them (and says so in its status).
        "ARROYO__COMPILER__ADDRESS": f"127.0.0.1:{free_port()}",
        "ARROYO__CONTROLLER__ADDRESS": f"127.0.0.1:{free_port()}",
        **service_ports(["api"]),
    }
    made = arroyo("certs", env=env)
    assert made.returncode == 0, made.stderr
    assert f"CA: {data / 'tls' / 'ca.pem'} (made)" in made.stdout
    kept = arroyo("certs", env=env)
    assert f"api: {data / 'tls' / 'api.pem'}, {data / 'tls' / 'api-key.pem'} (kept)" in kept.stdout

    files = ServiceCertificate(
        "api", data / "tls" / "api.pem", data / "tls" / "api-key.pem", data / "tls" / "ca.pem"
    )
    env |= {**files.environment(), "ARROYO__API__HTTPS": "true"}
    port = env["ARROYO__API__PORT"]
    log = (tmp_path / "api.log").open("wb")
    api = subprocess.Popen(
        [*ARROYO, "api"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
    )
    trusting = client_context(files.ca_file)
    try:

        def status() -> tuple[bool, str] | None:
            assert api.poll() is None, (tmp_path / "api.log").read_text()
            ready, why_not = _status(f"https://127.0.0.1:{port}/api/v1/status", trusting)
            return None if why_not.startswith("the api is not answering") else (ready, why_not)

        # The CLI's client (arroyo cluster's readiness check) trusts the CA and is answered.
        ready, why_not = wait_until("the api over HTTPS", status, 60)
        assert not ready and "compiler" in why_not
        # So is a browser's page load, by name (the certificate names localhost).
        page = urllib.request.urlopen(f"https://localhost:{port}/", context=trusting, timeout=10)
        assert page.status == 200 and b"<html" in page.read().lower()

        # A client that does not trust the CA refuses the api...
        with pytest.raises(urllib.error.URLError) as distrusted:
            urllib.request.urlopen(
                f"https://127.0.0.1:{port}/api/v1/ping", context=ssl.create_default_context()
            )
        assert isinstance(distrusted.value.reason, ssl.SSLCertVerificationError)
        # ... and plain HTTP gets no answer.
        plain = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            plain.request("GET", "/api/v1/ping")
            plain.getresponse()
        plain.close()
    finally:
        stop(api, timeout=30)
        log.close()


def test_a_service_with_a_bad_certificate_says_which_and_exits(tmp_path: Path) -> None:
    missing = tmp_path / "controller.pem"
    env = {
        **os.environ,
        "ARROYO__DATA_DIR": str(tmp_path),
        "ARROYO__TLS__CERT_FILE": str(missing),
        "ARROYO__TLS__KEY_FILE": str(tmp_path / "controller-key.pem"),
        "ARROYO__TLS__CA_FILE": str(tmp_path / "ca.pem"),
    }
    refused = arroyo("controller", env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip() == f"error[bad_tls]: tls.cert_file: {missing} does not exist"
