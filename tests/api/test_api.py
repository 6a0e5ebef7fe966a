"""The REST API end to end over real servers: aiohttp's test server in front of ``create_app``,
a SQLite store in ``tmp_path``, the real compiler (``arroyo.compiler.Compiler`` on the session's
SparkSession) behind a real gRPC server, and the controller service over a
``ScriptedController`` (``tests.services``) behind another.

Tests that compile need a JVM (``spark``); the others run without one, against a compiler
address nothing listens on (validation and look-ups fail before any compile is attempted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from aiohttp import web

from arroyo.api import ROUTES, openapi_document
from arroyo.api.app import WebRootError
from arroyo.controller.controller import OutputBatch
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.store import Checkpoint, JobId, JobState, PipelineId, StopMode
from arroyo_rpc.v1 import controller_pb2
from tests.api import BAD_QUERY, QUERY, error_of, running_api
from tests.services import compiler_service, serving
from tests.waiting import eventually

if TYPE_CHECKING:
    from arroyo.compiler import Compiler


class OutputBrokeError(ArroyoError):
    code = "worker_lost"
    domain = ErrorDomain.EXTERNAL
    retryable = True


def events(text: str) -> list[tuple[str, str]]:
    """(event name, data) of each server-sent event; "message" when it names none."""
    parsed = []
    for block in text.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        name, data = "message", []
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        parsed.append((name, "\n".join(data)))
    return parsed


# meta


async def test_ping(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.get("/api/v1/ping")
        assert response.status == 200
        assert await response.json() == {"pong": True}


async def test_openapi_document_lists_every_route_and_every_reference_resolves(
    tmp_path: Path,
) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.get("/api/v1/openapi.json")
        assert response.status == 200
        document = await response.json()
        assert document == json.loads(json.dumps(openapi_document(ROUTES)))

        assert document["openapi"].startswith("3.1")
        assert {"title", "version"} <= set(document["info"])
        schemas = document["components"]["schemas"]
        for route in ROUTES:
            operation = document["paths"][route.full_path][route.method.lower()]
            assert operation["operationId"] == route.operation_id
            assert operation["summary"] == route.summary
            assert str(route.status) in operation["responses"]
            assert "500" in operation["responses"]
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == set(route.path_parameters)
            if route.body is not None:
                schema = operation["requestBody"]["content"]["application/json"]["schema"]
                assert schema == {"$ref": f"#/components/schemas/{route.body.__name__}"}
                assert "400" in operation["responses"]
            if route.response is not None:
                content = operation["responses"][str(route.status)]["content"]
                ref = content["application/json"]["schema"]["$ref"]
                assert ref == f"#/components/schemas/{route.response.__name__}"
        served = {(p, m) for p, ops in document["paths"].items() for m in ops}
        assert served == {(r.full_path, r.method.lower()) for r in ROUTES}

        def refs(node: Any) -> list[str]:
            if isinstance(node, dict):
                found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
                return found + [r for v in node.values() for r in refs(v)]
            if isinstance(node, list):
                return [r for v in node for r in refs(v)]
            return []

        for ref in refs(document):
            assert ref.startswith("#/components/schemas/"), ref
            assert ref.removeprefix("#/components/schemas/") in schemas, ref
        # The request models forbid unknown fields, and the document says so.
        assert schemas["CreatePipelineRequest"]["additionalProperties"] is False
        assert schemas["CreatePipelineRequest"]["properties"]["parallelism"]["minimum"] == 1
        query = document["paths"]["/api/v1/pipelines"]["get"]["parameters"]
        assert {p["name"] for p in query} == {"limit", "starting_after"}


async def test_every_route_answers_on_the_server(tmp_path: Path) -> None:
    """No route in the table is missing from the application (a 404/405 from the router would
    be an error body naming the router's reason)."""

    async with running_api(tmp_path) as env:
        for route in ROUTES:
            path = route.full_path.format(
                pipeline_id="pl_none",
                job_id="job_none",
                profile_id="cp_none",
                table_id="ct_none",
                udf_id="udf_none",
            )
            response = await env.client.request(route.method, path, data=b"{}")
            if response.status == 404:
                assert "does not exist" in await error_of(response, 404), route
            else:
                assert response.status in (200, 400, 503), (route, response.status)


# bad input


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("POST", "/api/v1/pipelines", b'{"name": "p", "query": ', "not valid JSON"),
        ("POST", "/api/v1/pipelines", b'["p"]', "body must be a JSON object"),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "p", "query": "q", "paralel": 2}',
            "body.paralel: unknown field",
        ),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "p", "query": "q", "parallelism": "2"}',
            "body.parallelism",
        ),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "p", "query": "q", "parallelism": 0}',
            "body.parallelism",
        ),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "p", "query": "q", "parallelism": 65}',
            "body.parallelism",
        ),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "p", "query": "q", "checkpoint_interval_micros": -1}',
            "body.checkpoint_interval_micros",
        ),
        ("POST", "/api/v1/pipelines", b'{"query": "q"}', "body.name: required"),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "  ", "query": "q"}',
            "body.name: must not be blank",
        ),
        (
            "POST",
            "/api/v1/pipelines",
            b'{"name": "preview-x", "query": "q"}',
            "body.name: names starting with 'preview-'",
        ),
        ("POST", "/api/v1/pipelines", b"", "body.name: required"),
        ("POST", "/api/v1/pipelines/validate_query", b'{"query": 1}', "body.query"),
        (
            "POST",
            "/api/v1/pipelines/preview",
            b'{"query": "q", "name": "x"}',
            "body.name: unknown field",
        ),
        ("PATCH", "/api/v1/pipelines/pl_x", b'{"stop": "later"}', "body.stop"),
        ("PATCH", "/api/v1/pipelines/pl_x", b'{"parallelism": 0}', "body.parallelism"),
        ("POST", "/api/v1/pipelines/pl_x/restart", b'{"force": "yes"}', "body.force"),
        ("GET", "/api/v1/pipelines?limit=0", b"", "query.limit"),
        ("GET", "/api/v1/pipelines?limit=many", b"", "query.limit"),
        ("GET", "/api/v1/pipelines?page=2", b"", "query.page: unknown field"),
        ("GET", "/api/v1/pipelines/pl_x/jobs/job_x/errors?limit=-1", b"", "query.limit"),
    ],
)
async def test_bad_input_is_400_naming_the_field(
    tmp_path: Path, method: str, path: str, body: bytes, expected: str
) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.request(
            method, path, data=body, headers={"Content-Type": "application/json"}
        )
        assert expected in await error_of(response, 400)
        # Validation comes before anything else: nothing compiled, nothing stored.
        assert await env.store.list_pipelines(10) == []


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/restart"),
        ("GET", "/jobs"),
        ("GET", "/jobs/job_x/checkpoints"),
        ("GET", "/jobs/job_x/errors"),
        ("GET", "/jobs/job_x/metrics"),
        ("GET", "/jobs/job_x/operator_metric_groups"),
        ("GET", "/jobs/job_x/output"),
    ],
)
async def test_unknown_pipeline_is_404_naming_it(tmp_path: Path, method: str, suffix: str) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.request(method, f"/api/v1/pipelines/pl_nope{suffix}")
        message = await error_of(response, 404)
        assert "pl_nope" in message and "does not exist" in message


async def test_router_errors_are_json(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        missing = await env.client.get("/api/v1/nothing")
        assert "/api/v1/nothing" in await error_of(missing, 404)
        wrong_method = await env.client.put("/api/v1/ping")
        assert "allowed: GET" in await error_of(wrong_method, 405)
        assert wrong_method.headers["Allow"] == "GET"


async def test_an_unexpected_exception_is_a_logged_500_that_reveals_nothing(tmp_path: Path) -> None:
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    def add_boom(app: web.Application) -> None:
        app.router.add_get("/boom", boom)

    async with running_api(tmp_path, extra_routes=add_boom) as env:
        with structlog.testing.capture_logs() as logs:
            response = await env.client.get("/boom")
            message = await error_of(response, 500)
        assert "secret" not in message
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["api_request_failed"]


async def test_compiler_down_is_503_and_stores_nothing(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        response = await env.client.post("/api/v1/pipelines", json={"name": "p", "query": QUERY})
        message = await error_of(response, 503)
        assert "compiler is unavailable" in message
        assert "did not answer within 0.5 s" in message
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": QUERY})
        assert "compiler is unavailable" in await error_of(response, 503)
        assert await env.store.list_pipelines(10) == []
        assert env.controller is not None and env.controller.nudges == 0


# readiness


async def test_status_says_what_is_not_ready_and_why(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        assert env.controller is not None
        response = await env.client.get("/api/v1/status")
        assert response.status == 200
        status = await response.json()
        services = status["services"]
        assert status["ready"] is False
        assert services["controller"] == {"state": "ready", "detail": None}
        assert services["compiler"]["state"] == "starting"
        assert "not answering" in services["compiler"]["detail"]
        assert services["nodes"]["state"] == "starting"
        assert "no node has registered" in services["nodes"]["detail"]
        assert (services["nodes"]["count"], services["nodes"]["free_slots"]) == (0, 0)

        for node_id, slots in (("a", 4), ("b", 2)):
            await env.controller.register_node(
                controller_pb2.RegisterNodeRequest(
                    node_id=node_id, address=f"{node_id}:1", task_slots=slots
                )
            )
        env.controller.nodes.assign("a", "worker-1", 1)
        env.controller.nodes.assign("b", "worker-2", 2)
        status = await (await env.client.get("/api/v1/status")).json()
        nodes = status["services"]["nodes"]
        assert nodes == {
            "state": "ready",
            "detail": None,
            "count": 2,
            "task_slots": 6,
            "free_slots": 3,
        }
        # The compiler is still down.
        assert status["ready"] is False


async def test_status_is_200_with_the_controller_down(tmp_path: Path) -> None:
    async with running_api(tmp_path, controller_up=False) as env:
        response = await env.client.get("/api/v1/status")
        assert response.status == 200
        status = await response.json()
        assert status["ready"] is False
        assert status["services"]["controller"]["state"] == "starting"
        assert status["services"]["nodes"]["state"] == "unknown"
        assert "controller" in status["services"]["nodes"]["detail"]


@pytest.mark.spark
async def test_a_request_waits_for_a_compiler_that_starts_late(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler_wait_s=60) as env:
        assert env.controller is not None
        await env.controller.register_node(
            controller_pb2.RegisterNodeRequest(node_id="a", address="a:1", task_slots=1)
        )
        status = await (await env.client.get("/api/v1/status")).json()
        assert status["services"]["compiler"]["state"] == "starting"

        created = asyncio.create_task(
            env.client.post("/api/v1/pipelines", json={"name": "early", "query": QUERY})
        )
        # Refused at once before; now it is still waiting a second later.
        done, _ = await asyncio.wait({created}, timeout=1.0)
        assert not done
        port = int(env.compiler_address.rsplit(":", 1)[1])
        async with serving(compiler_service(compiler), name="compiler", port=port):
            response = await created
            assert response.status == 201, await response.text()
            status = await (await env.client.get("/api/v1/status")).json()
            assert status["ready"] is True, status

        # Gone after it was seen: unavailable, no longer starting (once the api's channel has
        # seen the server go: its GOAWAY can arrive after the server has stopped).
        async def compiler_state() -> str | None:
            status = await (await env.client.get("/api/v1/status")).json()
            state = status["services"]["compiler"]["state"]
            return state if state != "ready" else None

        assert await eventually("the compiler seen gone", compiler_state, 10) == "unavailable"


# compiling


@pytest.mark.spark
async def test_validate_query_returns_the_graph_and_tables(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": QUERY})
        assert response.status == 200
        body = await response.json()
        assert body["errors"] == []
        assert {(n["id"], n["kind"]) for n in body["graph"]["nodes"]} == {
            ("impulse", "source"),
            ("sink:out", "sink"),
        }
        assert body["graph"]["edges"] == [{"source": "impulse", "target": "sink:out"}]
        tables = {t["name"]: t for t in body["tables"]}
        assert tables["impulse"]["role"] == "source"
        assert "counter" in {c["name"] for c in tables["impulse"]["columns"]}
        # The functions a query may call, for an editor's completion: Spark's, Arroyo's
        # rewrites and windows; names only, no operators.
        functions = body["functions"]
        assert functions == sorted(functions)
        assert {"count", "regexp_like", "tumble", "hop", "session"} <= set(functions)
        assert "%" not in functions and "&&" not in functions
        assert await env.store.list_pipelines(10) == []


@pytest.mark.spark
async def test_the_graph_has_the_edges_of_a_windowed_aggregate(
    tmp_path: Path, compiler: Compiler
) -> None:
    """A query grouped by a column named ``window``, which sqlglot cannot parse, still has its
    edge from the table it reads."""
    query = QUERY.replace(
        "SELECT counter FROM impulse",
        "SELECT count(*) AS counter FROM impulse GROUP BY tumble(interval '1 second')",
    )
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post("/api/v1/pipelines/validate_query", json={"query": query})
        body = await response.json()
        assert body["errors"] == []
        assert body["graph"]["edges"] == [{"source": "impulse", "target": "sink:out"}]


@pytest.mark.spark
async def test_validate_query_with_errors_is_200_with_positions(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post(
            "/api/v1/pipelines/validate_query", json={"query": BAD_QUERY}
        )
        assert response.status == 200
        body = await response.json()
        [error] = body["errors"]
        assert (error["code"], error["line"], error["column"]) == ("unknown_column", 3, 24)
        assert body["graph"] == {"nodes": [], "edges": []}
        assert "count" in body["functions"]  # completion goes on while the query is wrong


@pytest.mark.spark
async def test_create_pipeline_stores_it_and_nudges_the_controller(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create("counting", parallelism=2, checkpoint_interval_micros=1_000_000)
        assert created["id"].startswith("pl_") and created["job_id"].startswith("job_")
        assert created["name"] == "counting" and created["query"] == QUERY
        assert (created["parallelism"], created["checkpoint_interval_micros"]) == (2, 1_000_000)
        assert (created["stop"], created["state"], created["preview"]) == ("none", "Created", False)
        assert (created["action"], created["action_in_progress"]) == ("stop", False)
        assert created["failure_message"] is None
        assert {n["id"] for n in created["graph"]["nodes"]} == {"impulse", "sink:out"}
        assert env.controller is not None and env.controller.nudges == 1

        response = await env.client.get(f"/api/v1/pipelines/{created['id']}")
        assert response.status == 200
        assert await response.json() == created

        pipeline = await env.store.get_pipeline(PipelineId(created["id"]))
        assert pipeline is not None and json.loads(pipeline.program_json)
        job = await env.store.get_job(JobId(created["job_id"]))
        assert job is not None and job.config.parallelism == 2


@pytest.mark.spark
async def test_create_with_bad_sql_is_400_with_diagnostics_and_stores_nothing(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post(
            "/api/v1/pipelines", json={"name": "p", "query": BAD_QUERY}
        )
        assert "3:24" in await error_of(response, 400)
        [diagnostic] = (await response.json())["diagnostics"]
        assert diagnostic["code"] == "unknown_column"
        assert (diagnostic["line"], diagnostic["column"]) == (3, 24)

        response = await env.client.post(
            "/api/v1/pipelines", json={"name": "p", "query": "SELEC 1"}
        )
        [diagnostic] = (await response.json())["diagnostics"]
        assert (diagnostic["code"], diagnostic["line"], diagnostic["column"]) == (
            "unsupported_statement",
            1,
            1,
        )
        assert await env.store.list_pipelines(10) == []
        assert await env.store.list_jobs() == []
        assert env.controller is not None and env.controller.nudges == 0


UNTYPED_UDF = "from arroyo_udf import udf\n\n@udf\ndef f(x):\n    return x\n"


@pytest.mark.spark
async def test_a_diagnostic_without_a_position_has_null_line_and_column(
    tmp_path: Path, compiler: Compiler
) -> None:
    """Found by tests/fuzz: a UDF file that is refused has a diagnostic with no position; its
    ``line`` and ``column``, required by the documented schema, were left out of the body."""
    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post(
            "/api/v1/pipelines",
            json={
                "name": "p",
                "query": QUERY,
                "udfs": "from arroyo_udf import udf\n\n@udf\ndef f(x):\n    return x\n",
            },
        )
        await error_of(response, 400)
        [diagnostic] = (await response.json())["diagnostics"]
        assert diagnostic["code"] == "bad_udf"
        assert (diagnostic["line"], diagnostic["column"]) == (None, None)


@pytest.mark.spark
async def test_pipelines_are_listed_newest_first_a_page_at_a_time(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        ids = [(await env.create(f"p{i}"))["id"] for i in range(5)]
        newest_first = ids[::-1]

        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            query = {"limit": "2", **({"starting_after": cursor} if cursor else {})}
            response = await env.client.get("/api/v1/pipelines", params=query)
            assert response.status == 200
            page = await response.json()
            pages += 1
            seen += [p["id"] for p in page["data"]]
            assert page["has_more"] == (len(seen) < 5)
            if not page["has_more"]:
                break
            cursor = page["data"][-1]["id"]
        assert (seen, pages) == (newest_first, 3)

        everything = await (await env.client.get("/api/v1/pipelines")).json()
        assert [p["id"] for p in everything["data"]] == newest_first
        assert everything["has_more"] is False

        response = await env.client.get("/api/v1/pipelines", params={"starting_after": "pl_no"})
        assert "query.starting_after" in await error_of(response, 400)


# changing and deleting


@pytest.mark.spark
async def test_patch_changes_the_job_config_and_nudges_the_controller(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        url = f"/api/v1/pipelines/{created['id']}"
        assert env.controller is not None

        response = await env.client.patch(url, json={"stop": "checkpoint", "parallelism": 3})
        assert response.status == 200
        patched = await response.json()
        assert (patched["stop"], patched["parallelism"]) == ("checkpoint", 3)
        # Still live, and stopping.
        assert (patched["action"], patched["action_in_progress"]) == ("stop", True)
        assert env.controller.nudges == 2

        response = await env.client.patch(url, json={"checkpoint_interval_micros": 5})
        job = await env.store.get_job(JobId(created["job_id"]))
        assert job is not None
        assert (job.config.stop, job.config.parallelism) == (StopMode.CHECKPOINT, 3)
        assert job.config.checkpoint_interval_micros == 5
        assert env.controller.nudges == 3

        # Nothing to change: the pipeline as it is, and no nudge.
        response = await env.client.patch(url, json={})
        assert (await response.json())["checkpoint_interval_micros"] == 5
        assert env.controller.nudges == 3


@pytest.mark.spark
async def test_deleting_a_live_pipeline_is_409_and_a_stopped_one_goes(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        url = f"/api/v1/pipelines/{created['id']}"
        job_id = JobId(created["job_id"])

        response = await env.client.delete(url)
        assert "stop it first" in await error_of(response, 409)

        # The controller stops it, as the user asked.
        await env.client.patch(url, json={"stop": "graceful"})
        job = await env.store.get_job(job_id)
        assert job is not None
        stopped = dataclasses.replace(job.status, state=JobState.STOPPED)
        await env.store.update_job_status(job_id, stopped)
        summary = await (await env.client.get(url)).json()
        assert (summary["state"], summary["action"], summary["action_in_progress"]) == (
            "Stopped",
            "start",
            False,
        )

        # Asked to run again but not yet started: still refused.
        await env.client.patch(url, json={"stop": "none"})
        assert (await (await env.client.get(url)).json())["action_in_progress"] is True
        assert "starting" in await error_of(await env.client.delete(url), 409)
        await env.client.patch(url, json={"stop": "immediate"})

        response = await env.client.delete(url)
        assert response.status == 204
        assert await error_of(await env.client.get(url), 404)
        assert await env.store.get_job(job_id) is None


@pytest.mark.spark
async def test_restart_requests_a_restart(tmp_path: Path, compiler: Compiler) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        url = f"/api/v1/pipelines/{created['id']}/restart"
        job_id = JobId(created["job_id"])

        response = await env.client.post(url, json={"force": True, "ignore_state": True})
        assert response.status == 200
        assert (await response.json())["id"] == created["id"]
        job = await env.store.get_job(job_id)
        assert job is not None
        assert (job.config.restart_nonce, job.config.restart_force, job.config.ignore_state) == (
            1,
            True,
            True,
        )

        # A failed job, restarted with no body: defaults, and a start in progress.
        failed = dataclasses.replace(
            job.status, state=JobState.FAILED, failure_message="boom", restart_nonce=1
        )
        await env.store.update_job_status(job_id, failed)
        summary = await (await env.client.get(f"/api/v1/pipelines/{created['id']}")).json()
        assert (summary["state"], summary["failure_message"], summary["action"]) == (
            "Failed",
            "boom",
            "start",
        )
        assert summary["action_in_progress"] is False
        response = await env.client.post(url)
        assert (await response.json())["action_in_progress"] is True
        job = await env.store.get_job(job_id)
        assert job is not None
        assert (job.config.restart_nonce, job.config.restart_force, job.config.ignore_state) == (
            2,
            False,
            False,
        )
        assert env.controller is not None and env.controller.nudges == 3


# jobs


@pytest.mark.spark
async def test_jobs_are_listed_per_pipeline_and_all_together(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        first, second = await env.create("a"), await env.create("b")
        response = await env.client.get(f"/api/v1/pipelines/{first['id']}/jobs")
        [job] = (await response.json())["data"]
        assert job["id"] == first["job_id"] and job["pipeline_id"] == first["id"]
        assert set(job) >= {
            "state",
            "generation",
            "restarts",
            "failure_message",
            "failure_domain",
            "worker_id",
            "node_id",
            "started_at",
            "finished_at",
            "stop",
            "run_id",
        }
        assert (job["state"], job["generation"], job["stop"]) == ("Created", 0, "none")

        everything = (await (await env.client.get("/api/v1/jobs")).json())["data"]
        assert [j["id"] for j in everything] == [second["job_id"], first["job_id"]]


@pytest.mark.spark
async def test_checkpoints_and_errors_come_from_the_store(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created, other = await env.create("a"), await env.create("b")
        job_id = JobId(created["job_id"])
        for epoch in range(3):
            await env.store.add_checkpoint(
                Checkpoint(
                    job_id=job_id,
                    query="out",
                    epoch=epoch,
                    generation=1,
                    watermark_micros=None if epoch == 0 else epoch * 1000,
                    offsets_json=json.dumps({"impulse": {"offset": epoch}}),
                    state_rows=epoch,
                    state_bytes=10 * epoch,
                    rows_in=100,
                    duration_micros=5,
                    finished_at=1_000 + epoch,
                )
            )
        await env.store.add_job_error(
            job_id, generation=1, domain="user", retryable=False, message="bad row", details="x"
        )
        base = f"/api/v1/pipelines/{created['id']}/jobs/{job_id}"

        checkpoints = (await (await env.client.get(f"{base}/checkpoints")).json())["data"]
        assert [c["epoch"] for c in checkpoints] == [2, 1, 0]
        assert checkpoints[0]["offsets"] == {"impulse": {"offset": 2}}
        assert checkpoints[-1]["watermark_micros"] is None
        limited = await env.client.get(f"{base}/checkpoints", params={"limit": "1"})
        assert len((await limited.json())["data"]) == 1

        [error] = (await (await env.client.get(f"{base}/errors")).json())["data"]
        assert (error["message"], error["domain"], error["retryable"]) == ("bad row", "user", False)

        # A job exists only under its own pipeline.
        wrong = f"/api/v1/pipelines/{other['id']}/jobs/{job_id}/checkpoints"
        assert job_id in await error_of(await env.client.get(wrong), 404)


@pytest.mark.spark
async def test_metrics_come_from_the_controller(tmp_path: Path, compiler: Compiler) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        assert env.controller is not None
        url = f"/api/v1/pipelines/{created['id']}/jobs/{created['job_id']}/metrics"

        # Not running: the controller has none.
        response = await env.client.get(url)
        assert response.status == 200
        assert await response.json() == {"job_id": created["job_id"], "samples": []}

        operator = controller_pb2.OperatorMetrics(
            query="out", rows_in=10, rows_out=9, rows_in_per_second=2.5, batch_duration_micros=7
        )
        env.controller.report_metrics(
            created["job_id"], controller_pb2.MetricsSample(time_micros=1, operators=[operator])
        )
        [sample] = (await (await env.client.get(url)).json())["samples"]
        assert sample["time_micros"] == 1
        [metrics] = sample["operators"]
        assert (metrics["query"], metrics["rows_in"], metrics["rows_out"]) == ("out", 10, 9)
        assert metrics["rows_in_per_second"] == 2.5
        assert metrics["watermark_micros"] is None


@pytest.mark.spark
async def test_operator_metric_groups_are_each_operators_history_in_arroyos_shape(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        assert env.controller is not None
        job = created["job_id"]
        url = f"/api/v1/pipelines/{created['id']}/jobs/{job}/operator_metric_groups"
        assert await (await env.client.get(url)).json() == {"data": []}

        def node(operator: str, query: str, **counts: float) -> controller_pb2.NodeMetrics:
            made = controller_pb2.NodeMetrics(operator_id=operator, label="", query=query)
            for name, value in counts.items():
                setattr(made, name, value)
            return made

        bucket = int(env.controller.settings.metrics_bucket_s * 1_000_000)
        start = 1000 * bucket
        # Two batches of two queries reading one source in the first bucket; one in the next.
        env.controller.report_nodes(
            job,
            start + 1,
            node("impulse", "a", messages_sent=10, interval_seconds=2.0, backpressure=0.25),
            node("impulse", "b", messages_sent=30, interval_seconds=1.0),
            node("sink:out", "a", messages_recv=4, interval_seconds=2.0),
        )
        env.controller.report_nodes(
            job,
            start + 2,
            node("impulse", "a", messages_sent=20, interval_seconds=2.0, backpressure=0.5),
            node("sink:out/stateStoreSave0", "a", stateful=True, state_rows=7, state_bytes=900),
        )
        env.controller.report_nodes(
            job, start + bucket, node("impulse", "a", messages_sent=5, interval_seconds=1.0)
        )
        data = (await (await env.client.get(url)).json())["data"]
        groups = {
            o["operatorId"]: {g["name"]: g["subtasks"] for g in o["metricGroups"]} for o in data
        }
        assert set(groups) == {"impulse", "sink:out", "sink:out/stateStoreSave0"}
        [sent] = groups["impulse"]["messages_sent"]
        assert sent["index"] == 0
        # Per second over the time each query's batches cover: the highest of the queries
        # (each reads all of the source).
        assert sent["metrics"] == [
            {"time": start, "value": 30 / 1},
            {"time": start + bucket, "value": 5.0},
        ]
        [pressure] = groups["impulse"]["backpressure"]
        assert [m["value"] for m in pressure["metrics"]] == [0.5, 0.0]
        [received] = groups["sink:out"]["messages_recv"]
        assert received["metrics"] == [{"time": start, "value": 2.0}]
        [state] = groups["sink:out/stateStoreSave0"]["state_bytes"]
        assert state["metrics"] == [{"time": start, "value": 900.0}]


@pytest.mark.spark
async def test_output_is_relayed_as_server_sent_events(tmp_path: Path, compiler: Compiler) -> None:
    rows = [{"counter": 1}, {"counter": 2}, {"text": "two\nlines"}]

    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        assert env.controller is not None
        env.controller.output[created["job_id"]] = [
            OutputBatch("out", [json.dumps(r) for r in rows[:2]], done=False),
            # A row whose JSON spans lines still arrives as one event.
            OutputBatch("out", [json.dumps(rows[2], indent=1)], done=True),
        ]
        url = f"/api/v1/pipelines/{created['id']}/jobs/{created['job_id']}/output"
        response = await env.client.get(url)
        assert response.status == 200
        assert response.content_type == "text/event-stream"
        received = events(await response.text())
        assert [json.loads(data) for name, data in received if name == "message"] == rows
        assert received[-1] == ("done", "{}")


@pytest.mark.spark
async def test_a_broken_output_stream_ends_with_an_error_event(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        assert env.controller is not None
        env.controller.output[created["job_id"]] = [
            OutputBatch("out", ['{"counter": 1}'], done=False),
            OutputBrokeError("the worker went away"),
        ]
        url = f"/api/v1/pipelines/{created['id']}/jobs/{created['job_id']}/output"
        received = events(await (await env.client.get(url)).text())
        assert received[0] == ("message", '{"counter": 1}')
        name, data = received[-1]
        assert name == "error" and "the worker went away" in json.loads(data)["error"]


@pytest.mark.spark
async def test_leaving_the_output_stream_cancels_the_controllers(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler) as env:
        created = await env.create()
        assert env.controller is not None
        env.controller.endless.add(created["job_id"])
        url = f"/api/v1/pipelines/{created['id']}/jobs/{created['job_id']}/output"
        response = await env.client.get(url)
        assert (await response.content.readline()).startswith(b"data: ")
        response.close()
        await asyncio.wait_for(env.controller.stream_closed.wait(), timeout=30)


@pytest.mark.spark
async def test_preview_creates_a_flagged_pipeline(tmp_path: Path, compiler: Compiler) -> None:
    query = "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10');\n"
    query += "SELECT counter FROM impulse"

    async with running_api(tmp_path, compiler=compiler) as env:
        response = await env.client.post("/api/v1/pipelines/preview", json={"query": query})
        assert response.status == 201
        preview = await response.json()
        assert preview["preview"] is True and preview["name"].startswith("preview-")
        assert (preview["parallelism"], preview["state"]) == (1, "Created")
        [listed] = (await (await env.client.get("/api/v1/pipelines")).json())["data"]
        assert listed["id"] == preview["id"] and listed["preview"] is True

        assert env.controller is not None
        env.controller.output[preview["job_id"]] = [OutputBatch("", ['{"counter": 0}'], done=True)]
        url = f"/api/v1/pipelines/{preview['id']}/jobs/{preview['job_id']}/output"
        received = events(await (await env.client.get(url)).text())
        assert received == [("message", '{"counter": 0}'), ("done", "{}")]


# the controller down


@pytest.mark.spark
async def test_a_controller_that_is_down_fails_only_what_needs_it(
    tmp_path: Path, compiler: Compiler
) -> None:
    async with running_api(tmp_path, compiler=compiler, controller_up=False) as env:
        # The nudge is best effort: the change is stored and the controller polls for it.
        created = await env.create()
        assert await env.store.get_pipeline(PipelineId(created["id"])) is not None
        url = f"/api/v1/pipelines/{created['id']}"
        response = await env.client.patch(url, json={"stop": "immediate"})
        assert (await response.json())["stop"] == "immediate"

        job = f"{url}/jobs/{created['job_id']}"
        message = await error_of(await env.client.get(f"{job}/metrics"), 503)
        assert "controller is unavailable" in message
        message = await error_of(await env.client.get(f"{job}/operator_metric_groups"), 503)
        assert "controller is unavailable" in message
        message = await error_of(await env.client.get(f"{job}/output"), 503)
        assert "controller is unavailable" in message
        # What the store answers still works.
        assert (await env.client.get(f"{job}/checkpoints")).status == 200


# the web UI


async def test_web_root_serves_the_ui_beside_the_api(tmp_path: Path) -> None:
    root = tmp_path / "webui"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<html>arroyo</html>")
    (root / "assets" / "app.js").write_text("console.log('arroyo')")
    (tmp_path / "secret.txt").write_text("not for you")

    async with running_api(tmp_path, web_root=root) as env:
        for path in ("/", "/pipelines/pl_1"):
            response = await env.client.get(path)
            assert (response.status, await response.text()) == (200, "<html>arroyo</html>")
        response = await env.client.get("/assets/app.js")
        assert await response.text() == "console.log('arroyo')"
        await error_of(await env.client.get("/assets/missing.js"), 404)
        await error_of(await env.client.get("/%2e%2e/secret.txt"), 404)
        await error_of(await env.client.get("/api/v1/nothing"), 404)
        assert (await env.client.get("/api/v1/ping")).status == 200

    (tmp_path / "other").mkdir()
    with pytest.raises(WebRootError):
        async with running_api(tmp_path / "other", web_root=tmp_path / "assets-only"):
            pass
