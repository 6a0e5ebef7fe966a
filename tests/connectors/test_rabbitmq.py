"""The ``rabbitmq`` source against a real node (Debian's rabbitmq-server with the stream
plugin), written to by an independent rstream producer: a stream read from its first message,
a restart resuming after the last committed batch with each message once, ``source.offset =
'next'`` skipping what came before, and a stream that does not exist named in the error."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.rabbitmq import RabbitmqNode
from tests.connectors.pipelines import json_lines, start, stop
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


def _producer(node: RabbitmqNode) -> Any:
    """An independent client's producer on ``node`` (an async context manager)."""
    from rstream import Producer

    return Producer(node.host, node.stream_port, username=node.username, password=node.password)


def _publish(node: RabbitmqNode, stream: str, values: list[int], create: bool = False) -> None:
    async def send() -> None:
        async with _producer(node) as producer:
            if create:
                await producer.create_stream(stream, exists_ok=True)
            for n in values:
                await producer.send_wait(stream, json.dumps({"n": n}).encode())

    asyncio.run(send())


def _sql(node: RabbitmqNode, stream: str, out: Path, offset: str) -> str:
    return (
        f"CREATE TABLE src (n BIGINT, o BIGINT METADATA FROM 'offset') WITH ("
        f"connector = 'rabbitmq', {node.options()}, stream = '{stream}', "
        f"'source.offset' = '{offset}', format = 'json');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\nINSERT INTO out SELECT n, o FROM src;"
    )


def test_a_stream_is_read_from_its_first_message_and_resumed_once(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    """Two queries read the table, each with its own reader and its own state: each sink gets
    every message once across the restart."""
    stream = f"s-{uuid.uuid4().hex[:8]}"
    _publish(rabbitmq, stream, list(range(5)), create=True)
    out, other = tmp_path / "out.json", tmp_path / "other.json"
    sql = _sql(rabbitmq, stream, out, "first") + (
        f"\nCREATE TABLE other WITH (connector = 'single_file', path = '{other}', "
        "type = 'sink', format = 'json');\nINSERT INTO other SELECT n, o FROM src;"
    )
    state = tmp_path / "state"
    runner = start(spark, sql, state)
    for path in (out, other):
        wait_until("the first five", lambda p=path: len(json_lines(p)) >= 5, timeout=120)
    stop(runner)
    _publish(rabbitmq, stream, list(range(5, 10)))
    runner = start(spark, sql, state)
    try:
        for path in (out, other):
            wait_until("all ten", lambda p=path: len(json_lines(p)) >= 10, timeout=120)
    finally:
        stop(runner)
    for path in (out, other):
        rows = json_lines(path)
        assert sorted(r["n"] for r in rows) == list(range(10))
        assert sorted(r["o"] for r in rows) == list(range(10))  # the stream's own offsets


def test_amqp_messages_and_raw_ones_are_read_whole_by_the_tasks(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    """Enough messages for a micro-batch of more than one task, half written as AMQP 1.0
    messages (as every client but a raw-bytes producer writes them), half as raw bytes: each
    read once, by its body."""
    from rstream import AMQPMessage

    stream, count = f"s-{uuid.uuid4().hex[:8]}", 30_000

    async def send() -> None:
        async with _producer(rabbitmq) as producer:
            await producer.create_stream(stream)
            for lo in range(0, count, 999):  # chunks that do not end where a range does
                batch: list[bytes | AMQPMessage] = []
                for n in range(lo, min(lo + 999, count)):
                    value = json.dumps({"n": n}).encode()
                    batch.append(AMQPMessage(body=value) if n % 2 else value)
                await producer.send_batch(stream, batch)

    asyncio.run(send())
    out = tmp_path / "out.json"
    # Two tasks, each subscribing at its range's first offset, in the middle of a chunk.
    runner = start(spark, _sql(rabbitmq, stream, out, "first"), tmp_path / "state", parallelism=2)
    try:
        wait_until("every message", lambda: len(json_lines(out)) >= count, timeout=120)
    finally:
        stop(runner)
    rows = json_lines(out)
    assert sorted(r["o"] for r in rows) == list(range(count))
    assert all(r["n"] == r["o"] for r in rows)


def test_a_batch_is_split_into_offset_ranges_for_the_tasks() -> None:
    from arroyo.connectors.rabbitmq.source import split

    assert [(r.begin, r.end) for r in split(100, 30_100, 2)] == [(100, 15_100), (15_100, 30_100)]
    assert [(r.begin, r.end) for r in split(0, 15_000, 4)] == [(0, 15_000)]  # too few for two
    assert [(r.begin, r.end) for r in split(7, 8, 2)] == [(7, 8)]
    assert split(8, 8, 2) == []  # an empty batch: no task subscribes for nothing


def test_next_reads_only_what_is_published_after_thestart(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    _publish(rabbitmq, stream, [-1, -2], create=True)
    out = tmp_path / "out.json"
    runner = start(spark, _sql(rabbitmq, stream, out, "next"), tmp_path / "state")
    try:
        wait_until(
            "the messages published after the start",
            lambda: _publish(rabbitmq, stream, [7]) or any(r["n"] == 7 for r in json_lines(out)),
            timeout=120,
        )
    finally:
        stop(runner)
    assert all(r["n"] == 7 for r in json_lines(out))


def test_a_sample_reads_the_newest_messages(rabbitmq: RabbitmqNode) -> None:
    """What a saved table's test reads (the api calls it): the stream's newest messages; a
    missing stream named."""
    from arroyo.connectors.base import ConnectorError
    from arroyo.connectors.rabbitmq import RabbitmqConnector

    stream = f"s-{uuid.uuid4().hex[:8]}"
    _publish(rabbitmq, stream, list(range(8)), create=True)
    conn = RabbitmqConnector()
    settings = {
        "host": rabbitmq.host,
        "port": str(rabbitmq.stream_port),
        "username": rabbitmq.username,
        "password": rabbitmq.password,
    }
    sampled = conn.sample(conn.parse_options({**settings, "stream": stream}), 3, 10.0)
    assert [json.loads(m)["n"] for m in sampled] == [5, 6, 7]
    with pytest.raises(ConnectorError, match=r"cannot read stream 'nope'.*no stream named 'nope'"):
        conn.sample(conn.parse_options({**settings, "stream": "nope"}), 3, 10.0)


def test_a_missing_stream_fails_the_job_naming_it(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    runner = start(spark, _sql(rabbitmq, "nope", tmp_path / "o.json", "first"), tmp_path / "s")
    with pytest.raises(JobFailedError, match=r"cannot read stream 'nope' at 127\.0\.0\.1"):
        runner.wait(timeout=120)


def test_an_offset_that_is_not_one_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    sql = (
        "CREATE TABLE src (n BIGINT) WITH (connector = 'rabbitmq', stream = 's', "
        "'source.offset' = 'earliest', format = 'json');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert "invalid value for source.offset 'earliest'" in text, text


def test_offsets_another_consumer_tracks_in_the_stream_are_stepped_over(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    """Another application storing its offset writes a chunk of the server's own into the
    stream, which takes offsets no message has: every message is read once all the same."""
    from rstream import Consumer

    stream = f"s-{uuid.uuid4().hex[:8]}"
    _publish(rabbitmq, stream, list(range(5)), create=True)

    async def track() -> None:
        async with Consumer(
            rabbitmq.host, rabbitmq.stream_port, username=rabbitmq.username,
            password=rabbitmq.password,
        ) as consumer:  # fmt: skip
            await consumer.store_offset(stream, "another-app", 2)
            assert await consumer.query_offset(stream, "another-app") == 2

    asyncio.run(track())
    _publish(rabbitmq, stream, list(range(5, 10)))
    out = tmp_path / "out.json"
    runner = start(spark, _sql(rabbitmq, stream, out, "first"), tmp_path / "state")
    try:
        wait_until("all ten", lambda: len(json_lines(out)) >= 10, timeout=120)
    finally:
        stop(runner)
    rows = json_lines(out)
    assert sorted(r["n"] for r in rows) == list(range(10))
    offsets = [r["o"] for r in sorted(rows, key=lambda r: r["n"])]
    assert offsets == sorted(set(offsets))  # each message its own offset, in order


def test_a_stream_deleted_mid_run_fails_the_job_naming_it(
    spark: SparkSession, rabbitmq: RabbitmqNode, tmp_path: Path
) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    _publish(rabbitmq, stream, list(range(3)), create=True)
    out = tmp_path / "out.json"
    runner = start(spark, _sql(rabbitmq, stream, out, "first"), tmp_path / "state")
    try:
        wait_until("the first three", lambda: len(json_lines(out)) >= 3, timeout=120)

        async def delete() -> None:
            async with _producer(rabbitmq) as producer:
                await producer.delete_stream(stream)

        asyncio.run(delete())
        with pytest.raises(JobFailedError, match=rf"stream '{stream}' changed at 127\.0\.0\.1"):
            runner.wait(timeout=120)
    finally:
        runner.stop()  # not stop(): its wait would raise the failure again
