"""Kafka -> tumble -> Kafka in the cluster, exactly once through kill -9 of the worker."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
from collections import Counter

import pytest

from arroyo.testing.kafka import KafkaBroker
from tests.cluster.harness import Cluster
from tests.cluster.test_cluster import worker_pid

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.kafka,
    pytest.mark.xdist_group("cluster"),
]

# Event time: 100 events a second (one per 10 ms), so every one-second window counts 100.
PIPELINE = """
CREATE TABLE events (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1 second')
WITH (connector = 'kafka', bootstrap_servers = '{servers}', topic = '{source}', type = 'source',
      format = 'json', 'source.offset' = 'earliest');
CREATE TABLE counts WITH (connector = 'kafka', bootstrap_servers = '{servers}', topic = '{sink}',
      type = 'sink', format = 'json', 'sink.commit_mode' = 'exactly_once');
INSERT INTO counts
SELECT tumble(interval '1 second') AS window, count(*) AS n, min(id) AS first
FROM events GROUP BY window;
"""


def _event(i: int) -> str:
    seconds, hundredths = divmod(i, 100)
    return json.dumps(
        {"id": i, "ts": f"2024-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
         f"{seconds % 60:02d}.{hundredths:02d}"}
    )  # fmt: skip


class _Feeder:
    """Produces events in order on its own thread while the test kills workers."""

    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.wait(0.1):
            self.broker.produce(self.topic, [_event(i) for i in range(self.sent, self.sent + 50)])
            self.sent += 50

    def __enter__(self) -> _Feeder:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join(30)


def _windows(broker: KafkaBroker, topic: str) -> list[dict[str, int]]:
    return [json.loads(r.value) for r in broker.consume(topic, isolation="read_committed")]


def test_exactly_once_through_killed_workers(
    cluster: Cluster, kafka_broker: KafkaBroker, kafka_topic: str
) -> None:
    sink = f"{kafka_topic}-counts"
    kafka_broker.create_topic(sink)
    query = PIPELINE.format(servers=kafka_broker.bootstrap_servers, source=kafka_topic, sink=sink)
    pid = cluster.call("POST", "/pipelines", {"name": "kafka", "query": query, "parallelism": 1})[
        "id"
    ]
    rng = random.Random(7)
    with _Feeder(kafka_broker, kafka_topic) as feeder:
        cluster.wait_state(pid, "Running")
        for _ in range(2):  # a recovery, and a recovery of a recovered job
            # Let a random number of windows through, then kill -9 the worker mid-stream.
            seen = len(_windows(kafka_broker, sink))
            wanted = seen + rng.randint(1, 4)
            cluster.until("windows", lambda w=wanted: len(_windows(kafka_broker, sink)) >= w)
            before = cluster.job(pid)
            os.kill(worker_pid(cluster, pid), signal.SIGKILL)
            cluster.wait_generation_after(pid, before["generation"])
    # The last event sent is at (sent - 1) / 100 s, so the watermark stands one second before it
    # and every window ending at or before the watermark has closed.
    last_ts = (feeder.sent - 1) / 100
    closed = int(last_ts - 1)
    cluster.until("every closed window", lambda: len(_windows(kafka_broker, sink)) >= closed)
    cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
    cluster.wait_state(pid, "Stopped")

    windows = _windows(kafka_broker, sink)
    firsts = Counter(w["first"] for w in windows)
    assert all(n == 1 for n in firsts.values()), f"windows written twice: {firsts}"
    assert sorted(firsts) == [100 * i for i in range(len(firsts))], "a window is missing"
    assert all(w["n"] == 100 for w in windows), windows
    assert len(windows) >= closed
