"""Saved connection tables through the cluster: an impulse, an SSE stream, a WebSocket and a
polled endpoint as sources and a webhook as the sink, saved through the REST API; a pipeline
that names them with no CREATE TABLE, run by a worker the node starts; the rows of every source
reaching the webhook's receiver (aiohttp servers in the test: ``tests.feeds`` and the webhook
tests' receiver)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from arroyo.testing.ports import free_port
from tests.aio import loop_thread
from tests.cluster.harness import Cluster
from tests.connectors.test_webhook import Receiver
from tests.feeds import POLLED, serve

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.http,
    pytest.mark.xdist_group("cluster"),
]


def test_a_pipeline_reads_and_writes_saved_tables_by_name(cluster: Cluster) -> None:
    # The cluster is shared: the names are this test's own.
    tag = uuid.uuid4().hex[:8]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ids = {"fields": [{"name": "id", "type": "int64", "required": True}]}
    with loop_thread("feeds-and-receiver", timeout_s=30) as loop:
        feeds = loop.run(serve(port))
        receiver = Receiver(loop)
        try:
            saved: list[tuple[str, str, dict[str, str], dict[str, Any]]] = [
                ("ticks", "impulse", {"event_rate": "1000", "message_count": "20"}, {}),
                ("events", "sse", {"endpoint": f"{base}/sse"}, ids),
                (
                    "ticker",
                    "websocket",
                    {"endpoint": f"ws://127.0.0.1:{port}/ws", "subscription_message": "subscribe"},
                    ids,
                ),
                ("polled", "polling_http", {"endpoint": f"{base}/poll"}, ids),
                ("hook", "webhook", {"endpoint": receiver.url, "max_batch_size": "4"}, {}),
            ]
            for name, connector, config, fields in saved:
                body: dict[str, Any] = {"name": f"{name}_{tag}", "connector": connector}
                body["config"] = config
                if connector != "impulse":
                    body["schema"] = {"format": {"json": {}}, **fields}
                cluster.call("POST", "/connection_tables", body)
            query = (
                f"INSERT INTO hook_{tag} "
                f"SELECT 'impulse' AS source, CAST(counter AS BIGINT) AS id FROM ticks_{tag} "
                f"UNION ALL SELECT 'sse' AS source, id FROM events_{tag} "
                f"UNION ALL SELECT 'websocket' AS source, id FROM ticker_{tag} "
                f"UNION ALL SELECT 'polling_http' AS source, id FROM polled_{tag};"
            )
            pid = cluster.call("POST", "/pipelines", {"name": "saved", "query": query})["id"]

            def by_source() -> dict[str, list[int]] | None:
                got: dict[str, list[int]] = {}
                for record in receiver.records():
                    got.setdefault(record["source"], []).append(record["id"])
                enough = len(got.get("impulse", [])) >= 20 and len(got) == 4
                return got if enough and all(len(v) >= 3 for v in got.values()) else None

            cluster.wait_state(pid, "Running")
            got = cluster.until("rows from every source", by_source)
            cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "immediate"})
            cluster.wait_state(pid, "Stopped")
        finally:
            receiver.close()
            loop.run(feeds.cleanup())
    assert sorted(got["impulse"]) == list(range(20))
    for streamed in ("sse", "websocket"):  # from the first event, none lost or repeated
        assert sorted(got[streamed]) == list(range(len(got[streamed]))), got
    assert set(got["polling_http"]) == {POLLED["id"]}
