"""The data side of the chaos runs (``tests.cluster.chaos``): a steady feed of events into
Kafka, an independent read_committed consumer that watches the windows come out, and the tally
of what came out against what went in.

The events are numbered; event ``i`` of a feed at ``rate`` events per second has event time
``EPOCH + i / rate`` seconds, whatever the wall clock, so one-second window ``k`` holds exactly
the events ``k * rate`` to ``(k + 1) * rate - 1``. The pipeline writes, per window, its count
``n`` and its smallest id ``first``: a window lost, cut short or written twice shows in those two
numbers alone. Both clients are confluent-kafka's (librdkafka), not Spark's.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from arroyo.testing.kafka import KafkaBroker

_TICK_S = 0.05


def event(i: int, rate: int) -> bytes:
    """Event ``i`` of a feed at ``rate`` events per second (JSON, event time in ms)."""
    millis = i * 1000 // rate
    seconds, ms = divmod(millis, 1000)
    ts = f"2024-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{ms:03d}"
    return json.dumps({"id": i, "ts": ts}).encode()


class Feeder:
    """Produces events ``0, 1, 2, ...`` at ``rate`` a second on a thread of its own, through one
    idempotent producer (a retry after a broker stall writes no event twice). While the broker
    is paused the events wait in the producer's queue and go once it answers; a failed delivery
    is kept in ``failures`` (the tally would count it lost)."""

    def __init__(self, broker: KafkaBroker, topic: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.topic, self.rate = topic, rate
        self.produced = 0
        self.acknowledged = 0
        self.failures: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 600_000,
            }
        )
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def _delivered(self, err: Any, _message: Any) -> None:
        if err is None:
            self.acknowledged += 1
        else:
            self.failures.append(str(err))

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stopping.wait(_TICK_S):
            due = int((time.monotonic() - started) * self.rate)
            while self.produced < due:
                try:
                    value = event(self.produced, self.rate)
                    self._producer.produce(self.topic, value, on_delivery=self._delivered)
                except BufferError:
                    break
                self.produced += 1
            self._producer.poll(0)

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop producing; return once every event produced is acknowledged (or failed)."""
        self._stopping.set()
        self._thread.join(timeout)
        left = self._producer.flush(timeout)
        if left:
            self.failures.append(f"{left} events not acknowledged in {timeout:g} s")


class Watcher:
    """An independent read_committed consumer of the sink topic on a thread of its own: notes
    when each window's row became visible, so that a fault's recovery can be timed by the output
    moving on (``advanced_past``). It does not judge exactly-once: the tally reads the topic
    afresh at the end."""

    def __init__(self, broker: KafkaBroker, topic: str, rate: int) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.rate = rate
        self._seen: list[tuple[float, int]] = []  # (monotonic time, window index)
        self._lock = threading.Lock()
        self._consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": f"chaos-watch-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 50,
            }
        )
        partitions = self._consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)

    def _run(self) -> None:
        while not self._stopping.is_set():
            message = self._consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            window = int(json.loads(message.value())["first"]) // self.rate
            with self._lock:
                self._seen.append((time.monotonic(), window))

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(30)
        self._consumer.close()

    def newest(self) -> int:
        """The latest window seen so far (-1 before the first)."""
        with self._lock:
            return max((w for _, w in self._seen), default=-1)

    def count(self) -> int:
        with self._lock:
            return len(self._seen)

    def advanced_past(self, window: int) -> float | None:
        """When (monotonic) the first window later than ``window`` was seen, if one was."""
        with self._lock:
            return next((t for t, w in self._seen if w > window), None)


@dataclass(frozen=True, slots=True)
class Tally:
    """The sink's windows against the input. ``closed``: the windows the input's last event
    closed (the watermark, one second behind it, passed their end)."""

    closed: int
    windows: int
    rows_expected: int
    rows_lost: int
    rows_duplicated: int
    missing: tuple[int, ...]
    duplicated: tuple[int, ...]
    wrong: tuple[int, ...]

    @property
    def exactly_once(self) -> bool:
        return self.rows_lost == 0 and self.rows_duplicated == 0


def closed_windows(events: int, rate: int) -> int:
    """How many one-second windows the first ``events`` events close: the watermark stands one
    second behind the last event's time, and a window closes once it reaches the window's end."""
    if events == 0:
        return 0
    return max(0, int((events - 1) / rate - 1))


def tally(rows: list[dict[str, Any]], rate: int, closed: int) -> Tally:
    """Each row is one window's ``n`` and ``first``; windows ``0 .. closed - 1`` must each be
    written once with ``n == rate``. Rows lost: the events of the closed windows not counted by
    the first row of their window. Rows duplicated: the events counted again (a window written
    more than once, or counting more than ``rate``)."""
    by_window: dict[int, list[int]] = {}
    for row in rows:
        by_window.setdefault(int(row["first"]) // rate, []).append(int(row["n"]))
    lost = duplicated = 0
    missing, twice, wrong = [], [], []
    for window in range(closed):
        counts = by_window.get(window, [])
        if not counts:
            missing.append(window)
            lost += rate
            continue
        lost += max(0, rate - counts[0])
        duplicated += max(0, counts[0] - rate) + sum(counts[1:])
        if len(counts) > 1:
            twice.append(window)
        if counts[0] != rate:
            wrong.append(window)
    for window, counts in by_window.items():
        if window >= closed and len(counts) > 1:  # open windows must not repeat either
            twice.append(window)
            duplicated += sum(counts[1:])
    return Tally(
        closed=closed,
        windows=len(by_window),
        rows_expected=closed * rate,
        rows_lost=lost,
        rows_duplicated=duplicated,
        missing=tuple(missing),
        duplicated=tuple(sorted(twice)),
        wrong=tuple(wrong),
    )


def read_windows(broker: KafkaBroker, topic: str) -> list[dict[str, Any]]:
    """Every row of the sink topic, as a fresh read_committed consumer sees it."""
    records = broker.consume(topic, isolation="read_committed", timeout=60)
    return [json.loads(r.value) for r in records if r.value is not None]
