"""Every operation of the OpenAPI document, driven by schemathesis against a running api: no
5xx, and every response as documented (status code, content type, headers, body schema).

Shared by ``tests/fuzz/test_api.py`` (few examples, for CI) and ``bench/fuzz.py`` (more)."""

from __future__ import annotations

from collections.abc import Callable

import hypothesis
import schemathesis
from hypothesis import HealthCheck
from hypothesis import strategies as st
from schemathesis import Case
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.schemas import OpenApiSchema

from arroyo.api.openapi import openapi_document
from arroyo.api.routes import ROUTES

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# A request waits at most this long: a streaming answer that never ended would fail here.
REQUEST_TIMEOUT_S = 60


def api_schema() -> OpenApiSchema:
    """The document the api serves at /api/v1/openapi.json, as schemathesis loads it."""
    return schemathesis.openapi.from_dict(openapi_document(ROUTES))


def operation_labels() -> list[str]:
    """``METHOD /path`` of every operation, in the document's order."""
    return [op.ok().label for op in api_schema().get_all_operations()]


def has_inputs(label: str) -> bool:
    """Whether the operation takes anything a request could get wrong: parameters, a body, or a
    key (a public probe takes none, so no request to it breaks its schema)."""
    route = next(r for r in ROUTES if f"{r.method} {r.full_path}" == label)
    return bool(route.path_parameters or route.body or route.query or not route.public)


def fuzz_operation(
    base_url: str,
    label: str,
    examples: int,
    *,
    negative: bool = False,
    path_parameters: dict[str, str] | None = None,
    seed: int = 0,
) -> int:
    """Call the operation ``label`` with up to ``examples`` generated requests, checking each
    response (an AssertionError, schemathesis's, names the failing request); the number of
    requests made. ``negative``: requests that break the documented schema, which must be
    refused with a 4xx. ``path_parameters``: ids of objects that exist, for the operation's
    path (else generated, and mostly a 404)."""
    schema = api_schema()
    operation = next(op.ok() for op in schema.get_all_operations() if op.ok().label == label)
    mode = GenerationMode.NEGATIVE if negative else GenerationMode.POSITIVE
    checks = [*CHECKS, negative_data_rejection] if negative else CHECKS
    calls = [0]

    def call(case: Case) -> None:
        calls[0] += 1
        case.call_and_validate(base_url=base_url, checks=checks, timeout=REQUEST_TIMEOUT_S)

    known = {
        name: value
        for name, value in (path_parameters or {}).items()
        if "{" + name + "}" in operation.path
    }
    strategy = operation.as_strategy(mode, path_parameters=known or None)
    _run(strategy, call, examples, seed)
    return calls[0]


def _run(
    strategy: st.SearchStrategy[Case], call: Callable[[Case], None], examples: int, seed: int
) -> None:
    @hypothesis.seed(seed)
    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate, hypothesis.Phase.shrink],
    )
    @hypothesis.given(case=strategy)
    def property_(case: Case) -> None:
        call(case)

    property_()
