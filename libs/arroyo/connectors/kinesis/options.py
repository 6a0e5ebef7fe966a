"""The Kinesis connector's options, named as Arroyo names them (``stream_name``, ``aws_region``,
``source.offset``, ``sink.max_records_per_batch``, ``sink.max_bytes_per_batch``,
``sink.flush_interval_millis``), with three of our own: ``aws_endpoint`` (a Kinesis-compatible
server elsewhere than AWS's, or a VPC endpoint) and ``aws_access_key_id`` /
``aws_secret_access_key`` (otherwise the AWS SDK's default chain: the environment, the shared
credentials file, an instance or pod role, as Arroyo has it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from arroyo.connectors.base import SECRET, ConnectorOptions

# Kinesis's own limits on one PutRecords request.
MAX_RECORDS_PER_REQUEST = 500
MAX_BYTES_PER_REQUEST = 4_000_000


class KinesisConnection(ConnectorOptions):
    """Where Kinesis is and who we are to it."""

    aws_region: str | None = Field(
        None, description="the AWS region (otherwise AWS_REGION or the SDK's configuration)"
    )
    aws_endpoint: str | None = Field(
        None,
        description="the Kinesis API's URL, where not AWS's own for the region (ours, not "
        "Arroyo's)",
    )
    aws_access_key_id: str | None = Field(
        None, description="an access key (otherwise the SDK's default credentials chain)"
    )
    aws_secret_access_key: str | None = Field(
        None, description="its secret", json_schema_extra=SECRET
    )

    @model_validator(mode="after")
    def _keys(self) -> KinesisConnection:
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ValueError("aws_access_key_id and aws_secret_access_key are given together")
        return self


class KinesisOptions(KinesisConnection):
    """A stream; where a source starts; how a sink batches its writes."""

    stream_name: str = Field(description="the Kinesis stream", min_length=1)
    source_offset: Literal["latest", "earliest"] = Field(
        "latest",
        alias="source.offset",
        description="where a new pipeline starts reading each shard: latest (what is put from "
        "now on) or earliest (the oldest record the stream retains)",
    )
    sink_max_records_per_batch: int = Field(
        MAX_RECORDS_PER_REQUEST,
        alias="sink.max_records_per_batch",
        ge=1,
        le=MAX_RECORDS_PER_REQUEST,
        description="records in one PutRecords request",
    )
    sink_max_bytes_per_batch: int = Field(
        MAX_BYTES_PER_REQUEST,
        alias="sink.max_bytes_per_batch",
        ge=1,
        le=MAX_BYTES_PER_REQUEST,
        description="bytes (records and partition keys) in one PutRecords request",
    )
    sink_flush_interval_millis: int = Field(
        1000,
        alias="sink.flush_interval_millis",
        ge=0,
        description="the longest a record waits in a batch before it is sent",
    )


SOURCE_ONLY = ("source.offset",)
SINK_ONLY = (
    "sink.max_records_per_batch",
    "sink.max_bytes_per_batch",
    "sink.flush_interval_millis",
)
