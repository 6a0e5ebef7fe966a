"""Events/s of each messaging connector, as a source and as a sink, beside the system's own
Python client doing the same read or write alone on the same server; and a lookup join over
Redis, with its cache hit rate.

Real servers, started as the tests start them (``arroyo.testing``): Redis, mosquitto, NATS
(JetStream on), RabbitMQ (streams), kinesalite (Kinesis). Each pipeline runs in this process's
Spark (local, parallelism 2), as ``arroyo run`` runs one, its tasks in Spark's Python workers;
the client's reads and consumers run in this process, its writes and publishes in a process of
their own (so that writer and consumer do not share an interpreter lock, as the pipeline's tasks
and the consumer do not). Every message is a JSON object of one number, ``{"n": 17}`` (Redis:
with its key), which the pipeline decodes into a column and the client does not. Each case:

- a sink (``*_sink``): a generated stream of ``--events`` rows (``impulse``, all due at once,
  so one micro-batch written by two tasks) into the sink, against the client writing as many
  messages from one connection. Both are timed by one consumer outside Spark, subscribed before
  either starts (for Redis: the key count, polled), from the first message it sees to the last.
  "with start-up": from planning the pipeline (Spark already running) or from the client's
  start, to the last message;
- a source whose system keeps its messages (``jetstream_source``, ``rabbitmq_source``,
  ``kinesis_source``): the stream is filled with ``--events`` messages, then read from its
  first message by the pipeline (into a ``blackhole``) and by the client alone, each from when
  it begins to read to the last message (the pipeline: from the start of its first micro-batch,
  in which its reader connects, to the end of the one that read the last message; the client:
  from its first request, connected, to the last message). "with start-up": from planning the
  pipeline, or from the client's start;
- a source that gets only what is published while it is subscribed (``mqtt_source`` at QoS 1,
  ``nats_source``, a core subject): one publisher sends ``--events`` messages as fast as it can
  while the running pipeline, or the client alone, is subscribed. Both are timed from the first
  publish to the last message read (the pipeline: to the end of the micro-batch that read it),
  so both include the publisher's time: a side within 10% of its publisher's rate read as fast
  as it was sent, and the note under the case says so. No start-up figure: the pipeline was
  running before.

Each side runs once unmeasured first, on as many events: the first run of a source or sink in a
JVM pays seconds for loading its code, starting a Python worker for each task it runs (a
smaller run starts fewer) and the JIT. Then each side runs ``--repeat`` times, interleaved, and
the median run is shown.

The lookup join: a generated stream (``impulse``, ``--lookup-batch-rows`` a micro-batch) joined
to a Redis lookup table of ``--keys`` keys (the key: the event's number modulo the keys), into a
``blackhole``; events/s in micro-batches after three warm-up ones, as the other benches measure
(bench/side_by_side.py), after an unmeasured run of two batches. The cache hit rate is the
lookup's own count (``arroyo.engine.lookups.lookup_counts``: the keys asked of each Python
worker's cache, each distinct key of an Arrow batch once, and the hits among them, over the
measured run), shown beside the keys Redis says it was asked for (INFO keyspace hits and
misses). Beside it, redis-py alone reading the same keys for as many events by MGET, 1,000 keys
a call, no cache.

    .venv/bin/python bench/messaging.py [--events 100000] [--cases redis_sink,...] [--repeat 1]
        [--keys 10000] [--lookup-batch-rows 100000] [--lookup-batches 8] [--cache-bytes N]
        [--no-lookup]

The cases are a table (``CASES``): each names its connector, its server (``Servers``), the WITH
options of a table on it, and the client's side of the same read or write.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import multiprocessing
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from side_by_side import measure

from arroyo.engine.catalog import spark_planner
from arroyo.engine.lookups import lookup_counts
from arroyo.engine.runner import PipelineRunner
from arroyo.engine.session import SessionSettings, get_or_create_session
from arroyo.logging import configure_logging

PARALLELISM = 2
TIMEOUT_S = 300.0
# Every micro-batch's progress kept, not Spark's last 100: a source's run is timed by them.
PROGRESS_KEPT = "spark.sql.streaming.numRecentProgressUpdates"


def payload(n: int) -> bytes:
    return b'{"n": %d}' % n


# --- what a consumer outside Spark sees ------------------------------------------------------


class Arrivals:
    """Messages as a client outside Spark gets them: how many, and when (``time.time()``) the
    first and the latest came; for a reader, when it began to read (connected, before its first
    request). Fed from the client's own thread; ``close`` lets the client go."""

    def __init__(self) -> None:
        self.count = 0
        self.reading_at: float | None = None
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._close: list[Callable[[], None]] = []

    def reading(self) -> None:
        self.reading_at = time.time()

    def seen(self, messages: int = 1) -> None:
        with self._lock:
            self._record(self.count + messages)

    def counted(self, total: int) -> None:
        with self._lock:
            if total != self.count:
                self._record(total)

    def _record(self, total: int) -> None:
        now = time.time()
        if self.first_at is None:
            self.first_at = now
        self.count, self.last_at = total, now

    def wait(self, messages: int, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while self.count < messages:
            if self.error is not None:
                raise RuntimeError(f"{what} failed") from self.error
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: {self.count:,} of {messages:,} messages")
            time.sleep(0.002)

    def on_close(self, action: Callable[[], None]) -> None:
        self._close.append(action)

    def close(self) -> None:
        for action in reversed(self._close):
            action()


# --- the systems' own clients ----------------------------------------------------------------


def redis_client(server: Any) -> Any:
    import redis

    return redis.Redis(server.host, server.port, password=server.password)


def redis_keys(server: Any, _name: str) -> Arrivals:
    """The number of keys on the server (flushed first), polled every millisecond or two."""
    client = redis_client(server)
    client.flushdb()
    arrivals = Arrivals()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            arrivals.counted(client.dbsize())
            time.sleep(0.001)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    arrivals.on_close(client.close)
    arrivals.on_close(thread.join)
    arrivals.on_close(stop.set)
    return arrivals


def redis_write(server: Any, name: str, events: int) -> float:
    """SET of each row's JSON under its key, in pipelines of 2,000 commands, as the sink does
    (it writes from two partitions at once; this is one connection)."""
    client = redis_client(server)
    try:
        pipe = client.pipeline(transaction=False)
        for subtask in range(PARALLELISM):
            for n in range(events // PARALLELISM):
                key = f"{subtask}-{n}"
                pipe.set(f"{name}:{key}", json.dumps({"k": key, "n": n}))
                if len(pipe) == 2_000:
                    pipe.execute()
        pipe.execute()
        return time.time()
    finally:
        client.close()


def mqtt_client(server: Any, clean: bool = True) -> Any:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"bench-{uuid.uuid4().hex}", clean_session=clean
    )
    client.username_pw_set(server.username, server.password)
    connected = threading.Event()
    client.on_connect = lambda *_: connected.set()
    client.connect(server.host, server.port)
    client.loop_start()
    if not connected.wait(10):
        raise TimeoutError("the MQTT client did not connect")
    return client


def mqtt_subscriber(server: Any, topic: str) -> Arrivals:
    """Subscribed at QoS 1 with a persistent session, as the source is."""
    arrivals = Arrivals()
    client = mqtt_client(server, clean=False)
    subscribed = threading.Event()
    client.on_message = lambda *_: arrivals.seen()
    client.on_subscribe = lambda *_: subscribed.set()
    client.subscribe(topic, qos=1)
    if not subscribed.wait(10):
        raise TimeoutError("the MQTT subscription was not acknowledged")
    arrivals.on_close(client.loop_stop)
    arrivals.on_close(client.disconnect)
    return arrivals


def mqtt_publish(server: Any, topic: str, events: int) -> float:
    """Every message published at QoS 1, and the acknowledgements waited for every 1,000
    (paho's defaults: 20 messages in flight; a queue of 100,000 unacknowledged messages it
    refuses with ERR_QUEUE_SIZE)."""
    client = mqtt_client(server)
    try:
        for first in range(0, events, 1_000):
            infos = [
                client.publish(topic, payload(n), qos=1)
                for n in range(first, min(events, first + 1_000))
            ]
            for info in infos:
                info.wait_for_publish(60)
        return time.time()
    finally:
        client.disconnect()
        client.loop_stop()


class NatsClient:
    """A nats-py connection on an event loop of its own thread."""

    def __init__(self, server: Any) -> None:
        import nats

        from arroyo.connectors.runtime.loop import Loop

        self.loop = Loop()
        self.nc: Any = self.loop.run(
            nats.connect(server.url, user=server.username, password=server.password), 10
        )

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine, TIMEOUT_S)

    def close(self) -> None:
        self.run(self.nc.close())
        self.loop.close()


def nats_subscriber(server: Any, subject: str) -> Arrivals:
    arrivals = Arrivals()
    client = NatsClient(server)

    async def on_message(_message: Any) -> None:
        arrivals.seen()

    client.run(client.nc.subscribe(subject, cb=on_message))
    client.run(client.nc.flush())
    arrivals.on_close(client.close)
    return arrivals


def nats_publish(server: Any, subject: str, events: int) -> float:
    """Every message published, then one flush, as the sink does."""
    client = NatsClient(server)

    async def send() -> None:
        for n in range(events):
            await client.nc.publish(subject, payload(n))
        await client.nc.flush(timeout=60)

    try:
        client.run(send())
        return time.time()
    finally:
        client.close()


def jetstream_fill(server: Any, stream: str, payloads: list[bytes]) -> None:
    """A stream of ``payloads``, published on core NATS (the stream stores them unacknowledged),
    then waited for until the stream holds them all."""
    client = NatsClient(server)

    async def fill() -> None:
        js = client.nc.jetstream()
        await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        for p in payloads:
            await client.nc.publish(f"{stream}.in", p)
        await client.nc.flush(timeout=60)
        deadline = time.monotonic() + TIMEOUT_S
        while (await js.stream_info(stream)).state.messages < len(payloads):
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {stream} did not get every message")
            await asyncio.sleep(0.05)

    try:
        client.run(fill())
    finally:
        client.close()


def jetstream_read(server: Any, stream: str, events: int) -> Arrivals:
    """A durable pull consumer from the stream's start, 10,000 messages a fetch, each message
    acknowledged: the source's consumer (explicit acks, no limit on unacknowledged ones)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    arrivals = Arrivals()
    client = NatsClient(server)

    async def read() -> None:
        js = client.nc.jetstream()
        config = ConsumerConfig(
            durable_name="bench-client",
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            max_ack_pending=-1,
        )
        pull = await js.pull_subscribe(f"{stream}.>", "bench-client", stream=stream, config=config)
        arrivals.reading()
        while arrivals.count < events:
            try:
                messages = await pull.fetch(10_000, timeout=1.0)
            except TimeoutError:
                continue
            for message in messages:
                await message.ack()
            arrivals.seen(len(messages))

    async def reading() -> None:
        try:
            await read()
        except Exception as err:  # for the bench's thread, waiting on the count
            arrivals.error = err

    asyncio.run_coroutine_threadsafe(reading(), client.loop.loop)
    arrivals.on_close(client.close)
    return arrivals


def rabbitmq_fill(node: Any, stream: str, payloads: list[bytes]) -> None:
    """A new stream of ``payloads``, sent 1,000 a batch, waited for until each is confirmed."""
    from rstream import Producer

    async def fill() -> None:
        confirmed = 0
        done = asyncio.Event()

        async def on_confirm(status: Any) -> None:
            nonlocal confirmed
            confirmed += 1
            if confirmed == len(payloads):
                done.set()

        async with Producer(
            node.host, node.stream_port, username=node.username, password=node.password
        ) as producer:
            await producer.create_stream(stream, exists_ok=True)
            for start in range(0, len(payloads), 1_000):
                chunk = payloads[start : start + 1_000]
                await producer.send_batch(stream, chunk, on_publish_confirm=on_confirm)
            await asyncio.wait_for(done.wait(), TIMEOUT_S)

    asyncio.run(fill())


def rabbitmq_read(node: Any, stream: str, events: int) -> Arrivals:
    """An rstream consumer from the stream's first message, with rstream's defaults."""
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType

    from arroyo.connectors.runtime.loop import Loop

    arrivals = Arrivals()
    loop = Loop()

    async def start() -> Any:
        consumer = Consumer(
            node.host, node.stream_port, username=node.username, password=node.password
        )
        await consumer.start()

        async def on_message(_message: Any, _context: Any) -> None:
            arrivals.seen()

        first = ConsumerOffsetSpecification(OffsetType.FIRST, None)
        arrivals.reading()
        await consumer.subscribe(stream, on_message, offset_specification=first)
        return consumer

    consumer = loop.run(start(), 30)
    arrivals.on_close(loop.close)
    arrivals.on_close(lambda: loop.run(consumer.close(), 10))
    return arrivals


def kinesis_stream(server: Any, stream: str) -> None:
    server.create_stream(stream, shards=PARALLELISM)


def kinesis_put(server: Any, stream: str, events: int) -> float:
    """PutRecords of 500 records a call (the sink's default batch), each keyed by its number;
    records the server refused put again."""
    kinesis = server.client()
    for start in range(0, events, 500):
        records = [
            {"Data": payload(n), "PartitionKey": str(n)}
            for n in range(start, min(start + 500, events))
        ]
        while records:
            answer = kinesis.put_records(StreamName=stream, Records=records)
            records = [
                r for r, out in zip(records, answer["Records"], strict=True) if "ErrorCode" in out
            ]
    return time.time()


def kinesis_fill(server: Any, stream: str, payloads: list[bytes]) -> None:
    kinesis_stream(server, stream)
    kinesis_put(server, stream, len(payloads))


def kinesis_read(server: Any, stream: str, events: int) -> Arrivals:
    """GetRecords on each shard in turn from its start (TRIM_HORIZON), 10,000 records a call at
    most, until ``events`` have come, on a thread of its own."""
    kinesis = server.client()
    arrivals = Arrivals()
    stop = threading.Event()

    def read() -> None:
        shards = kinesis.list_shards(StreamName=stream)["Shards"]
        iterators = [
            kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        ]
        arrivals.reading()
        while arrivals.count < events and not stop.is_set():
            got = 0
            for i, iterator in enumerate(iterators):
                answer = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
                iterators[i] = answer["NextShardIterator"]
                got += len(answer["Records"])
            if got:
                arrivals.seen(got)
            else:
                time.sleep(0.001)

    def reading() -> None:
        try:
            read()
        except Exception as err:  # for the bench's thread, waiting on the count
            arrivals.error = err

    thread = threading.Thread(target=reading, daemon=True)
    thread.start()
    arrivals.on_close(thread.join)
    arrivals.on_close(stop.set)
    return arrivals


def kinesis_consumer(server: Any, stream: str) -> Arrivals:
    """A new stream, read from its start as records come (``kinesis_read``)."""
    kinesis_stream(server, stream)
    return kinesis_read(server, stream, 1 << 62)


# --- the cases -------------------------------------------------------------------------------

# Writes ``events`` messages to a name on a server; returns when the last was acknowledged.
Write = Callable[[Any, str, int], float]


@dataclass(frozen=True)
class SinkCase:
    """A sink of ``connector``: ``table(server, name)`` is its WITH options writing to
    ``name``; ``consumer`` an independent one of ``name``, subscribed before either side
    starts; ``write`` the client alone writing ``events`` messages as the pipeline's rows
    would be (a module-level function: it runs in a process of its own)."""

    connector: str
    server: str
    table: Callable[[Any, str], str]
    consumer: Callable[[Any, str], Arrivals]
    write: Write
    columns: str = "n BIGINT"
    select: str = "counter AS n"


@dataclass(frozen=True)
class RetainedSource:
    """A source whose system keeps its messages: ``fill`` makes ``name`` hold them, ``read``
    starts the client reading it from its first message; ``table`` as for a sink."""

    connector: str
    server: str
    table: Callable[[Any, str], str]
    fill: Callable[[Any, str, list[bytes]], None]
    read: Callable[[Any, str, int], Arrivals]


@dataclass(frozen=True)
class LiveSource:
    """A source that gets what is published while it is subscribed: ``subscribe`` the client
    alone, ``publish`` the publisher both sides read from (module-level, as ``write``)."""

    connector: str
    server: str
    table: Callable[[Any, str], str]
    subscribe: Callable[[Any, str], Arrivals]
    publish: Write


Case = SinkCase | RetainedSource | LiveSource

CASES: dict[str, Case] = {
    "redis_sink": SinkCase(
        "redis",
        "redis",
        lambda s, name: (
            f"{s.options()}, target = 'string', 'target.key_prefix' = '{name}:', "
            "'target.key_column' = 'k'"
        ),
        redis_keys,
        redis_write,
        columns="k TEXT NOT NULL, n BIGINT",
        select="CAST(subtask_index AS TEXT) || '-' || CAST(counter AS TEXT) AS k, counter AS n",
    ),
    "mqtt_sink": SinkCase(
        "mqtt",
        "mosquitto",
        lambda s, name: f"{s.options()}, topic = '{name}', qos = 'AtLeastOnce'",
        mqtt_subscriber,
        mqtt_publish,
    ),
    "mqtt_source": LiveSource(
        "mqtt",
        "mosquitto",
        lambda s, name: f"{s.options()}, topic = '{name}', qos = 'AtLeastOnce'",
        mqtt_subscriber,
        mqtt_publish,
    ),
    "nats_sink": SinkCase(
        "nats",
        "nats",
        lambda s, name: f"{s.options()}, subject = '{name}'",
        nats_subscriber,
        nats_publish,
    ),
    "nats_source": LiveSource(
        "nats",
        "nats",
        lambda s, name: f"{s.options()}, subject = '{name}'",
        nats_subscriber,
        nats_publish,
    ),
    "jetstream_source": RetainedSource(
        "nats",
        "nats",
        lambda s, name: f"{s.options()}, stream = '{name}'",
        jetstream_fill,
        jetstream_read,
    ),
    "rabbitmq_source": RetainedSource(
        "rabbitmq",
        "rabbitmq",
        lambda s, name: f"{s.options()}, stream = '{name}', 'source.offset' = 'first'",
        rabbitmq_fill,
        rabbitmq_read,
    ),
    "kinesis_sink": SinkCase(
        "kinesis",
        "kinesis",
        lambda s, name: f"{s.options()}, stream_name = '{name}'",
        kinesis_consumer,
        kinesis_put,
    ),
    "kinesis_source": RetainedSource(
        "kinesis",
        "kinesis",
        lambda s, name: f"{s.options()}, stream_name = '{name}', 'source.offset' = 'earliest'",
        kinesis_fill,
        kinesis_read,
    ),
}


# Each server's launcher in arroyo.testing: (module, function), imported when a case needs it.
LAUNCHERS = {
    "redis": ("redis", "running_redis"),
    "mosquitto": ("mosquitto", "running_mosquitto"),
    "nats": ("nats", "running_nats"),
    "rabbitmq": ("rabbitmq", "running_rabbitmq"),
    "kinesis": ("kinesis", "running_kinesis"),
}


class Servers:
    """Each server a chosen case needs, started on first use, all stopped at the end."""

    def __init__(self, root: Path, stack: ExitStack) -> None:
        self.root = root
        self.stack = stack
        self.running: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.running:
            module, function = LAUNCHERS[name]
            running: Callable[[Path], AbstractContextManager[Any]] = getattr(
                importlib.import_module(f"arroyo.testing.{module}"), function
            )
            self.running[name] = self.stack.enter_context(running(self.root / name))
        return self.running[name]


def _timed(write: Write, args: tuple[Any, str, int], times: Any) -> None:
    began = time.time()
    times.put((began, write(*args)))


def in_own_process(write: Write, server: Any, name: str, events: int) -> tuple[float, float]:
    """``write(server, name, events)`` in a process of its own (so that the client writing and
    the consumer timing it do not share an interpreter lock, as the pipeline's tasks and the
    consumer do not): when it began (before connecting) and when the last message was
    acknowledged (before disconnecting)."""
    context = multiprocessing.get_context("spawn")
    times = context.Queue()
    process = context.Process(target=_timed, args=(write, (server, name, events), times))
    process.start()
    process.join(TIMEOUT_S)
    if process.exitcode != 0:
        raise RuntimeError(f"the client's writer exited with {process.exitcode}")
    began, ended = times.get(timeout=10)
    return began, ended


# --- running pipelines -----------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """One micro-batch: when it started and ended (``time.time()``), the rows it read."""

    start: float
    end: float
    rows: int


class Running:
    """A pipeline run in this process, its runner's ``wait`` on a thread of its own (as a
    pipeline's process runs it); ``planned_at`` is when its planning began."""

    def __init__(self, spark: SparkSession, sql: str, state: Path) -> None:
        self.planned_at = time.time()
        program = spark_planner(spark, parallelism=PARALLELISM, state_dir=state / "plan").plan(sql)
        self.runner = PipelineRunner(spark, program, state / "run")
        self.runner.start()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        try:
            self.runner.wait()
        except BaseException as err:  # handed to the bench's thread
            self.error = err

    def batches(self) -> list[Batch]:
        if self.error is not None:
            raise self.error
        return [
            Batch(_epoch(p.timestamp), _epoch(p.timestamp) + _busy_s(p), p.numInputRows)
            for q in self.runner.queries
            for p in q.recentProgress
        ]

    def until_rows(self, rows: int) -> list[Batch]:
        """The batches until the one that brought the rows read to ``rows``."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            batches = self.batches()
            total = 0
            for i, b in enumerate(batches):
                total += b.rows
                if total >= rows:
                    return batches[: i + 1]
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipeline read {total:,} of {rows:,} rows")
            time.sleep(0.01)

    def finish(self) -> None:
        """Waits for a bounded pipeline to end by itself."""
        self.thread.join(TIMEOUT_S)
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.runner.stop()
        self.thread.join(TIMEOUT_S)


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _busy_s(progress: Any) -> float:
    return float(progress.durationMs.get("triggerExecution", 0)) / 1000


def _impulse(events: int) -> str:
    """A generated stream of ``events`` rows, all due at once (so in one micro-batch)."""
    return (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000000000', "
        f"message_count = '{events // PARALLELISM}');\n"
    )


def _into_blackhole(case: RetainedSource | LiveSource, server: Any, name: str) -> str:
    return (
        f"CREATE TABLE src (n BIGINT) WITH (connector = '{case.connector}', type = 'source', "
        f"format = 'json', {case.table(server, name)});\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )


# --- the measurements ------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One side's run: ``events`` in ``seconds`` (first to last, as each case says), and in
    ``with_start_s`` counted from planning the pipeline or starting the client (None: not
    measured)."""

    events: int
    seconds: float
    with_start_s: float | None = None
    # A live source's publisher: its own seconds for the events.
    published_s: float | None = None

    @property
    def per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def _name(kind: str) -> str:
    return f"bench-{kind}-{uuid.uuid4().hex[:8]}"


def run_sink(
    spark: SparkSession, case: SinkCase, server: Any, events: int, tmp: Path, *, pipeline: bool
) -> Timed:
    name = _name("sink")
    consumer = case.consumer(server, name)
    try:
        if pipeline:
            sql = (
                _impulse(events)
                + f"CREATE TABLE out ({case.columns}) WITH (connector = '{case.connector}', "
                f"type = 'sink', format = 'json', {case.table(server, name)});\n"
                f"INSERT INTO out SELECT {case.select} FROM src;"
            )
            running = Running(spark, sql, tmp / name)
            began = running.planned_at
            running.finish()
        else:
            began, _ = in_own_process(case.write, server, name, events)
        consumer.wait(events, "the consumer")
    finally:
        consumer.close()
    assert consumer.first_at is not None and consumer.last_at is not None
    return Timed(events, consumer.last_at - consumer.first_at, consumer.last_at - began)


def run_retained(
    spark: SparkSession,
    case: RetainedSource,
    server: Any,
    events: int,
    tmp: Path,
    *,
    pipeline: bool,
) -> Timed:
    name = _name("source")
    case.fill(server, name, [payload(n) for n in range(events)])
    if pipeline:
        running = Running(spark, _into_blackhole(case, server, name), tmp / name)
        try:
            batches = running.until_rows(events)
        finally:
            running.stop()
        end = batches[-1].end
        return Timed(events, end - batches[0].start, end - running.planned_at)
    began = time.time()
    arrivals = case.read(server, name, events)
    try:
        arrivals.wait(events, "the client")
    finally:
        arrivals.close()
    assert arrivals.reading_at is not None and arrivals.last_at is not None
    return Timed(events, arrivals.last_at - arrivals.reading_at, arrivals.last_at - began)


def run_live(
    spark: SparkSession, case: LiveSource, server: Any, events: int, tmp: Path, *, pipeline: bool
) -> Timed:
    name = _name("live")
    if not pipeline:
        arrivals = case.subscribe(server, name)
        try:
            began, published = in_own_process(case.publish, server, name, events)
            arrivals.wait(events, "the client")
        finally:
            arrivals.close()
        assert arrivals.last_at is not None
        return Timed(events, arrivals.last_at - began, published_s=published - began)
    running = Running(spark, _into_blackhole(case, server, name), tmp / name)
    try:
        # The source subscribes when it first reads: publish a message at a time until one
        # comes through (those before the subscription are lost), then let the batches that
        # carry the others end.
        deadline = time.monotonic() + TIMEOUT_S
        while not any(b.rows for b in running.batches()):
            if time.monotonic() > deadline:
                raise TimeoutError("the source did not subscribe")
            case.publish(server, name, 1)
            time.sleep(0.2)
        time.sleep(1.0)
        probes = sum(b.rows for b in running.batches())
        began, published = in_own_process(case.publish, server, name, events)
        end = running.until_rows(probes + events)[-1].end
    finally:
        running.stop()
    return Timed(events, end - began, published_s=published - began)


@dataclass(frozen=True)
class Compared:
    client: Timed
    arroyo: Timed
    note: str


def run_side(
    spark: SparkSession, case: Case, server: Any, events: int, tmp: Path, *, pipeline: bool
) -> Timed:
    if isinstance(case, SinkCase):
        return run_sink(spark, case, server, events, tmp, pipeline=pipeline)
    if isinstance(case, RetainedSource):
        return run_retained(spark, case, server, events, tmp, pipeline=pipeline)
    return run_live(spark, case, server, events, tmp, pipeline=pipeline)


def compare(
    spark: SparkSession, case: Case, servers: Servers, args: argparse.Namespace
) -> Compared:
    """Each side once unmeasured, on as many events as the measured runs (the first run of a
    source or sink in a JVM pays for loading its code, starting a Python worker for each task
    it runs, and the JIT: seconds, which would otherwise fall on the pipeline; a smaller run
    would start fewer tasks), then ``--repeat`` times, interleaved (client, ours, ours, client,
    ...): the median run of each side by events/s."""
    server = servers[case.server]
    runs: dict[bool, list[Timed]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for pipeline in (False, True):
            run_side(spark, case, server, args.events, Path(tmp), pipeline=pipeline)
        for r in range(args.repeat):
            for pipeline in (False, True) if r % 2 == 0 else (True, False):
                timed = run_side(spark, case, server, args.events, Path(tmp), pipeline=pipeline)
                runs[pipeline].append(timed)
    client, arroyo = (_median(runs[side]) for side in (False, True))
    if isinstance(case, SinkCase):
        note = "first to last message seen by a consumer outside Spark"
    elif isinstance(case, RetainedSource):
        note = "messages kept by the server, each side reading them from the first"
    else:
        sent = []
        for side, timed in (("client", client), ("pipeline", arroyo)):
            assert timed.published_s is not None
            rate = timed.events / timed.published_s
            # Within 10% of its publisher: the side read as fast as it was sent.
            bound = f" (the {side}'s bound)" if timed.per_s > 0.9 * rate else ""
            sent.append(f"{rate:,.0f}/s beside the {side}{bound}")
        note = f"first publish to last read; the publisher sent {', '.join(sent)}"
    return Compared(client, arroyo, note)


def _median(runs: list[Timed]) -> Timed:
    return sorted(runs, key=lambda t: t.per_s)[len(runs) // 2]


# --- the lookup join -------------------------------------------------------------------------


def lookup_join(spark: SparkSession, servers: Servers, args: argparse.Namespace, tmp: Path) -> None:
    server = servers["redis"]
    client = redis_client(server)
    client.flushdb()
    record = json.dumps({"name": "a customer", "plan": "pro"})
    for start in range(0, args.keys, 10_000):
        client.mset({str(k): record for k in range(start, min(start + 10_000, args.keys))})
    cache = "" if args.cache_bytes is None else f", 'lookup.cache.max_bytes' = '{args.cache_bytes}'"
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000000000');\n"
        "CREATE TEMPORARY TABLE customers (id TEXT METADATA FROM 'key' PRIMARY KEY, "
        f"name TEXT, plan TEXT) WITH (connector = 'redis', format = 'json', {server.options()}"
        f"{cache});\nCREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT counter, c.name, c.plan FROM src "
        f"JOIN customers AS c ON CAST(src.counter % {args.keys} AS TEXT) = c.id;"
    )
    runners: list[PipelineRunner] = []

    def ours() -> list[Any]:
        state = Path(tempfile.mkdtemp(dir=tmp))
        program = spark_planner(spark, parallelism=PARALLELISM, state_dir=state / "plan").plan(sql)
        runner = PipelineRunner(
            spark, program, state / "run", max_records_per_batch=args.lookup_batch_rows
        )
        runners.append(runner)
        runner.start()
        return runner.queries

    measure(ours, 2)  # unmeasured: the first run in a JVM pays for loading code and the JIT
    client.config_resetstat()
    measured = measure(ours, args.lookup_batches)
    counts = lookup_counts("customers")  # of the measured run: each run has its own
    for runner in runners:
        runner.stop()
        runner.wait(TIMEOUT_S)
    stats, commands = client.info("stats"), client.info("commandstats")
    read_by_redis = stats["keyspace_hits"] + stats["keyspace_misses"]
    mgets = commands.get("cmdstat_mget", {}).get("calls", 0)

    events = args.lookup_batch_rows * args.lookup_batches
    began = time.perf_counter()
    for start in range(0, events, 1_000):
        client.mget([str(n % args.keys) for n in range(start, min(start + 1_000, events))])
    alone = events / (time.perf_counter() - began)
    client.close()

    goal = 100_000
    print(
        f"\nlookup join, {args.keys:,} keys in Redis, {args.lookup_batch_rows:,}-event "
        f"micro-batches, {args.lookup_batches} measured after 3 warm-up ones:"
    )
    print(
        f"  arroyo: {measured.events_per_s:>12,.0f} events/s in micro-batches "
        f"({measured.events_per_s / PARALLELISM:,.0f}/core; goal {goal:,}: "
        f"{'met' if measured.events_per_s >= goal else 'not met'})"
    )
    print(f"  redis-py alone, MGET of 1,000 keys, no cache: {alone:>12,.0f} events/s")
    if counts is None:
        print("  cache hit rate: no counts (the lookup was not registered)")
        return
    fetched = counts.keys - counts.cache_hits
    print(
        f"  cache hit rate {counts.hit_rate:.1%}, as the lookup counts it over the run (warm-up "
        f"batches too): {counts.rows:,} rows, {counts.keys:,} keys asked of the workers' caches "
        f"(each distinct key of an Arrow batch once), {counts.cache_hits:,} hits, {fetched:,} "
        f"read from Redis ({fetched / counts.rows:.2%} of the rows)"
    )
    print(
        f"  Redis's own count of keys read (INFO keyspace hits + misses): {read_by_redis:,}, "
        f"in {mgets:,} MGETs"
    )


# --- the program -----------------------------------------------------------------------------


def header() -> str:
    return (
        f"{'case':<18} {'side':<8} {'events':>9} {'events/s':>12} {'with start-up':>14} "
        f"{'arroyo/client':>14}"
    )


def print_rows(name: str, result: Compared) -> None:
    for side, timed in (("client", result.client), ("arroyo", result.arroyo)):
        with_start = (
            f"{timed.events / timed.with_start_s:>14,.0f}" if timed.with_start_s else f"{'-':>14}"
        )
        ratio = result.arroyo.per_s / result.client.per_s if result.client.per_s else 0.0
        last = f"{ratio:>14.2f}" if side == "arroyo" else ""
        print(f"{name:<18} {side:<8} {timed.events:>9,} {timed.per_s:>12,.0f} {with_start}{last}")
    print(f"{'':<18} {result.note}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000, help="messages a case")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs a side; the median shown")
    parser.add_argument("--no-lookup", dest="lookup", action="store_false")
    parser.add_argument("--keys", type=int, default=10_000, help="keys of the lookup table")
    parser.add_argument("--lookup-batch-rows", type=int, default=100_000)
    parser.add_argument("--lookup-batches", type=int, default=8)
    parser.add_argument("--cache-bytes", type=int, default=None, help="lookup.cache.max_bytes")
    args = parser.parse_args()
    configure_logging("warning")  # the runner's per-batch events would bury the figures
    args.events -= args.events % PARALLELISM  # an impulse's message_count is per subtask
    chosen = [c for c in args.cases.split(",") if c]
    if unknown := sorted(set(chosen) - set(CASES)):
        parser.error(f"unknown cases: {', '.join(unknown)}")
    spark = get_or_create_session(SessionSettings(parallelism=PARALLELISM))
    spark.conf.set(PROGRESS_KEPT, "100000")
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = Servers(Path(tmp), stack)
        if chosen:
            print(header())
        for name in chosen:
            print_rows(name, compare(spark, CASES[name], servers, args))
        if args.lookup:
            lookup_join(spark, servers, args, Path(tmp))
    spark.stop()  # before the interpreter exits, so that its Python workers end quietly


if __name__ == "__main__":
    main()
