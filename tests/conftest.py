"""Shared fixtures. One SparkSession per test session (local[2], small shuffles, UI off).

An ``async def`` test runs on an event loop of its own (``tests.aio.run``): see
``pytest_pyfunc_call``.
"""

from __future__ import annotations

import inspect
import os
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from arroyo.engine.session import QUICK_JIT_OPTIONS
from tests import aio

T = TypeVar("T")

# Every JVM the tests start (the session's Spark, each `arroyo run` and cluster worker, a
# standalone Spark's daemons and executors) runs on the quick JIT alone. They live for seconds
# to minutes over small inputs, so C2's compiling (threads of their own beside the work, on two
# cores shared by two test processes) costs more than it gains: on a sample of the heaviest
# tests (the standalone cluster, the sink crashes, the window aggregate, the CLI) 633 CPU
# seconds became 452, and 324 s of wall time 241 (docs/testing.md). The JDK's launcher reads
# this variable (and says so on standard error); products and benchmarks keep the full JIT.
# With the tiered JIT's code cache, not the non-tiered 48 MiB (QUICK_JIT_OPTIONS): each test
# process's session driver lives the whole run, and with 48 MiB its code cache sweeper took a
# sixth of its CPU.
os.environ.setdefault("JDK_JAVA_OPTIONS", QUICK_JIT_OPTIONS)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.testing.kafka import KafkaBroker
    from arroyo.testing.kinesis import KinesisServer
    from arroyo.testing.mosquitto import Mosquitto
    from arroyo.testing.nats import NatsServer
    from arroyo.testing.rabbitmq import RabbitmqNode
    from arroyo.testing.redis import RedisServer
    from arroyo.testing.s3 import S3Server


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test to completion on a fresh event loop (``tests.aio.run``), with
    the fixtures it asks for; other tests are left to pytest."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    aio.run(pyfuncitem.obj(**arguments))
    return True


_UNGROUPED = pytest.StashKey[bool]()
_UNGROUPED_MESSAGE = (
    "this test is marked xdist_group, but its id carries no group, so --dist loadgroup does not"
    " keep its group in one test process: this pytest and pytest-xdist do not work together;"
    " install the versions pyproject.toml's dev extra allows"
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a test process of ``--dist loadgroup``, every test marked ``xdist_group`` must carry
    its group in its id, which is how pytest-xdist sends a group to one process. Where a pytest
    and pytest-xdist pair loses it, the group's tests would spread over both processes, each
    starting the group's shared servers (the session cluster, twice, on two cores): such a
    test fails at once instead (``pytest_runtest_setup``), before its fixtures start anything."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]:
            item.stash[_UNGROUPED] = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.stash.get(_UNGROUPED, False):
        pytest.fail(_UNGROUPED_MESSAGE, pytrace=False)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from arroyo.engine.session import SessionSettings, get_or_create_session

    # The serial collector: G1's concurrent threads cost about a tenth of the CPU of the
    # tests' small queries, and the suite keeps both cores busy.
    session = get_or_create_session(
        SessionSettings(parallelism=2, shuffle_partitions=2, java_options="-XX:+UseSerialGC")
    )
    yield session
    session.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/sql/golden from this run (review the diff!)",
    )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a database on a real PostgreSQL server, started for this test session (see
    ``arroyo.testing.postgres``). Fails, rather than skips, where PostgreSQL is not installed:
    the store's tests on PostgreSQL are not optional."""
    from arroyo.testing.postgres import (
        PostgresUnavailableError,
        find_postgres_bin,
        running_postgres,
    )

    try:
        bindir = find_postgres_bin()
    except PostgresUnavailableError as err:
        pytest.fail(str(err), pytrace=False)
    with running_postgres(bindir) as url:
        yield url


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One real Kafka broker (KRaft, single node) for the test session, stopped at its end; see
    ``arroyo.testing.kafka``. Its jars are fetched on first use (``.ci/run`` prefetches them).
    Tests that use it are marked ``kafka``; they share it, so each should work in topics of its
    own (``kafka_topic``)."""
    from arroyo.testing.kafka import KafkaBroker

    with KafkaBroker.start(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture
def kafka_topic(kafka_broker: KafkaBroker, request: pytest.FixtureRequest) -> str:
    """A new, empty topic with 2 partitions on ``kafka_broker``, named after the test."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=2)
    return name


def _served(running: Callable[[Path], AbstractContextManager[T]], root: Path) -> Iterator[T]:
    """A server of ``arroyo.testing`` for the session, stopped at its end; one not installed
    here, or that would not start, fails the tests that need it (never skips them)."""
    from arroyo.testing.processes import ServerUnavailableError

    try:
        with running(root) as server:
            yield server
    except ServerUnavailableError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real Redis server (Debian's redis-server, a password required); see
    ``arroyo.testing.redis``. Tests that share it work under keys of their own, or flush it."""
    from arroyo.testing.redis import running_redis

    yield from _served(running_redis, tmp_path_factory.mktemp("redis"))


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    """One real MQTT broker (Debian's mosquitto: plain, TLS and WebSocket listeners, a password
    required); see ``arroyo.testing.mosquitto``. Tests use topics of their own."""
    from arroyo.testing.mosquitto import running_mosquitto

    yield from _served(running_mosquitto, tmp_path_factory.mktemp("mosquitto"))


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One real NATS server (Debian's nats-server, JetStream on, a password required); see
    ``arroyo.testing.nats``. Tests use subjects and streams of their own."""
    from arroyo.testing.nats import running_nats

    yield from _served(running_nats, tmp_path_factory.mktemp("nats"))


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitmqNode]:
    """One real RabbitMQ node (Debian's rabbitmq-server, the stream plugin on); see
    ``arroyo.testing.rabbitmq``. Tests use streams of their own."""
    from arroyo.testing.rabbitmq import running_rabbitmq

    yield from _served(running_rabbitmq, tmp_path_factory.mktemp("rabbitmq"))


@pytest.fixture(scope="session")
def kinesis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KinesisServer]:
    """One Kinesis-compatible server (kinesalite, in memory); see ``arroyo.testing.kinesis``.
    Tests use streams of their own."""
    from arroyo.testing.kinesis import running_kinesis

    yield from _served(running_kinesis, tmp_path_factory.mktemp("kinesis"))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real S3 server (versitygw, ``arroyo.testing.s3``) for the test session, on 127.0.0.1,
    stopped at its end. Tests that use it are marked ``s3`` and work in buckets of their own
    (``s3_bucket``)."""
    from arroyo.testing.s3 import S3Server

    with S3Server.start(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on ``s3_server``."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3_server.create_bucket(name)
    return name
