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
