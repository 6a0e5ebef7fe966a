"""The cluster the cluster tests share: one start is four services and two JVMs (the node
starts a worker for each job: no warm one, harness.Cluster), so the tests on the embedded
default (SQLite) share one for the session (they all run in one test process:
``xdist_group("cluster")``). Each test works in pipelines of its own; one that stops or kills a
service has it back before the next test, and one that failed before stopping its pipeline has
it stopped (``cluster``). It runs as ``arroyo cluster`` does, but for the warm worker: mutual
TLS between its services, and here HTTPS on the api too, so every test of it covers both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.harness import Cluster, running_cluster


@pytest.fixture(scope="session")
def sqlite_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster-sqlite")
    # Its spans printed into each service's log, where tests can look at them
    # (test_secrets_cluster: no secret in any of them).
    env = {"ARROYO__TRACING__EXPORTER": "console"}
    with running_cluster(root, f"sqlite:///{root / 'arroyo.db'}", env, tls=True) as c:
        yield c


@pytest.fixture
def cluster(sqlite_cluster: Cluster) -> Iterator[Cluster]:
    yield sqlite_cluster
    sqlite_cluster.restore()
    sqlite_cluster.stop_pipelines()
