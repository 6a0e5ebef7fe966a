"""A bucket's pending multipart uploads, as the AWS SDK for Python lists them: uploads that no
reader sees yet, stored (and on AWS, billed) until completed or aborted."""

from __future__ import annotations

import boto3
from botocore.config import Config

from arroyo.testing.s3 import S3Server


def pending_uploads(server: S3Server, bucket: str, prefix: str) -> list[str]:
    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    pages = client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(u["Key"] for page in pages for u in page.get("Uploads", []))
