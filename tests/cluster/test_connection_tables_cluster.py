"""Saved connection tables through the cluster: a source and a webhook sink saved through the
REST API, a pipeline that names them with no CREATE TABLE, run by a worker the node starts,
and every row reaching the webhook's receiver (an aiohttp server in the test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.aio import loop_thread
from tests.cluster.harness import Cluster, running_cluster
from tests.connectors.test_webhook import Receiver

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.http,
    pytest.mark.xdist_group("cluster"),
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path, f"sqlite:///{tmp_path / 'arroyo.db'}") as c:
        yield c


def test_a_pipeline_reads_and_writes_saved_tables_by_name(cluster: Cluster) -> None:
    with loop_thread("webhook-receiver", timeout_s=30) as loop:
        receiver = Receiver(loop)
        try:
            cluster.call(
                "POST",
                "/connection_tables",
                {
                    "name": "ticks",
                    "connector": "impulse",
                    "config": {"event_rate": "1000", "message_count": "20"},
                },
            )
            cluster.call(
                "POST",
                "/connection_tables",
                {
                    "name": "hook",
                    "connector": "webhook",
                    "config": {"endpoint": receiver.url, "max_batch_size": "4"},
                    "schema": {"format": {"json": {}}},
                },
            )
            query = "INSERT INTO hook SELECT counter FROM ticks;"
            pid = cluster.call("POST", "/pipelines", {"name": "saved", "query": query})["id"]
            cluster.wait_state(pid, "Finished")
            assert sorted(r["counter"] for r in receiver.records()) == list(range(20))
        finally:
            receiver.close()
