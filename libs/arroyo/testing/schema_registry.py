"""A real schema registry for tests: Apicurio Registry, through its Confluent-compatible API.

Confluent's own Schema Registry is not published to Maven Central, but Apicurio Registry is, as
a runnable distribution (``io.apicurio:apicurio-registry-app:<version>:all@tar.gz``), and it
serves Confluent's Schema Registry REST API under ``/apis/ccompat/v7``: ``POST
/subjects/{subject}/versions`` -> ``{"id": N}``, ``GET /schemas/ids/{id}``, ``GET
/subjects[/{subject}/versions[/latest]]``, ``/config`` with compatibility levels, and
Confluent's error bodies (``{"error_code": 40403, "message": ...}``). Confluent's clients
(``confluent_kafka.schema_registry.SchemaRegistryClient``) talk to it unchanged: give them
``SchemaRegistry.url``.

Versions: 3.0.9 is the newest release built for Java 17 (3.1 and later need Java 21).

``fetch_schema_registry()`` downloads the distribution once, with the Ivy that ships inside
pyspark (the same way ``arroyo.engine.jars`` resolves Spark's connector jars), into
``~/.cache/arroyo/apicurio-registry/<version>``. The artifact's parent POM is missing from the
repository, so Ivy fetches the artifact alone (``usepoms="false"``).

``SchemaRegistry.start(data_dir)`` runs it as its own JVM, listening on 127.0.0.1, with its
storage in ``data_dir`` (an H2 database file; or, given ``kafka_bootstrap``, Apicurio's
``kafkasql`` storage: a journal topic on that Kafka cluster), its log in
``data_dir/schema-registry.log``. It is configured to behave as Confluent's does by default:

- ids are global and content-addressed (the same schema, in any subject, always has one id);
- schemas are compared in canonical form, so the same schema with other whitespace is found;
- the global compatibility level of a fresh registry is BACKWARD (Confluent's default);
- ``basic_auth=(user, password)`` requires HTTP basic auth on every request (Confluent's
  ``authentication.method=BASIC``): clients pass ``basic.auth.user.info``, see
  ``client_config()``.

Differences a test may notice: ids are Apicurio's content ids (unique and stable, but not
necessarily consecutive), and error messages are Apicurio's own (the ``error_code`` values are
Confluent's). It needs only ``java`` (17 or later) on PATH, and the network on first use.

From a shell, ``python -m arroyo.testing.schema_registry DATA_DIR`` runs one in the foreground
and prints its URL, until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

from arroyo.engine.session import QUICK_JIT_OPTIONS
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.testing import processes
from arroyo.testing.ports import free_port

APICURIO_VERSION = "3.0.9"
# SHA-256 of apicurio-registry-app-3.0.9-all.tar.gz (Ivy also checks the repository's SHA-1).
_DISTRIBUTION_SHA256 = "2b28181501a20cbf6efcd77f9b7153908fc01f3d3a7c32024c0bd9e1b04c8a43"
_RUNNER_JAR = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
LOG_NAME = "schema-registry.log"
# Confluent's default global compatibility level.
DEFAULT_COMPATIBILITY = "BACKWARD"
_INITIALIZED_MARKER = ".schema-registry-initialized"
_JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx512m",
    # A test server: start fast and stay small on a machine with few cores.
    "-XX:+UseSerialGC",
    *QUICK_JIT_OPTIONS.split(),
)

_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" usepoms="false"/>
  </resolvers>
</ivysettings>
"""

_IVY_MODULE = f"""<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">
  <info organisation="arroyo" module="schema-registry-fetch"/>
  <dependencies>
    <dependency org="io.apicurio" name="apicurio-registry-app" rev="{APICURIO_VERSION}"
                transitive="false">
      <artifact name="apicurio-registry-app" type="tar.gz" ext="tar.gz" m:classifier="all"/>
    </dependency>
  </dependencies>
</ivy-module>
"""


class SchemaRegistryUnavailableError(ArroyoError):
    """The registry could not be fetched, or would not start; the message carries the tail of
    its log when the JVM is involved."""

    code = "schema_registry"
    domain = ErrorDomain.EXTERNAL


def cache_dir() -> Path:
    """Where fetched registry distributions are kept, across checkouts and virtualenvs."""
    return Path.home() / ".cache" / "arroyo" / "apicurio-registry"


def fetch_schema_registry() -> Path:
    """The runnable jar of Apicurio Registry, downloaded and unpacked on first use.

    Idempotent and safe to call from concurrent processes: a file lock serializes fetches, and
    the unpacked distribution appears under its final name only once complete (a rename)."""
    root = cache_dir()
    home = root / APICURIO_VERSION
    jar = home / _RUNNER_JAR
    if jar.is_file():
        return jar
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar.is_file():  # fetched by another process meanwhile
            return jar
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as tmp:
            staging = Path(tmp)
            archive = _download(staging)
            digest = _sha256(archive)
            if digest != _DISTRIBUTION_SHA256:
                raise SchemaRegistryUnavailableError(
                    f"{archive.name}: SHA-256 {digest}, expected {_DISTRIBUTION_SHA256}"
                )
            unpacked = staging / "dist"
            unpacked.mkdir()
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")
            if not (unpacked / _RUNNER_JAR).is_file():
                raise SchemaRegistryUnavailableError(f"{archive.name} holds no {_RUNNER_JAR}")
            if home.exists():  # a partial directory left by hand: replace it
                shutil.rmtree(home)
            unpacked.rename(home)
    return jar


def _download(staging: Path) -> Path:
    """Fetch the distribution's archive into ``staging`` with pyspark's Ivy."""
    try:
        import pyspark
    except ImportError as err:
        raise SchemaRegistryUnavailableError(
            "fetching the schema registry needs pyspark's Ivy: install the engine extra"
        ) from err
    ivy = next((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"), None)
    if ivy is None:
        raise SchemaRegistryUnavailableError("pyspark's Ivy jar is missing: reinstall pyspark")
    (staging / "ivysettings.xml").write_text(_IVY_SETTINGS)
    (staging / "ivy.xml").write_text(_IVY_MODULE)
    command = [
        _java(),
        "-jar",
        str(ivy),
        "-settings",
        str(staging / "ivysettings.xml"),
        "-ivy",
        str(staging / "ivy.xml"),
        "-cache",
        str(staging / "ivy-cache"),
        "-retrieve",
        f"{staging}/out/[artifact]-[revision](-[classifier]).[ext]",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    archive = staging / "out" / f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz"
    if done.returncode != 0 or not archive.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise SchemaRegistryUnavailableError(
            f"could not download Apicurio Registry {APICURIO_VERSION}:\n{tail}"
        )
    return archive


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SchemaRegistryUnavailableError("no java on PATH (and no JAVA_HOME): install a JDK")
    return found


class SchemaRegistry:
    """A running Apicurio Registry; ``url`` is its Confluent-compatible API's base URL."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        port: int,
        data_dir: Path,
        basic_auth: tuple[str, str] | None,
    ) -> None:
        self.process = process
        self.port = port
        self.data_dir = data_dir
        self.basic_auth = basic_auth

    @property
    def url(self) -> str:
        """The base URL of the Confluent Schema Registry API (what clients call ``url``)."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    def client_config(self) -> dict[str, str]:
        """Configuration for ``confluent_kafka.schema_registry.SchemaRegistryClient``."""
        config = {"url": self.url}
        if self.basic_auth is not None:
            config["basic.auth.user.info"] = ":".join(self.basic_auth)
        return config

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        port: int | None = None,
        kafka_bootstrap: str | None = None,
        basic_auth: tuple[str, str] | None = None,
    ) -> SchemaRegistry:
        """Start a registry keeping its data and log in ``data_dir``; returns once it answers
        ``GET /subjects``. With ``kafka_bootstrap``, its storage is a journal topic on that
        Kafka cluster (named after ``data_dir``, so registries with other data directories
        sharing a broker do not see each other's schemas); otherwise an H2 database file.
        ``port=None`` picks a free one."""
        jar = fetch_schema_registry()
        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        # A port picked here may, rarely, be taken before the JVM binds it: then try another.
        attempts = 3 if port is None else 1
        for attempt in range(attempts):
            chosen = free_port() if port is None else port
            registry = cls._launch(jar, data_dir, chosen, kafka_bootstrap, basic_auth)
            try:
                registry._wait_until_ready()
            except SchemaRegistryUnavailableError:
                registry.stop()
                log = processes.tail(registry.log_path, 40)
                in_use = f"Port {chosen} seems to be in use" in log
                if in_use and attempt + 1 < attempts:
                    continue
                raise
            registry._initialize()
            return registry
        raise AssertionError("unreachable")

    @classmethod
    def _launch(
        cls,
        jar: Path,
        data_dir: Path,
        port: int,
        kafka_bootstrap: str | None,
        basic_auth: tuple[str, str] | None,
    ) -> SchemaRegistry:
        props: dict[str, str] = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": str(port),
            # Confluent's behavior: a schema is looked up, and deduplicated, by its canonical
            # form; ids are content ids, shared by subjects (the default, stated here).
            "apicurio.ccompat.use-canonical-hash": "true",
            "apicurio.ccompat.legacy-id-mode.enabled": "false",
            "apicurio.storage.snapshot.location": str(data_dir),
            "quarkus.log.console.color": "false",
        }
        if kafka_bootstrap is None:
            props |= {
                "apicurio.storage.kind": "sql",
                "apicurio.storage.sql.kind": "h2",
                "apicurio.datasource.url": f"jdbc:h2:file:{data_dir / 'registry'}",
                # The default pool opens 20 connections up front.
                "apicurio.datasource.jdbc.initial-size": "1",
                "apicurio.datasource.jdbc.min-size": "1",
                "apicurio.datasource.jdbc.max-size": "10",
            }
        else:
            suffix = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
            props |= {
                "apicurio.storage.kind": "kafkasql",
                "apicurio.kafkasql.bootstrap.servers": kafka_bootstrap,
                "apicurio.kafkasql.topic": f"kafkasql-journal-{suffix}",
                "apicurio.kafkasql.snapshots.topic": f"kafkasql-snapshots-{suffix}",
                "apicurio.kafkasql.consumer.group-prefix": f"apicurio-{suffix}-",
                "apicurio.events.kafka.topic": f"registry-events-{suffix}",
            }
        if basic_auth is not None:
            user, password = basic_auth
            props |= {
                "quarkus.http.auth.basic": "true",
                "quarkus.security.users.embedded.enabled": "true",
                "quarkus.security.users.embedded.plain-text": "true",
                f"quarkus.security.users.embedded.users.{user}": password,
                "quarkus.http.auth.permission.everything.paths": "/*",
                "quarkus.http.auth.permission.everything.policy": "authenticated",
            }
        command = [
            _java(),
            *_JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in props.items()),
            "-jar",
            str(jar),
        ]
        with (data_dir / LOG_NAME).open("ab") as log:
            log.write(f"\n=== starting on port {port}\n".encode())
            log.flush()
            process = subprocess.Popen(
                command,
                cwd=data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the tests does not kill it mid-request.
                start_new_session=True,
            )
        return cls(process, port, data_dir, basic_auth)

    def _request(self, method: str, path: str, body: object | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json")
        if data is not None:
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if self.basic_auth is not None:
            token = base64.b64encode(":".join(self.basic_auth).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            result: object = json.loads(response.read() or b"null")
            return result

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise SchemaRegistryUnavailableError(
                    f"the schema registry exited ({self.process.returncode}) before it "
                    f"answered; log {self.log_path}:\n{processes.tail(self.log_path, 40)}"
                )
            try:
                self._request("GET", "/subjects")
            except (OSError, urllib.error.URLError, ValueError) as err:
                if time.monotonic() > deadline:
                    raise SchemaRegistryUnavailableError(
                        f"the schema registry did not answer GET /subjects within "
                        f"{START_TIMEOUT_S:.0f}s ({err}); log {self.log_path}:\n"
                        f"{processes.tail(self.log_path, 40)}"
                    ) from err
                time.sleep(0.25)
            else:
                return

    def _initialize(self) -> None:
        """On first start, set Confluent's default global compatibility (Apicurio has none)."""
        marker = self.data_dir / _INITIALIZED_MARKER
        if marker.exists():
            return
        self._request("PUT", "/config", {"compatibility": DEFAULT_COMPATIBILITY})
        marker.touch()

    def stop(self) -> None:
        """Stop the server (gracefully, then by force); idempotent."""
        processes.stop(self.process, timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m arroyo.testing.schema_registry [DATA_DIR]``: without DATA_DIR, fetch the
    registry and print its jar; with it, run one there and print its URL, until Ctrl-C or
    SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(fetch_schema_registry())
        return 0

    def interrupted(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # SIGTERM stops the server too (it runs in its own session: nothing else would).
    signal.signal(signal.SIGTERM, interrupted)
    with SchemaRegistry.start(Path(args[0])) as registry:
        print(registry.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            registry.process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "APICURIO_VERSION",
    "CCOMPAT_PATH",
    "SchemaRegistry",
    "SchemaRegistryUnavailableError",
    "fetch_schema_registry",
]
