"""A Kinesis client (boto3's) for a table's options, and the errors it raises, in words that name
the stream and the cause."""

from __future__ import annotations

from typing import Any

from arroyo.connectors.kinesis.options import KinesisConnection

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0


class KinesisError(RuntimeError):
    """A stream that cannot be read or written: names it, where it is, and why."""


def where(conn: KinesisConnection) -> str:
    place = conn.aws_endpoint or "AWS"
    return f"{place} ({conn.aws_region})" if conn.aws_region else place


def client(conn: KinesisConnection) -> Any:
    """boto3's Kinesis client: the SDK's own retries (standard mode) for throttling and
    transient faults, bounded timeouts so that a server gone away fails the call."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "max_attempts": 5},
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
