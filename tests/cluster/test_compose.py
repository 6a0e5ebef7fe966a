"""docker-compose.yml, without a Docker engine: its structure checked, its environment loaded as
the services' config, and its services run as local processes with the file's own commands and
environment (host names, ports and the CA's volume mapped onto loopback and the test's
directory), against a real PostgreSQL: its certificates made by its `certs` service, the
services talking mutual TLS, the api HTTPS."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml

from arroyo.config import load_config
from arroyo.testing.ports import free_port
from arroyo.tls import client_context
from tests.cluster.harness import ApiError, Cluster, fresh_postgres_database

ROOT = Path(__file__).resolve().parents[2]
ARROYO_SERVICES = ("certs", "migrate", "controller", "compiler", "node", "api")
ONE_SHOT = ("certs", "migrate")
CA_VOLUME = "/var/lib/arroyo-ca"
HOSTS = ("postgres", "controller", "compiler", "node", "api", "spark-master")


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def dependencies(services: dict[str, Any], name: str) -> set[str]:
    """What ``name`` waits for, directly or through what it waits for."""
    found: set[str] = set()
    todo = [name]
    while todo:
        for dependency in services[todo.pop()].get("depends_on") or {}:
            if dependency not in found:
                found.add(dependency)
                todo.append(dependency)
    return found


def test_compose_file_is_well_formed() -> None:
    spec = compose()
    services = spec["services"]
    assert set(ARROYO_SERVICES) | {"postgres", "spark-master", "spark-worker"} == set(services)
    for name, service in services.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            assert condition["condition"] in {
                "service_healthy",
                "service_started",
                "service_completed_successfully",
            }
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{dependency} has no healthcheck"
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in spec["volumes"], volume
    for name in ARROYO_SERVICES:
        service = services[name]
        assert service["command"][0] in set(ARROYO_SERVICES)
        # What each container gets is a valid configuration: no unknown or ill-typed key.
        config = load_config(environ=service["environment"], cwd=ROOT / "tests")
        assert config.database.url.startswith("postgresql://")
        if name not in ONE_SHOT:
            # Its own certificate, made by `certs` before it starts.
            assert config.tls.cert_file == Path(f"tls/{name}.pem"), name
            assert config.tls.key_file and config.tls.ca_file, name
            assert "certs" in dependencies(services, name), name
    # Only `certs` holds the CA's key.
    assert [
        n for n, s in services.items() if any(CA_VOLUME in v for v in s.get("volumes", []))
    ] == ["certs"]
    for name in ("controller", "compiler", "node", "api"):
        health = services[name]["healthcheck"]
        port = services[name]["environment"].get("HEALTH_PORT", "5126")
        admin = services[name]["environment"][f"ARROYO__{name.upper()}__ADMIN_PORT"]
        assert port == admin, f"{name}'s health check probes {port}, its admin port is {admin}"
        assert "/status" in " ".join(health["test"])


def localise(
    environment: dict[str, str], ports: dict[str, str], database_url: str, root: Path
) -> dict[str, str]:
    """A container's environment for a process on this machine: every host is 127.0.0.1 and
    every port the file names is the free one ``ports`` maps it to."""

    def local(key: str, value: str) -> str:
        if key == "ARROYO__DATABASE__URL":
            return database_url
        if key == "ARROYO__DATA_DIR":
            return str(root / "data")
        if key.startswith("ARROYO__TLS__"):
            return value  # files under the data directory, named after the services
        if value == "0.0.0.0":
            return "127.0.0.1"
        value = re.sub(rf"\b({'|'.join(map(re.escape, HOSTS))})\b", "127.0.0.1", value)
        return re.sub(r"\b\d{4,5}\b", lambda m: ports.get(m.group(0), m.group(0)), value)

    return {key: local(key, value) for key, value in environment.items()}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.xdist_group("cluster")
def test_compose_services_run_a_pipeline_as_local_processes(
    tmp_path: Path, postgres_url: str
) -> None:
    spec = compose()["services"]
    database = fresh_postgres_database(postgres_url)
    ports = {
        value: str(free_port())
        for key, value in spec["api"]["environment"].items()
        if key.endswith("_PORT")
    }
    cluster = Cluster(tmp_path, database)
    # The key the file asks for (docker compose would refuse to start without ARROYO_API_KEY).
    cluster.api_key = secrets.token_hex(32)
    spec["api"]["environment"]["ARROYO__API__BOOTSTRAP_KEY"] = cluster.api_key
    base_env = dict(cluster.env)
    api = localise(spec["api"]["environment"], ports, database, tmp_path)
    cluster.api_url = f"https://127.0.0.1:{api['ARROYO__API__PORT']}/api/v1"
    try:
        for name in ARROYO_SERVICES:
            cluster.env = {
                **base_env,
                **localise(spec[name]["environment"], ports, database, tmp_path),
            }
            command = [
                arg.replace(CA_VOLUME, str(tmp_path / "ca")) for arg in spec[name]["command"]
            ]
            cluster.start(name, command)
            if name in ONE_SHOT:
                assert cluster.processes.pop(name).wait(120) == 0, cluster.logs()
        assert (tmp_path / "ca" / "ca-key.pem").exists()
        assert not (tmp_path / "data" / "tls" / "ca-key.pem").exists()
        cluster.ssl_context = client_context(tmp_path / "data" / "tls" / "ca.pem")
        for name in ("controller", "compiler", "node", "api"):
            cluster.wait_ready(name)
        output = tmp_path / "out.json"
        query = f"""
        CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000',
            message_count = '100', event_time_interval = '10 milliseconds');
        CREATE TABLE out WITH (connector = 'single_file', path = '{output}', type = 'sink');
        INSERT INTO out SELECT tumble(interval '1 second') AS window, count(*) AS n
        FROM impulse GROUP BY window;
        """
        # The api requires the key (on loopback too, here: a key exists).
        cluster.api_key, key = None, cluster.api_key
        with pytest.raises(ApiError) as refused:
            cluster.call("GET", "/pipelines")
        assert refused.value.status == 401
        cluster.api_key = key
        pid = cluster.call("POST", "/pipelines", {"name": "compose", "query": query})["id"]
        job = cluster.wait_state(pid, "Finished", "Failed")
        assert job["state"] == "Finished", job
        assert sum(json.loads(line)["n"] for line in output.read_text().splitlines()) == 100
    finally:
        cluster.shutdown()
