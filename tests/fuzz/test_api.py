"""The REST API under schemathesis: each operation of /api/v1/openapi.json, a few generated
requests each, against the real api over the real compiler (``tests/fuzz/api_fuzz.py``):
requests as documented, then ones naming objects that exist, then ones that break the schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.fuzz.api_fuzz import fuzz_operation, has_inputs, operation_labels
from tests.fuzz.api_server import ServedApi, served_api

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.fuzz, pytest.mark.spark]

EXAMPLES = 8
_CALLS: dict[str, int] = {}


@pytest.fixture(scope="module")
def api(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    from arroyo.compiler import Compiler

    with served_api(tmp_path_factory.mktemp("fuzz-api"), Compiler(spark)) as served:
        yield served
    print(
        f"\nfuzz api: {len(_CALLS)} operations x up to {3 * EXAMPLES} examples "
        f"(positive, known ids, negative), {sum(_CALLS.values())} requests"
    )


@pytest.mark.parametrize("label", operation_labels())
def test_operation_answers_as_documented(api: ServedApi, label: str) -> None:
    calls = fuzz_operation(api.base_url, label, EXAMPLES)
    if "{" in label:
        calls += fuzz_operation(api.base_url, label, EXAMPLES, path_parameters=api.known_ids)
    if has_inputs(label):
        calls += fuzz_operation(api.base_url, label, EXAMPLES, negative=True)
    _CALLS[label] = calls
