"""Paths and storage options as Arroyo takes them (arroyo.connectors.storage), and the Hadoop
settings they become; a bad one is refused at planning, naming what to write instead."""

from __future__ import annotations

import pytest

from arroyo.connectors.filesystem.options import FilesystemOptions
from arroyo.connectors.storage import StorageError, hadoop_settings, parse_location


@pytest.mark.parametrize(
    ("path", "uri", "bucket", "endpoint", "region"),
    [
        ("s3://data/events/", "s3a://data/events/", "data", None, None),
        ("S3A://data", "s3a://data/", "data", None, None),
        ("s3::http://127.0.0.1:9000/data/x", "s3a://data/x", "data", "http://127.0.0.1:9000", None),
        ("https://s3.eu-west-1.amazonaws.com/data/x", "s3a://data/x", "data", None, "eu-west-1"),
        ("https://data.s3.us-west-2.amazonaws.com/x", "s3a://data/x", "data", None, "us-west-2"),
    ],
)
def test_s3_paths(
    path: str, uri: str, bucket: str, endpoint: str | None, region: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("AWS_ENDPOINT", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    loc = parse_location(path)
    assert (loc.scheme, loc.uri, loc.bucket, loc.endpoint, loc.region) == (
        "s3",
        uri,
        bucket,
        endpoint,
        region,
    )


def test_local_and_other_stores() -> None:
    assert parse_location("/tmp/x").uri == "/tmp/x"
    assert parse_location("file:///tmp/x").uri == "/tmp/x"
    assert parse_location("gs://b-1/k").scheme == "gs"
    assert parse_location("abfs://c@acct.dfs.core.windows.net/k").bucket == "c"


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("ftp://host/x", "unknown scheme 'ftp'"),
        ("s3://Upper_Case/x", "a bucket name is"),
        ("", "path is empty"),
    ],
)
def test_bad_paths_are_refused(path: str, says: str) -> None:
    with pytest.raises(StorageError, match=says):
        parse_location(path)


def test_storage_options_become_the_buckets_hadoop_settings() -> None:
    options = FilesystemOptions.model_validate(
        {
            "path": "s3://data/out",
            "storage.aws_endpoint": "http://127.0.0.1:9000",
            "storage.aws_access_key_id": "k",
            "storage.aws_secret_access_key": "s",
            "storage.region": "eu-central-1",
        }
    )
    settings = hadoop_settings(options.location)
    base = "fs.s3a.bucket.data."
    assert settings[base + "endpoint"] == "http://127.0.0.1:9000"
    assert settings[base + "path.style.access"] == "true"
    assert settings[base + "connection.ssl.enabled"] == "false"
    assert settings[base + "endpoint.region"] == "eu-central-1"
    assert (settings[base + "access.key"], settings[base + "secret.key"]) == ("k", "s")


def test_hadoop_keys_pass_through_and_unknown_keys_are_refused() -> None:
    options = FilesystemOptions.model_validate(
        {"path": "gs://b-1/x", "storage.fs.gs.project.id": "p"}
    )
    assert hadoop_settings(options.location) == {"fs.gs.project.id": "p"}
    with pytest.raises(ValueError, match=r"unknown storage option 'storage\.aws_secret'"):
        FilesystemOptions.model_validate({"path": "s3://b-1/x", "storage.aws_secret": "s"})
    with pytest.raises(ValueError, match="give both, or neither"):
        FilesystemOptions.model_validate({"path": "s3://b-1/x", "storage.aws_access_key_id": "k"})


def test_a_tables_own_hadoop_keys_win_over_the_computed_ones() -> None:
    options = FilesystemOptions.model_validate(
        {
            "path": "s3://data/out",
            "storage.aws_endpoint": "http://127.0.0.1:9000",
            "storage.fs.s3a.bucket.data.retry.limit": "9",
        }
    )
    assert hadoop_settings(options.location)["fs.s3a.bucket.data.retry.limit"] == "9"
