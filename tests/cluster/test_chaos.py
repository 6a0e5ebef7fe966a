"""Chaos, small: one fault of each kind (``tests.cluster.chaos``) at a Kafka -> tumble -> Kafka
exactly-once pipeline on a cluster on PostgreSQL, its services on mutual TLS as ``arroyo
cluster`` runs them, with two compilers (one is killed). Every service comes back, the job runs
at the end, a read_committed consumer of the sink sees every closed window exactly once, and
the api's validation after the compiler kill was answered by the surviving compiler.
``bench/chaos.py`` runs the same at length and prints the recovery times."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arroyo.testing.kafka import KafkaBroker
from arroyo.testing.postgres import PostgresServer, running_postgres_server
from tests.cluster.chaos import FAULT_KINDS, Chaos, schedule
from tests.cluster.harness import WARM_WORKER, running_cluster

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.xdist_group("cluster"),
]


@pytest.fixture
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own: the test restarts it."""
    with running_postgres_server() as server:
        yield server


def test_every_fault_once(
    kafka_broker: KafkaBroker, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    faults = schedule(seed=32, faults=len(FAULT_KINDS), seconds=0)
    assert sorted(f.kind for f in faults) == sorted(FAULT_KINDS)
    # With a warm worker, as bench/chaos.py and deployments run: a killed worker's job restarts
    # on it.
    with running_cluster(
        tmp_path, postgres_server.url, WARM_WORKER, tls=True, compilers=2
    ) as cluster:
        chaos = Chaos(cluster, kafka_broker, postgres_server, pause_s=5, deadline_s=60, say=print)
        report = chaos.run(faults, rate=100)
    print("\n".join(report.lines()))
    assert report.survived == len(faults), report.lines()
    assert not report.unplanned_exits, report.lines()
    compiler = report.replicated("compiler")
    assert len(compiler) == 1 and compiler[0].by_survivor, report.lines()
    assert report.services_back and report.job_state == "Running", report.lines()
    assert not report.feed_failures, report.lines()
    tally = report.tally
    assert tally is not None and tally.closed > 10, report.lines()
    assert tally.exactly_once, report.lines()
