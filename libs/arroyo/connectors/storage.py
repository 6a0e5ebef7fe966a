"""Where a file table lives: a local path or an object store, and how to reach it.

Paths as Arroyo takes them (its ``arroyo-storage``): a local path (``/data``, ``file:///data``);
S3 as ``s3://bucket/key`` (or ``s3a://``), ``s3::http://host:port/bucket/key`` (an S3-compatible
server's endpoint in the path), ``https://s3.<region>.amazonaws.com/bucket/key`` or
``https://bucket.s3.<region>.amazonaws.com/key``; ``gs://bucket/key``; and
``abfs[s]://container@account.dfs.core.windows.net/key``.

``storage_options`` (``storage.<key>`` in a table's WITH clause) use the key names of Arroyo's
object store: ``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``,
``aws_region``, ``aws_endpoint``, ``aws_allow_http``, ``aws_virtual_hosted_style_request``
(each also without its ``aws_`` prefix). Keys that start with ``fs.`` go to Hadoop as they are:
that is how ``gs://`` and ``abfs://`` are configured (their Hadoop connectors' own keys), and how
any S3A setting can be given. Without keys, S3A's default chain applies (the ``AWS_*``
environment variables, then the instance's role); ``AWS_ENDPOINT`` and ``AWS_DEFAULT_REGION``
apply as in Arroyo when a path names neither.

Spark reaches S3 through Hadoop's S3A (``hadoop-aws``), configured per bucket
(``fs.s3a.bucket.<bucket>.*``) so tables on different buckets keep their own credentials; the
sink's commit steps on the driver go through pyarrow's file systems, configured from the same
options."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import SparkSession

Scheme = Literal["file", "s3", "gs", "abfs"]

_BUCKET = r"(?P<bucket>[a-z0-9][a-z0-9\-\.]{1,61}[a-z0-9])"
_KEY = r"(?:/(?P<key>.*))?"
_S3_FORMS = (
    re.compile(rf"^[sS]3[aA]?://{_BUCKET}{_KEY}$"),
    re.compile(
        rf"^[sS]3[aA]?::(?P<endpoint>https?://[^/:]+(?::\d+)?)/{_BUCKET}{_KEY}$",
    ),
    re.compile(rf"^https://s3\.(?P<region>[\w\-]+)\.amazonaws\.com/{_BUCKET}{_KEY}$"),
    re.compile(rf"^https://{_BUCKET}\.s3\.(?P<region>[\w\-]+)\.amazonaws\.com{_KEY}$"),
)
_GS = re.compile(rf"^[gG][sS]://{_BUCKET}{_KEY}$")
_ABFS = re.compile(r"^abfss?://(?P<bucket>[^@/]+)@(?P<account>[^/]+)(?:/(?P<key>.*))?$")

# storage option -> (the object store's key, without aliases)
_S3_KEYS = {
    "aws_access_key_id": "access_key_id",
    "access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "session_token": "session_token",
    "token": "session_token",
    "aws_region": "region",
    "region": "region",
    "aws_default_region": "region",
    "aws_endpoint": "endpoint",
    "aws_endpoint_url": "endpoint",
    "endpoint": "endpoint",
    "endpoint_url": "endpoint",
    "aws_allow_http": "allow_http",
    "allow_http": "allow_http",
    "aws_virtual_hosted_style_request": "virtual_hosted_style",
    "virtual_hosted_style_request": "virtual_hosted_style",
}
SECRET_KEYS = frozenset({"access_key_id", "secret_access_key", "session_token"})


class StorageError(ValueError):
    """A path or storage option that cannot be used, with what to write instead."""


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed path. ``uri`` is what Spark reads and writes (``s3a://bucket/key`` for S3,
    an absolute local path for local files); ``key`` is the path within the bucket."""

    scheme: Scheme
    uri: str
    bucket: str = ""
    key: str = ""
    endpoint: str | None = None
    region: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.scheme == "file"

    def join(self, *parts: str) -> str:
        """``uri`` with ``parts`` below it."""
        return "/".join([self.uri.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def describe(self) -> str:
        """For error messages: where the data is, never the credentials."""
        if self.scheme != "s3":
            return self.uri
        where = self.endpoint or (f"region {self.region}" if self.region else "AWS")
        return f"bucket '{self.bucket}' at {where} ({self.uri})"


def parse_location(path: str, storage_options: dict[str, str] | None = None) -> Location:
    """``path`` with its storage options; raises StorageError naming what is wrong."""
    options = dict(storage_options or {})
    text = path.strip()
    if not text:
        raise StorageError("path is empty")
    if text.startswith("file:"):
        local = text.removeprefix("file://") if text.startswith("file://") else text[5:]
        return Location("file", "/" + local.lstrip("/"), options=options)
    for form in _S3_FORMS:
        match = form.match(text)
        if match:
            return _s3(match, options)
    match = _GS.match(text)
    if match:
        bucket, key = match["bucket"], match.group("key") or ""
        return Location("gs", f"gs://{bucket}/{key}", bucket, key, options=options)
    match = _ABFS.match(text)
    if match:
        return Location("abfs", text, match["bucket"], match.group("key") or "", options=options)
    if "://" in text or text.lower().startswith("s3:"):
        scheme = text.split(":", 1)[0]
        raise StorageError(
            f"cannot read path '{path}': expected a local path, s3://bucket/key, "
            "s3::http://host:port/bucket/key, gs://bucket/key or abfs://container@account/key"
            + (
                f" (unknown scheme '{scheme}')"
                if scheme.lower() not in ("s3", "s3a")
                else " (a bucket name is 3-63 lower-case letters, digits, '.' and '-')"
            )
        )
    return Location("file", text, options=options)


def _s3(match: re.Match[str], options: dict[str, str]) -> Location:
    s3 = s3_options(options)
    if bool(s3.get("access_key_id")) != bool(s3.get("secret_access_key")):
        raise StorageError(
            "storage options give one of aws_access_key_id and aws_secret_access_key: "
            "give both, or neither (the AWS_* environment variables or the instance's role)"
        )
    endpoint = (
        match.groupdict().get("endpoint") or s3.get("endpoint") or os.environ.get("AWS_ENDPOINT")
    )
    region = (
        match.groupdict().get("region") or s3.get("region") or os.environ.get("AWS_DEFAULT_REGION")
    )
    bucket, key = match["bucket"], match.group("key") or ""
    return Location("s3", f"s3a://{bucket}/{key}", bucket, key, endpoint, region, options)


def s3_options(options: dict[str, str]) -> dict[str, str]:
    """The S3 options among ``options``, by their canonical names; refuses unknown keys."""
    canonical: dict[str, str] = {}
    for given, value in options.items():
        if given.startswith("fs."):
            continue
        name = _S3_KEYS.get(given.lower())
        if name is None:
            known = ", ".join(sorted(k for k in _S3_KEYS if k.startswith("aws_")))
            raise StorageError(
                f"unknown storage option 'storage.{given}': S3 takes {known} (or any Hadoop "
                "key starting with 'fs.')"
            )
        canonical[name] = value
    return canonical


def hadoop_settings(location: Location) -> dict[str, str]:
    """The Hadoop configuration that reaches ``location``: S3A's settings for its bucket, and
    the ``fs.`` keys of its storage options as they are."""
    given = {k: v for k, v in location.options.items() if k.startswith("fs.")}
    if location.scheme != "s3":
        return given
    settings: dict[str, str] = {}
    s3 = s3_options(location.options)
    base = f"fs.s3a.bucket.{location.bucket}."
    if location.endpoint:
        settings[base + "endpoint"] = location.endpoint
        plain = location.endpoint.startswith("http://") or _true(s3.get("allow_http"))
        settings[base + "connection.ssl.enabled"] = "false" if plain else "true"
        # An S3-compatible server addresses buckets by path unless told otherwise.
        settings[base + "path.style.access"] = str(
            not _true(s3.get("virtual_hosted_style", "false"))
        ).lower()
    elif "virtual_hosted_style" in s3:
        settings[base + "path.style.access"] = str(not _true(s3["virtual_hosted_style"])).lower()
    settings[base + "endpoint.region"] = location.region or "us-east-1"
    if s3.get("access_key_id"):
        settings[base + "access.key"] = s3["access_key_id"]
        settings[base + "secret.key"] = s3["secret_access_key"]
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if s3.get("session_token"):
            settings[base + "session.token"] = s3["session_token"]
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        settings[base + "aws.credentials.provider"] = provider
    # A server that is away fails a batch in seconds, not after S3A's minutes of retries; the
    # pipeline's restart then retries it from its checkpoint.
    settings[base + "attempts.maximum"] = "3"
    settings[base + "retry.limit"] = "3"
    settings[base + "connection.establish.timeout"] = "5s"
    settings[base + "connection.timeout"] = "30s"
    # The table's own Hadoop keys next: any S3A setting can be given, over these, but for the
    # magic paths the file sink's exactly once rests on (files under them pending uploads,
    # recorded beside them): with those off, a batch would commit without its files.
    return {
        **settings,
        **given,
        base + "committer.magic.enabled": "true",
        base + "committer.magic.track.commits.in.memory.enabled": "false",
    }


def configure(spark: SparkSession, location: Location) -> None:
    """Set ``location``'s Hadoop settings on the session: its SQL conf (which readers and
    writers take theirs from) and the context's (which file listings take)."""
    settings = hadoop_settings(location)
    if not settings:
        return
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        spark.conf.set(f"spark.hadoop.{key}", value)
        hadoop.set(key, value)


def filesystem(location: Location) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system for ``location`` on the driver, and the location's path in it."""
    import pyarrow.fs as pafs

    if location.local:
        return pafs.LocalFileSystem(), os.path.abspath(location.uri)
    if location.scheme != "s3":
        raise StorageError(
            f"{location.uri}: the file sink commits on the driver through pyarrow, which "
            f"reaches local paths and S3; {location.scheme}:// is read and written by Spark "
            "alone (sources and lookup tables)"
        )
    s3 = s3_options(location.options)
    endpoint = location.endpoint
    scheme = "https"
    if endpoint:
        if "://" in endpoint:
            split = urlsplit(endpoint)
            scheme, endpoint = split.scheme, split.netloc
        elif _true(s3.get("allow_http")):
            scheme = "http"  # host:port, as S3A takes it with aws_allow_http
    fs = pafs.S3FileSystem(
        access_key=s3.get("access_key_id"),
        secret_key=s3.get("secret_access_key"),
        session_token=s3.get("session_token"),
        # AWS: the bucket's own region when none is given (pyarrow follows no redirects).
        region=location.region
        or (pafs.resolve_s3_region(location.bucket) if endpoint is None else "us-east-1"),
        endpoint_override=endpoint,
        scheme=scheme,
        force_virtual_addressing=_true(s3.get("virtual_hosted_style", "false")),
        connect_timeout=5,
        request_timeout=30,
    )
    return fs, f"{location.bucket}/{location.key}".rstrip("/")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")
