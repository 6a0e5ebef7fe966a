"""The ``kinesis`` source and sink against a real Kinesis-compatible server (kinesalite), read and
written by an independent boto3 client: a sink's rows each put once over the stream's shards; a
source read from the earliest record, stopped, resharded while down and started again, with every
record once and each partition key's records in order; ``latest`` skipping what came before; and
a missing stream, a server that is not there, and options that cannot work, each named."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.kinesis import REGION, KinesisServer
from tests.connectors.pipelines import json_lines, start, stop
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.kinesis]


def read_stream(server: KinesisServer, stream: str) -> list[dict[str, Any]]:
    """Every record the stream holds, shard by shard from its first, as a plain client sees
    them."""
    kinesis = server.client()
    records: list[dict[str, Any]] = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            got = kinesis.get_records(ShardIterator=iterator)
            records += got["Records"]
            if not got["Records"]:
                break
            iterator = got.get("NextShardIterator")
    return records


def _put(server: KinesisServer, stream: str, values: range, keys: int = 4) -> None:
    server.client().put_records(
        StreamName=stream,
        Records=[
            {"Data": json.dumps({"n": n, "k": n % keys}).encode(), "PartitionKey": str(n % keys)}
            for n in values
        ],
    )


def _source_sql(server: KinesisServer, stream: str, out: Path, offset: str) -> str:
    return (
        "CREATE TABLE src (n BIGINT, k BIGINT, shard TEXT METADATA FROM 'shard_id', "
        "pk TEXT METADATA FROM 'partition_key') WITH (connector = 'kinesis', type = 'source', "
        f"{server.options()}, stream_name = '{stream}', 'source.offset' = '{offset}', "
        "format = 'json');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\nINSERT INTO out SELECT n, k, shard, pk FROM src;"
    )


def test_a_sink_puts_every_row_once_in_batches(
    spark: SparkSession, kinesis: KinesisServer, tmp_path: Path
) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(stream, shards=2)
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000000', "
        "message_count = '50');\n"
        f"CREATE TABLE out WITH (connector = 'kinesis', type = 'sink', {kinesis.options()}, "
        f"stream_name = '{stream}', 'sink.max_records_per_batch' = '7', format = 'json');\n"
        "INSERT INTO out SELECT counter FROM src;"
    )
    runner = start(spark, sql, tmp_path / "state")
    runner.wait(timeout=120)
    records = read_stream(kinesis, stream)
    assert sorted(json.loads(r["Data"])["counter"] for r in records) == list(range(50))
    assert len({r["PartitionKey"] for r in records}) == 50  # spread over the shards


def test_a_stream_is_read_once_across_a_restart_and_a_split(
    spark: SparkSession, kinesis: KinesisServer, tmp_path: Path
) -> None:
    """20 records, a stop; the shard split while the pipeline is down and 20 more put (some
    into the parent before the split, the rest into its children); a start: all 40 once,
    and each partition key's records in the order they were put."""
    stream = f"s-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(stream, shards=1)
    _put(kinesis, stream, range(20))
    out = tmp_path / "out.json"
    sql = _source_sql(kinesis, stream, out, "earliest")
    state = tmp_path / "state"
    runner = start(spark, sql, state)
    wait_until("the first 20", lambda: len(json_lines(out)) >= 20, timeout=120)
    stop(runner)

    _put(kinesis, stream, range(20, 30))
    client = kinesis.client()
    parent = client.list_shards(StreamName=stream)["Shards"][0]
    middle = int(parent["HashKeyRange"]["EndingHashKey"]) // 2
    client.split_shard(
        StreamName=stream, ShardToSplit=parent["ShardId"], NewStartingHashKey=str(middle)
    )
    wait_until(
        "the split",
        lambda: len(client.list_shards(StreamName=stream)["Shards"]) == 3,
        timeout=30,
    )
    _put(kinesis, stream, range(30, 40))
    runner = start(spark, sql, state)
    try:
        wait_until("all 40", lambda: len(json_lines(out)) >= 40, timeout=120)
    finally:
        stop(runner)
    rows = json_lines(out)
    assert sorted(r["n"] for r in rows) == list(range(40))
    assert {r["shard"] for r in rows if r["n"] >= 30} <= {
        s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"]
    } - {parent["ShardId"]}
    for key in range(4):
        ns = [r["n"] for r in rows if r["k"] == key]
        assert ns == sorted(ns), f"partition key {key} out of order: {ns}"
        assert all(r["pk"] == str(key) for r in rows if r["k"] == key)


def test_latest_reads_only_what_is_put_after_the_start(
    spark: SparkSession, kinesis: KinesisServer, tmp_path: Path
) -> None:
    stream = f"s-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(stream, shards=2)
    _put(kinesis, stream, range(-5, 0))
    out = tmp_path / "out.json"
    runner = start(spark, _source_sql(kinesis, stream, out, "latest"), tmp_path / "state")
    try:
        wait_until(
            "the records put after the start",
            lambda: _put(kinesis, stream, range(7, 8)) or any(r["n"] == 7 for r in json_lines(out)),
            timeout=120,
        )
    finally:
        stop(runner)
    assert {r["n"] for r in json_lines(out)} == {7}


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing", r"kinesis stream 'nope' at http://127\.0\.0\.1:\d+ \(us-east-1\): listing "
         r"its shards failed: ResourceNotFoundException"),
        ("down", r"kinesis stream 'nope' at http://127\.0\.0\.1:1 \(us-east-1\): listing its "
         r"shards failed: Could not connect"),
    ],
)  # fmt: skip
def test_a_stream_that_cannot_be_read_fails_the_job_naming_it(
    spark: SparkSession, kinesis: KinesisServer, tmp_path: Path, where: str, message: str
) -> None:
    options = kinesis.options()
    if where == "down":
        options = options.replace(kinesis.endpoint, "http://127.0.0.1:1")
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'kinesis', type = 'source', {options}, "
        "stream_name = 'nope', format = 'json');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM src;"
    )
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=message):
        runner.wait(timeout=120)


def test_autocomplete_lists_streams_and_a_sample_reads_the_newest_records(
    kinesis: KinesisServer,
) -> None:
    """What a profile's autocompletion and a saved table's test read (the api calls these):
    the stream names, and the newest records over every shard, with no reader's position
    moved (nothing is stored)."""
    from arroyo.connectors.base import ConnectorError
    from arroyo.connectors.kinesis import KinesisConnector
    from arroyo.connectors.kinesis.options import KinesisConnection

    stream = f"sampled-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(stream, shards=2)
    for n in range(8):  # one call each, so that arrival times are ordered
        _put(kinesis, stream, range(n, n + 1))
    conn = KinesisConnector()
    settings = {
        "aws_endpoint": kinesis.endpoint,
        "aws_region": REGION,
        "aws_access_key_id": "arroyo",
        "aws_secret_access_key": "arroyo-test",
    }
    listed = conn.autocomplete(KinesisConnection.model_validate(settings))["stream_name"]
    assert stream in listed
    options = conn.parse_options({**settings, "stream_name": stream})
    sampled = conn.sample(options, 3, 10.0)
    assert [json.loads(r)["n"] for r in sampled or []] == [5, 6, 7]

    missing = conn.parse_options({**settings, "stream_name": "nope"})
    named = re.escape(f"kinesis stream 'nope' at {kinesis.endpoint}")
    with pytest.raises(ConnectorError, match=named):
        conn.sample(missing, 3, 10.0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("type = 'source', 'source.offset' = 'first'", "source.offset"),
        ("type = 'source', 'sink.max_records_per_batch' = '10'", "sink.max_records_per_batch"),
        ("type = 'sink', 'sink.max_records_per_batch' = '501'", "sink.max_records_per_batch"),
        ("type = 'sink', aws_access_key_id = 'k'", "aws_secret_access_key"),
    ],
)
def test_options_that_cannot_work_are_refused(
    spark: SparkSession, tmp_path: Path, options: str, message: str
) -> None:
    table = (
        f"CREATE TABLE k (n BIGINT) WITH (connector = 'kinesis', {options}, stream_name = 's', "
        "aws_region = 'us-east-1', format = 'json');\n"
    )
    if "'source'" in options:
        sql = (
            table
            + "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM k;"
        )
    else:
        sql = (
            table + "CREATE TABLE src WITH (connector = 'impulse', event_rate = '1');\n"
            "INSERT INTO k SELECT counter AS n FROM src;"
        )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


def test_the_test_server_outlives_a_request_its_client_abandons(kinesis: KinesisServer) -> None:
    """kinesalite alone exits when a client resets a request mid-body (a timed-out SDK call
    does), taking every later test with it; the server the tests start must go on."""
    import socket
    import struct

    before = kinesis.client().list_streams()["StreamNames"]
    with socket.create_connection((kinesis.host, kinesis.port)) as conn:
        conn.sendall(
            b"POST / HTTP/1.1\r\nHost: k\r\nContent-Type: application/x-amz-json-1.1\r\n"
            b"X-Amz-Target: Kinesis_20131202.ListStreams\r\nContent-Length: 100\r\n\r\n{"
        )
        # A whole request on another connection: by its answer, the server has read this head
        # (one event loop), so the reset below aborts a request rather than a bare connection.
        assert kinesis.client().list_streams()["StreamNames"] == before
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert kinesis.client().list_streams()["StreamNames"] == before
