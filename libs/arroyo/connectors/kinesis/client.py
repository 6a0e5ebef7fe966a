"""A Kinesis client (boto3's) for a table's options, and the errors it raises, in words that name
the stream and the cause."""

from __future__ import annotations

from typing import Any

from arroyo.connectors.kinesis.options import KinesisConnection, KinesisOptions

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0


class KinesisError(RuntimeError):
    """A stream that cannot be read or written: names it, where it is, and why."""


def where(conn: KinesisConnection) -> str:
    place = conn.aws_endpoint or "AWS"
    return f"{place} ({conn.aws_region})" if conn.aws_region else place


def client(
    conn: KinesisConnection, read_timeout_s: float = READ_TIMEOUT_S, attempts: int = 5
) -> Any:
    """boto3's Kinesis client: the SDK's own retries (standard mode, ``attempts`` in all) for
    throttling and transient faults, bounded timeouts so that a server gone away fails the
    call."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    config = Config(
        connect_timeout=min(CONNECT_TIMEOUT_S, read_timeout_s),
        read_timeout=read_timeout_s,
        retries={"mode": "standard", "max_attempts": attempts},
    )
    try:
        return boto3.session.Session().client(
            "kinesis",
            region_name=conn.aws_region,
            endpoint_url=conn.aws_endpoint,
            aws_access_key_id=conn.aws_access_key_id,
            aws_secret_access_key=conn.aws_secret_access_key,
            config=config,
        )
    except NoRegionError:
        raise KinesisError(
            "no AWS region: set aws_region on the table (or AWS_REGION in the environment)"
        ) from None


def cause(err: BaseException) -> str:
    """What went wrong, in one line: the service's error code and message, or the transport's."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip()
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def error_code(err: BaseException) -> str | None:
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def stream_names(conn: KinesisConnection) -> list[str]:
    """Every stream's name (ListStreams, page by page)."""
    kinesis = client(conn)
    names: list[str] = []
    page = kinesis.list_streams(Limit=100)
    while True:
        names += page["StreamNames"]
        if not page.get("HasMoreStreams") or not page["StreamNames"]:
            return names
        page = kinesis.list_streams(Limit=100, ExclusiveStartStreamName=names[-1])


# How far back a sample looks for the newest records, and how many GetRecords calls a shard
# may take to get there.
_SAMPLE_WINDOW_S = 3600.0
_SAMPLE_CALLS_PER_SHARD = 20


def newest_records(opts: KinesisOptions, count: int, timeout_s: float) -> list[bytes]:
    """Up to ``count`` of the stream's newest records (of the last hour, by arrival time),
    read with shard iterators: nothing is stored, so no reader's position moves. Each shard
    is read forward from an hour ago for at most _SAMPLE_CALLS_PER_SHARD calls and its share
    of ``timeout_s``: a shard busier than that shows the newest of what was read. A stream
    younger than the hour is read from its first record (TRIM_HORIZON), which is the same and
    spares kinesalite an AT_TIMESTAMP with no record after it, which it never answers."""
    import time

    # The SDK's own timeouts: a call cut short aborts its request, which kinesalite (the
    # tests' server) does not survive.
    kinesis = client(opts)
    began = time.monotonic()
    try:
        summary = kinesis.describe_stream_summary(StreamName=opts.stream_name)
        created = summary["StreamDescriptionSummary"]["StreamCreationTimestamp"].timestamp()
        since = time.time() - _SAMPLE_WINDOW_S
        # A stream younger than the window: from its first record.
        start: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
        if since > created:
            start = {"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": since}
        shards: list[str] = []
        listed = kinesis.list_shards(StreamName=opts.stream_name)
        while True:
            shards += [shard["ShardId"] for shard in listed["Shards"]]
            if not listed.get("NextToken"):
                break
            listed = kinesis.list_shards(NextToken=listed["NextToken"])
        found: list[tuple[Any, str, bytes]] = []
        for i, shard_id in enumerate(shards):
            # Each shard its share of what time is left.
            left = timeout_s - (time.monotonic() - began)
            if left <= 0:
                break
            deadline = time.monotonic() + left / (len(shards) - i)
            iterator = kinesis.get_shard_iterator(
                StreamName=opts.stream_name, ShardId=shard_id, **start
            )["ShardIterator"]
            found += _newest_of_shard(kinesis, iterator, count, deadline)
    except Exception as err:  # botocore's errors
        raise KinesisError(
            f"kinesis stream '{opts.stream_name}' at {where(opts)}: reading failed: {cause(err)}"
        ) from err
    return [data for _at, _seq, data in sorted(found)[-count:]]


def _newest_of_shard(
    kinesis: Any, iterator: str | None, count: int, deadline: float
) -> list[tuple[Any, str, bytes]]:
    import time

    newest: list[tuple[Any, str, bytes]] = []
    for _ in range(_SAMPLE_CALLS_PER_SHARD):
        if iterator is None or time.monotonic() >= deadline:
            break
        page = kinesis.get_records(ShardIterator=iterator, Limit=1000)
        records = [
            (r["ApproximateArrivalTimestamp"], r["SequenceNumber"], r["Data"])
            for r in page["Records"]
        ]
        newest = (newest + records)[-count:]
        if not page.get("MillisBehindLatest"):
            break
        iterator = page.get("NextShardIterator")
    return newest
