"""Shared fixtures. One SparkSession per test session (local[2], small shuffles, UI off)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from arroyo.engine.session import SessionSettings, get_or_create_session

    session = get_or_create_session(SessionSettings(parallelism=2, shuffle_partitions=2))
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
    tests/servers.py). Fails, rather than skips, where PostgreSQL is not installed: the store's
    tests on PostgreSQL are not optional."""
    from tests.servers import PostgresUnavailableError, find_postgres_bin, running_postgres

    try:
        bindir = find_postgres_bin()
    except PostgresUnavailableError as err:
        pytest.fail(str(err), pytrace=False)
    with running_postgres(bindir) as url:
        yield url
