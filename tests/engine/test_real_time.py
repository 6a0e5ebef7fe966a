"""Spark's real-time mode through our runner: the nexmark source read in long-running tasks,
rows into a real Kafka topic as they arrive, offsets checkpointed every batch."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from arroyo.engine.catalog import spark_planner
from arroyo.engine.plans import offset_json
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError
from arroyo.testing.kafka import KafkaBroker

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RATE = 1000  # events/s: event n happens n ms after the source's start
BIDS = "SELECT bid.auction, bid.price, bid.datetime FROM nexmark WHERE bid IS NOT NULL"


def _sql(servers: str, topic: str, query: str = BIDS) -> str:
    return (
        f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{RATE}');\n"
        f"CREATE TABLE out WITH (connector = 'kafka', bootstrap_servers = '{servers}', "
        f"topic = '{topic}', type = 'sink', format = 'json');\n"
        f"INSERT INTO out {query};"
    )


def _runner(
    spark: SparkSession, sql: str, state: Path, batch_ms: int, stop_after: int | None = None
) -> PipelineRunner:
    program = spark_planner(spark, parallelism=2, state_dir=state).plan(sql)
    return PipelineRunner(
        spark, program, state, real_time_batch_ms=batch_ms, stop_after_batches=stop_after
    )


def _await_records(
    broker: KafkaBroker, topic: str, count: int, query: StreamingQuery, timeout: float = 120
) -> None:
    """Block until ``topic`` holds ``count`` records (each poll waits on the broker), failing
    at once if ``query`` dies and after ``timeout`` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"await-{topic}"}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen, deadline = 0, time.monotonic() + timeout
        while seen < count:
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, f"{seen} of {count} records after {timeout} s"
            seen += sum(m.error() is None for m in consumer.consume(1000, timeout=0.5))
    finally:
        consumer.close()


def _event_numbers(broker: KafkaBroker, topic: str, state: Path) -> list[int]:
    """The event number of every record in ``topic`` (from its event time), in no order."""
    start_ms = json.loads((state / "tables" / "nexmark" / "start_time.json").read_text())
    numbers = []
    for record in broker.consume(topic):
        assert record.value is not None
        when = datetime.fromisoformat(json.loads(record.value)["datetime"]).replace(tzinfo=UTC)
        numbers.append(round(when.timestamp() * 1000) - start_ms["start_time_ms"])
    return numbers


def test_rows_reach_the_sink_before_the_first_checkpoint(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    runner = _runner(
        spark, _sql(kafka_broker.bootstrap_servers, kafka_topic), tmp_path, batch_ms=600_000
    )
    runner.start()
    try:
        (query,) = runner.queries
        _await_records(kafka_broker, kafka_topic, 500, query)
        # A micro-batch would have committed before its rows were visible; this batch runs
        # for ten minutes, so every row so far came from inside it.
        assert query.lastProgress is None
        numbers = _event_numbers(kafka_broker, kafka_topic, tmp_path)
        assert all(n % 50 >= 4 for n in numbers)  # bids only
    finally:
        runner.stop(graceful=False)
        runner.wait(60)


def test_stopped_and_resumed_from_its_checkpoint_nothing_is_lost(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    sql = _sql(kafka_broker.bootstrap_servers, kafka_topic)
    first = _runner(spark, sql, tmp_path, batch_ms=5_000, stop_after=2)
    first.start()
    (query,) = first.queries
    first.wait(180)  # returns once two batches have committed, stopping gracefully
    (committed,) = [json.loads(offset_json(s.endOffset) or "") for s in query.lastProgress.sources]
    assert len(committed["next"]) == 2  # one position per task

    second = _runner(spark, sql, tmp_path, batch_ms=5_000, stop_after=1)
    second.start()
    (query,) = second.queries
    second.wait(180)
    (resumed,) = [
        json.loads(offset_json(s.startOffset) or "") for s in query.recentProgress[0].sources
    ]
    assert resumed == committed
    (final,) = [json.loads(offset_json(s.endOffset) or "") for s in query.lastProgress.sources]

    numbers = _event_numbers(kafka_broker, kafka_topic, tmp_path)
    assert min(final["next"]) > max(committed["next"])
    # Every bid up to the resumed run's last checkpoint is there (each task may have read a
    # little further when the run stopped), and nothing but bids.
    assert set(numbers) >= {n for n in range(min(final["next"])) if n % 50 >= 4}
    assert all(n % 50 >= 4 for n in numbers)
    # The sink is at least once: a bid read after the first run's last checkpoint may appear
    # twice, and no other.
    repeated = [n for n, times in Counter(numbers).items() if times > 1]
    assert all(n >= min(committed["next"]) for n in repeated)


def test_a_window_is_refused_rather_than_turned_into_updates(
    spark: SparkSession, tmp_path: Path
) -> None:
    sql = (
        f"CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{RATE}');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT tumble(interval '1 second') AS window, count(*) AS n "
        "FROM nexmark GROUP BY 1;"
    )
    runner = _runner(spark, sql, tmp_path, batch_ms=5_000)
    with pytest.raises(JobFailedError) as caught:
        runner.start()
    assert caught.value.code == "real_time_unsupported"
    # Naming the sink whose query cannot run so is the behaviour under test.
    assert "'out'" in caught.value.message
    assert not spark.streams.active


def test_kafka_to_kafka(
    spark: SparkSession, kafka_broker: KafkaBroker, kafka_topic: str, tmp_path: Path
) -> None:
    out = f"{kafka_topic}-out"
    kafka_broker.create_topic(out, partitions=2)
    kafka_broker.produce(kafka_topic, [json.dumps({"id": i, "name": f"n{i}"}) for i in range(300)])
    servers = kafka_broker.bootstrap_servers
    sql = (
        f"CREATE TABLE src (id BIGINT, name TEXT) WITH (connector = 'kafka', "
        f"bootstrap_servers = '{servers}', topic = '{kafka_topic}', type = 'source', "
        f"format = 'json', 'source.offset' = 'earliest');\n"
        f"CREATE TABLE dst WITH (connector = 'kafka', bootstrap_servers = '{servers}', "
        f"topic = '{out}', type = 'sink', format = 'json');\n"
        "INSERT INTO dst SELECT id * 10 AS id, upper(name) AS name FROM src WHERE id % 3 = 0;"
    )
    runner = _runner(spark, sql, tmp_path, batch_ms=600_000)
    runner.start()
    try:
        (query,) = runner.queries
        _await_records(kafka_broker, out, 100, query)
        records = kafka_broker.consume(out)
        assert query.lastProgress is None  # still inside its first batch
        rows = sorted((json.loads(r.value or b"") for r in records), key=lambda r: r["id"])
        assert rows == [{"id": i * 10, "name": f"N{i}"} for i in range(0, 300, 3)]
    finally:
        runner.stop(graceful=False)
        runner.wait(60)
