"""Saved UDFs over the REST API (Arroyo's ``/udfs``), on the servers of ``tests.api``: a
SQLite store and the real compiler behind gRPC, which checks each file and compiles the queries
that call a saved UDF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from arroyo.store import PipelineId
from tests.api import Env, error_of, running_api

if TYPE_CHECKING:
    from arroyo.compiler import Compiler

pytestmark = pytest.mark.spark

UDFS = "/api/v1/udfs"
DOUBLE = "from arroyo_udf import udf\n\n\n@udf\ndef double_it(x: int) -> int:\n    return 2 * x\n"
QUERY = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT double_it(counter) AS d FROM impulse;"""


async def validate_query(env: Env, query: str, udfs: str = "") -> dict[str, Any]:
    response = await env.client.post(
        "/api/v1/pipelines/validate_query", json={"query": query, "udfs": udfs}
    )
    assert response.status == 200
    body: dict[str, Any] = await response.json()
    return body


async def test_a_saved_udf_is_checked_listed_used_by_every_query_and_deleted(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        [error] = (await validate_query(env, QUERY))["errors"]
        assert error["code"] == "unknown_function"

        response = await env.client.post(
            UDFS, json={"definition": DOUBLE, "description": "twice", "prefix": "math"}
        )
        created = await response.json()
        assert response.status == 201, created
        assert created["name"] == "double_it"
        assert (created["prefix"], created["description"]) == ("math", "twice")
        assert created["language"] == "python"
        listed = await (await env.client.get(UDFS)).json()
        assert listed == {"data": [created]}

        # Every query compiles with it, and the pipeline's program carries it to the worker.
        assert (await validate_query(env, QUERY))["errors"] == []
        made = await env.create(query=QUERY)
        pipeline = await env.store.get_pipeline(PipelineId(made["id"]))
        assert pipeline is not None
        assert pipeline.udfs == ""  # the pipeline's own UDFs, as the user wrote them
        assert "def double_it" in json.loads(pipeline.program_json)["udfs"]
        # A query that does not call it is compiled without it.
        other = await env.create(name="q", query=QUERY.replace("double_it(counter)", "counter"))
        pipeline = await env.store.get_pipeline(PipelineId(other["id"]))
        assert pipeline is not None
        assert "double_it" not in (json.loads(pipeline.program_json)["udfs"] or "")

        # A pipeline's own UDF of the same name is the one its query calls.
        own = DOUBLE.replace("-> int", "-> str").replace("2 * x", "str(x)")
        tables = (await validate_query(env, QUERY, udfs=own))["tables"]
        [out] = [t for t in tables if t["name"] == "out"]
        assert [c["type"] for c in out["columns"]] == ["string"]

        response = await env.client.delete(f"{UDFS}/{created['id']}")
        assert response.status == 204
        gone = await env.client.delete(f"{UDFS}/{created['id']}")
        assert f"UDF {created['id']} does not exist" in await error_of(gone, 404)
        assert (await (await env.client.get(UDFS)).json()) == {"data": []}
        [error] = (await validate_query(env, QUERY))["errors"]
        assert error["code"] == "unknown_function"


async def test_a_udf_file_is_validated_with_its_errors_at_their_lines(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post(f"{UDFS}/validate", json={"definition": DOUBLE})
        assert response.status == 200
        assert await response.json() == {"udf_name": "double_it", "errors": [], "diagnostics": []}

        broken = DOUBLE.replace("x: int", "x")
        response = await env.client.post(f"{UDFS}/validate", json={"definition": broken})
        assert response.status == 200
        body = await response.json()
        assert body["udf_name"] is None
        [diagnostic] = body["diagnostics"]
        assert diagnostic["line"] == 4  # the @udf over `def double_it`
        assert "argument 'x' has no type annotation" in diagnostic["message"]
        assert body["errors"] == [diagnostic["message"]]

        two = DOUBLE + DOUBLE.replace("double_it", "twice")
        body = await (await env.client.post(f"{UDFS}/validate", json={"definition": two})).json()
        assert body["udf_name"] is None
        assert "defines exactly one UDF; this one defines double_it, twice" in body["errors"][0]


async def test_bad_udfs_are_refused_with_what_is_wrong_and_nothing_is_saved(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post(UDFS, json={"definition": DOUBLE.replace("x: int", "x")})
        message = await error_of(response, 400)
        assert "the UDF is invalid" in message and "no type annotation" in message
        assert (await response.json())["diagnostics"][0]["line"] == 4

        no_udf = await env.client.post(UDFS, json={"definition": "X = 1\n"})
        assert "udfs.py:1: defines no UDF: decorate a function" in await error_of(no_udf, 400)
        # Only comments: a file with nothing in it, which the saved UDF's own rule refuses.
        empty = await env.client.post(UDFS, json={"definition": "# nothing\n"})
        assert "defines exactly one UDF; this one defines none" in await error_of(empty, 400)
        rust = await env.client.post(UDFS, json={"definition": DOUBLE, "language": "rust"})
        assert "language" in await error_of(rust, 400)
        unknown = await env.client.post(UDFS, json={"definition": DOUBLE, "dylib_url": "x"})
        assert "dylib_url" in await error_of(unknown, 400)
        assert "definition" in await error_of(await env.client.post(UDFS, json={}), 400)
        assert (await (await env.client.get(UDFS)).json()) == {"data": []}

        assert (await env.client.post(UDFS, json={"definition": DOUBLE})).status == 201
        again = await env.client.post(UDFS, json={"definition": DOUBLE})
        assert "a UDF named 'double_it' is already saved" in await error_of(again, 409)
        # Spark's function names are case-insensitive, and so are saved UDFs'.
        upper = await env.client.post(
            UDFS, json={"definition": DOUBLE.replace("double_it", "DOUBLE_IT")}
        )
        assert "a UDF named 'DOUBLE_IT' is already saved" in await error_of(upper, 409)
        marked = DOUBLE + "# arroyo: saved UDF other\n"
        marking = await env.client.post(
            UDFS, json={"definition": marked.replace("double_it", "d2")}
        )
        assert "marks where a saved UDF begins" in await error_of(marking, 400)
        assert len((await (await env.client.get(UDFS)).json())["data"]) == 1
