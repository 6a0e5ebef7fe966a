"""A real Iceberg REST catalog for tests and local use: Apache Iceberg's own REST catalog server
(the test fixture the ``apache/iceberg-rest-fixture`` image runs), as a local JVM.

Its classes come from Maven Central (``iceberg-open-api``'s ``test-fixtures`` jar, ``iceberg-core``
and its ``tests`` jar, Jetty 11, SQLite's JDBC driver), fetched once with pyspark's Ivy into
``~/.cache/arroyo/iceberg-rest-<version>/``, with pyspark's own Hadoop client jars for its file
IO. The fixture's ``main`` listens on every interface; a launcher of ours (compiled there once,
in the fixture's package) starts the same servlet on 127.0.0.1 only. The catalog behind it is a
JDBC catalog on a SQLite file, its tables' files in a local warehouse directory.

``IcebergRestCatalog.start(data_dir)`` runs one on a free port and returns once ``GET
/v1/config`` answers; ``python -m arroyo.testing.iceberg_rest DIR`` runs one in the foreground.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

from arroyo.engine.jars import retrieve
from arroyo.engine.session import QUICK_JIT_OPTIONS
from arroyo.errors import ArroyoError
from arroyo.filelock import file_lock
from arroyo.testing.ports import free_port
from arroyo.testing.processes import stop, tail

ICEBERG_VERSION = "1.10.0"  # the newest with the REST fixture's jar on Maven Central
_MODULE = f"""<ivy-module version="2.0" xmlns:e="http://ant.apache.org/ivy/extra">
<info organisation="arroyo" module="iceberg-rest"/><dependencies>
<dependency org="org.apache.iceberg" name="iceberg-open-api" rev="{ICEBERG_VERSION}"
  conf="default->default" transitive="false"><artifact name="iceberg-open-api" type="jar" ext="jar"
  e:classifier="test-fixtures"/></dependency>
<dependency org="org.apache.iceberg" name="iceberg-core" rev="{ICEBERG_VERSION}"
  conf="default->default"><artifact name="iceberg-core" type="jar" ext="jar"/>
  <artifact name="iceberg-core" type="jar" ext="jar" e:classifier="tests"/></dependency>
<dependency org="org.eclipse.jetty" name="jetty-servlet" rev="11.0.24" conf="default->default"/>
<dependency org="org.xerial" name="sqlite-jdbc" rev="3.46.1.0" conf="default->default"/>
<dependency org="org.slf4j" name="slf4j-simple" rev="2.0.13" conf="default->default"/>
</dependencies></ivy-module>
"""
# RESTCatalogServer's start, bound to 127.0.0.1: argument 1 is the port; the catalog's
# properties come from CATALOG_* variables, as the fixture reads them.
_LAUNCHER = """package org.apache.iceberg.rest;

import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class ArroyoLoopbackServer {
  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>(RCKUtils.environmentCatalogConfig());
    props.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");
    props.putIfAbsent("jdbc.schema-version", "V1");
    Catalog catalog = CatalogUtil.buildIcebergCatalog(
        "rest_backend", props, new org.apache.hadoop.conf.Configuration());
    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(catalog, props));
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost("127.0.0.1");
    connector.setPort(Integer.parseInt(args[0]));
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    server.join();
  }
}
"""
_COMPLETE = "complete"


class IcebergRestError(ArroyoError):
    code = "iceberg_rest"


def _pyspark_hadoop_jars() -> list[Path]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return sorted(
        [*jars.glob("hadoop-client-*.jar"), *jars.glob("commons-logging-*.jar")]
    )  # fmt: skip


def fetch_rest_catalog() -> Path:
    """The server's jars and our launcher, fetched and compiled once."""
    target = Path.home() / ".cache" / "arroyo" / f"iceberg-rest-{ICEBERG_VERSION}"
    if (target / _COMPLETE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f"{target.name}.lock"):
        if (target / _COMPLETE).is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
        try:
            jars = staging / "jars"
            module = staging / "ivy.xml"
            module.write_text(_MODULE)
            retrieve(str(module), jars, module_file=True)
            source = staging / "src" / "org" / "apache" / "iceberg" / "rest"
            source.mkdir(parents=True)
            (source / "ArroyoLoopbackServer.java").write_text(_LAUNCHER)
            classpath = os.pathsep.join([f"{jars}/*", *map(str, _pyspark_hadoop_jars())])
            javac = shutil.which("javac") or "javac"
            done = subprocess.run(
                [javac, "-nowarn", "-d", str(staging / "classes"), "-cp", classpath,
                 str(source / "ArroyoLoopbackServer.java")],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise IcebergRestError(f"javac failed:\n{done.stdout}{done.stderr}")
            (staging / _COMPLETE).write_text(ICEBERG_VERSION)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


class IcebergRestCatalog:
    """One REST catalog server, its SQLite catalog and warehouse under ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.warehouse = data_dir / "warehouse"
        self.port = 0
        self.log = data_dir / "rest.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, data_dir: Path, timeout: float = 60.0) -> IcebergRestCatalog:
        catalog = cls(data_dir)
        catalog._launch(timeout)
        return catalog

    def _launch(self, timeout: float) -> None:
        home = fetch_rest_catalog()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        classpath = os.pathsep.join(
            [str(home / "classes"), f"{home / 'jars'}/*", *map(str, _pyspark_hadoop_jars())]
        )
        env = {
            **os.environ,
            "CATALOG_WAREHOUSE": str(self.warehouse),
            "CATALOG_URI": f"jdbc:sqlite:{self.data_dir / 'catalog.db'}",
        }
        launcher = "org.apache.iceberg.rest.ArroyoLoopbackServer"
        command = ["java", "-Xmx256m", "-XX:+UseSerialGC", *QUICK_JIT_OPTIONS.split(), "-cp",
                   classpath, launcher, str(self.port)]  # fmt: skip
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise IcebergRestError(
                    f"the REST catalog exited ({self._process.returncode}):\n{tail(self.log)}"
                )
            try:
                urllib.request.urlopen(f"{self.uri}/v1/config", timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise IcebergRestError(
            f"the REST catalog did not answer in {timeout:.0f} s:\n{tail(self.log)}"
        )

    def stop(self) -> None:
        if self._process is not None:
            stop(self._process, timeout=10)
            self._process = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> None:
    if len(sys.argv) != 2:
        print("usage: python -m arroyo.testing.iceberg_rest DATA_DIR", file=sys.stderr)
        raise SystemExit(2)
    catalog = IcebergRestCatalog.start(Path(sys.argv[1]))

    def quit_(_sig: int, _frame: FrameType | None) -> None:
        catalog.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, quit_)
    print(f"Iceberg REST catalog at {catalog.uri}, warehouse {catalog.warehouse}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        catalog.stop()


if __name__ == "__main__":
    main()
