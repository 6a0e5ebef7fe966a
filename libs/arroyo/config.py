"""Layered, typed configuration for every service.

Layers, later ones winning: the defaults below, ``arroyo.toml`` in the working directory,
the file given with ``--config``, then ``ARROYO__SECTION__KEY`` environment variables (e.g.
``ARROYO__DATABASE__URL``). Unknown keys in any layer are errors naming the key and the layer.
Services receive the ``Config`` object; none reads the environment itself.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from arroyo.errors import ArroyoError, ErrorDomain

ENV_PREFIX = "ARROYO__"
DEFAULT_FILE = Path("arroyo.toml")


class ConfigError(ArroyoError):
    code = "bad_config"
    domain = ErrorDomain.USER


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatabaseConfig(_Section):
    # sqlite:///path/to/file.db (relative paths are under data_dir) or postgresql://user@host/db
    url: str = "sqlite:///arroyo.db"
    # The key (32 bytes, base64) the secrets kept in the database are encrypted with
    # (arroyo.store.secrets): the same on the api and the controller. Unset: data_dir's
    # secrets.key, made at first start. Never logged.
    secrets_key: SecretStr | None = None


class ServiceAddress(_Section):
    """Where a gRPC service listens (bind) and where others reach it (address)."""

    bind_host: str = "127.0.0.1"
    port: int = 0
    # host:port others dial; default bind_host:port. Replicas (compilers, a controller and
    # its standby): ip:port,ip:port, or one DNS name of them all (arroyo.rpc.channel).
    address: str | None = None
    admin_port: int = 0

    def dial(self) -> str:
        return self.address or f"{self.bind_host}:{self.port}"


class ApiConfig(ServiceAddress):
    port: int = 5115
    admin_port: int = 5125
    # A key the api accepts as given (at least 32 characters, no '.'), kept hashed as the key
    # `key_bootstrap`: how a deployment that cannot run `arroyo keys create` first (a compose
    # file, a Helm chart) starts with one. Never logged.
    bootstrap_key: SecretStr | None = None

    @field_validator("bootstrap_key")
    @classmethod
    def _strong_enough(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None:
            value = key.get_secret_value()
            if len(value) < 32 or "." in value:
                raise ValueError("must be at least 32 characters, without '.'")
        return key

    # How long a request that compiles (create, validate, preview) waits for a compiler that
    # does not answer (one still starting Spark) before it is refused with a 503.
    compiler_wait_s: float = 60.0
    # The REST API and web UI over HTTPS: true, false, or unset for "when the api listens
    # beyond loopback and has a certificate" (arroyo.tls.https_enabled). The certificate is
    # https_cert_file/https_key_file (one browsers trust, say), else tls.cert_file/key_file.
    https: bool | None = None
    https_cert_file: Path | None = None
    https_key_file: Path | None = None
    # Replicas on one machine behind one address: each api binds `port` with SO_REUSEPORT
    # and the kernel spreads connections over them. Every replica must set it (and an
    # admin_port of its own); without it a second api on the port fails to start.
    reuse_port: bool = False


class ControllerConfig(ServiceAddress):
    port: int = 5116
    admin_port: int = 5126
    # A worker or node silent for this long is taken for dead.
    heartbeat_timeout_s: float = 30.0
    # How often the controller looks at the database for jobs the api changed (SQLite has no
    # LISTEN/NOTIFY; the api also nudges the controller with JobsChanged).
    poll_interval_s: float = 0.5
    # Recovery: restarts allowed before a job goes Failed, and the backoff between them.
    max_restarts: int = 5
    restart_backoff_s: float = 1.0
    restart_backoff_max_s: float = 30.0
    # Recent metric samples kept per job.
    metrics_window: int = 120
    # Each operator's metrics over time (the API's operator_metric_groups): how long they are
    # kept, in buckets of how many seconds (arroyo.controller.history).
    metrics_retention_s: float = Field(default=3600.0, gt=0)
    metrics_bucket_s: float = Field(default=5.0, gt=0)
    # One controller acts at a time: the one holding the lease in the database
    # (arroyo.controller.lease). It renews it every lease_ttl_s / 4 and stops acting when
    # it could not for lease_ttl_s; a standby takes it over within about
    # 1.25 * lease_ttl_s of the last renewal.
    lease_ttl_s: float = Field(default=10.0, gt=0)


class CompilerConfig(ServiceAddress):
    port: int = 5117
    admin_port: int = 5127


class NodeConfig(ServiceAddress):
    port: int = 5118
    admin_port: int = 5128
    task_slots: int = 16
    node_id: str | None = None
    # A worker kept started (its SparkSession up) and waiting for a job: a pipeline whose
    # parallelism fits its slots starts in about a second instead of a JVM's start-up.
    warm_worker: bool = True
    warm_worker_slots: int = 2
    heartbeat_interval_s: float = 2.0


class WorkerConfig(_Section):
    bind_host: str = "127.0.0.1"
    # The host the controller dials to reach a worker (its node's name in a container
    # network); default: the bind host, or 127.0.0.1 when binding every interface.
    advertise_host: str | None = None
    heartbeat_interval_s: float = 1.0
    # local[N] (N = the job's parallelism) by default; a spark://host:port master works too.
    spark_master: str | None = None
    driver_memory: str = "4g"
    # More options for each worker's JVM (its Spark driver), after Arroyo's own: e.g.
    # "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC" where jobs are
    # short and cores few (the tests' clusters), where C2's compiling is most of a new JVM's
    # first minute of CPU (the code cache's size: see arroyo.engine.session.QUICK_JIT_OPTIONS).
    jvm_options: str = ""


class TlsConfig(_Section):
    """Mutual TLS between the services (arroyo.tls): this process's certificate and key, which
    it shows as a server and as a client, and the CA whose certificates it accepts from its
    peers. All three or none: none is plaintext gRPC. Relative paths are under data_dir.
    ``arroyo cluster`` and docker-compose.yml make a CA and each service's certificate
    (``arroyo certs``). Checked when a service starts (a missing file, a certificate expired or
    not from the CA, a key that is not the certificate's: ``error[bad_tls]``), not here."""

    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None


class LoggingConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    json_logs: bool = Field(default=False, alias="json")


class TracingConfig(_Section):
    # Export spans to stdout as JSON ("console"), or keep them in-process only ("none").
    exporter: Literal["none", "console"] = "none"


class Config(_Section):
    data_dir: Path = Path.home() / ".local" / "share" / "arroyo"
    # Where jobs' checkpoints live (Arroyo's checkpoint-url): by default data_dir/checkpoints
    # on the controller's machine, which workers on other machines cannot reach; an object
    # store (s3://bucket/prefix, credentials from the AWS_* variables of the workers) lets a
    # job resume on any worker.
    checkpoint_url: str | None = None
    database: DatabaseConfig = DatabaseConfig()
    api: ApiConfig = ApiConfig()
    controller: ControllerConfig = ControllerConfig()
    compiler: CompilerConfig = CompilerConfig()
    node: NodeConfig = NodeConfig()
    worker: WorkerConfig = WorkerConfig()
    tls: TlsConfig = TlsConfig()
    logging: LoggingConfig = LoggingConfig()
    tracing: TracingConfig = TracingConfig()

    @field_validator("checkpoint_url")
    @classmethod
    def _local_url(cls, value: str | None) -> str | None:
        """A ``file:`` URL (Arroyo's ``file:///path``) is the local directory it names; an
        empty one is the default."""
        if not value:
            return None
        if value.startswith("file:"):
            split = urlsplit(value)
            if split.netloc not in ("", "localhost"):
                raise ValueError(
                    f"'{value}' names host '{split.netloc}': a file URL is file:///path"
                )
            path = unquote(split.path)
            if not path.startswith("/"):
                raise ValueError(f"'{value}' is not an absolute file URL (file:///path)")
            return path
        return value

    def resolve(self, path: Path) -> Path:
        """A configured file's path: a relative one is under data_dir."""
        return path if path.is_absolute() else self.data_dir / path

    def database_url(self) -> str:
        """The database URL with a relative SQLite path resolved under data_dir."""
        url = self.database.url
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            if not path.is_absolute():
                return f"sqlite:///{self.data_dir / path}"
        return url


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The merged configuration; raises ConfigError naming the layer and key on a bad one."""
    merged: dict[str, Any] = {}
    default_file = (cwd or Path.cwd()) / DEFAULT_FILE
    layers: list[tuple[str, dict[str, Any]]] = []
    if default_file.is_file():
        layers.append((str(default_file), _read_toml(default_file)))
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        layers.append((str(path), _read_toml(path)))
    layers.append(("environment", _from_env(os.environ if environ is None else environ)))
    if overrides:
        layers.append(("command line", _nest(dict(overrides), "command line")))
    for name, layer in layers:
        try:
            Config.model_validate(_merge(merged, layer))
        except ValidationError as err:
            raise ConfigError(f"{name}: {_describe(err)}") from err
        merged = _merge(merged, layer)
    return Config.model_validate(merged)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from err


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    flat = {
        key.removeprefix(ENV_PREFIX).lower().replace("__", "."): value
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX)
    }
    return _nest(flat, "environment")


def _nest(flat: dict[str, Any], layer: str) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        parts = dotted.split(".")
        node = nested
        for depth, part in enumerate(parts[:-1], start=1):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(
                    f"{layer}: {'.'.join(parts[:depth])} is both a value and a section"
                )
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f"{layer}: {dotted} is both a value and a section")
        node[parts[-1]] = value
    return nested


def _merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _describe(err: ValidationError) -> str:
    problems = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"])
        what = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        problems.append(f"{where}: {what}")
    return "; ".join(problems)
