"""The web UI in a real browser: headless Chromium (the system's ``chromium``, as Debian
installs it) driven by Playwright, over the real api serving ``arroyo.api.webui.web_root()``.

Behind the api: a SQLite store in ``tmp_path``, the compiler service's servicer over the real
``arroyo.compiler.Compiler`` (the session's SparkSession) on a gRPC server, and the controller
service's over a ``ScriptedController`` (``tests.services``) that runs nothing, so jobs stay
``Created``. The servers run on an event loop in a background thread; the test thread drives
the browser with Playwright's sync API, and waits on conditions (Playwright's auto-waiting
assertions), never on time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from aiohttp import web
from playwright.sync_api import expect

from arroyo.api import create_app
from arroyo.api.auth import KeyRing
from arroyo.api.webui import web_root
from arroyo.controller.controller import OutputBatch
from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.store import Checkpoint, JobId, JobState, Store, open_store
from arroyo.store.api_keys import new_api_key
from arroyo_rpc.v1 import controller_pb2
from tests.aio import LoopThread, loop_thread
from tests.services import ScriptedController, compiler_service, controller_service, serving
from tests.webui.browser import assert_fits, browser_page, chromium_path, screenshots, write_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUERY = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole', type = 'sink');
INSERT INTO out SELECT counter FROM impulse;"""
# `countr` is at line 3, column 24.
BAD_QUERY = QUERY.replace("SELECT counter", "SELECT countr")
OUTPUT_ROWS = [{"counter": n, "subtask": 0} for n in range(3)]
# Seconds: the first compile on a cold JVM takes a few.
TIMEOUT_S = 60

T = TypeVar("T")


def operator_nodes() -> list[controller_pb2.NodeMetrics]:
    """One batch of the job's operators, as its worker would report them."""
    common = {"query": "out_0", "interval_seconds": 2.0, "backpressure": 0.6}
    return [
        controller_pb2.NodeMetrics(
            operator_id="impulse", label="impulse", messages_sent=50, **common
        ),
        controller_pb2.NodeMetrics(
            operator_id="sink:out/stateStoreSave0",
            label="aggregate",
            stateful=True,
            state_rows=-1,
            state_bytes=2048,
            **common,
        ),
        controller_pb2.NodeMetrics(
            operator_id="sink:out", label="blackhole", messages_recv=40, **common
        ),
    ]


def metrics_sample() -> controller_pb2.MetricsSample:
    """One metrics sample of a running job, as its worker would report it."""
    operator = controller_pb2.OperatorMetrics(
        query="out",
        rows_in=1000,
        rows_out=1000,
        rows_in_per_second=12.5,
        rows_processed_per_second=12.5,
        batch_duration_micros=250_000,
        state_rows=7,
        state_bytes=3 * 1024 * 1024,
    )
    # RocksDB state is not counted in rows (-1): shown as a dash, not as -1 or 0.
    uncounted = controller_pb2.OperatorMetrics()
    uncounted.CopyFrom(operator)
    uncounted.query, uncounted.state_rows = "windows", -1
    return controller_pb2.MetricsSample(time_micros=1, operators=[operator, uncounted])


@dataclass(frozen=True)
class Api:
    url: str
    store: Store
    controller: ScriptedController
    servers: LoopThread

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s result, run on the servers' loop (the store's and the controller's)."""
        return self.servers.run(coro)

    def call(self, function: Callable[[], T]) -> T:
        """``function()``, called on the servers' loop."""
        return self.servers.call(function)


@contextmanager
def running_api(tmp_path: Path, spark: SparkSession, *, keys: bool = False) -> Iterator[Api]:
    """The api with the UI on a free port of 127.0.0.1, its servers on a background loop;
    ``keys``: the api requires an API key (as it does beyond loopback)."""
    from arroyo.compiler import Compiler

    compiler = Compiler(spark)
    stack = AsyncExitStack()

    async def start(servers: LoopThread) -> Api:
        store = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
        stack.push_async_callback(store.close)
        await store.migrate()
        compiling = await stack.enter_async_context(
            serving(compiler_service(compiler), name="compiler")
        )
        # Any job's output: OUTPUT_ROWS, then its end.
        controller = ScriptedController(store)
        controller.any_job_output = [
            OutputBatch("out", [json.dumps(row) for row in OUTPUT_ROWS], done=False),
            OutputBatch("out", [], done=True),
        ]
        controlling = await stack.enter_async_context(
            serving(controller_service(controller), name="controller")
        )
        compiler_client = await stack.enter_async_context(
            CompilerClient(str(compiling.grpc_address))
        )
        controller_client = await stack.enter_async_context(
            ControllerClient(str(controlling.grpc_address))
        )
        app = create_app(
            store,
            compiler_client,
            controller_client,
            web_root=web_root(),
            keys=KeyRing(store, always=True) if keys else None,
        )
        runner = web.AppRunner(app)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        # Port 0: the system picks a free one.
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        return Api(f"http://{host}:{port}", store, controller, servers)

    with loop_thread("webui-servers", TIMEOUT_S) as servers:
        try:
            yield servers.run(start(servers))
        finally:
            servers.run(stack.aclose())


@pytest.mark.spark
def test_the_ui_validates_creates_stops_and_explains_refusals(
    tmp_path: Path, spark: SparkSession
) -> None:
    chromium_path()  # fail before starting anything when there is no browser
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        # The narrowest width the UI is made for: no page of the journey scrolls sideways.
        page.set_viewport_size({"width": 1024, "height": 768})
        page.goto("/")
        expect(page.get_by_role("heading", name="Pipelines")).to_be_visible()
        assert_fits(page)
        # Until a node registers the cluster is not ready, and the page says so and why.
        banner = page.locator("#cluster-banner")
        expect(banner).to_contain_text("Arroyo is starting")
        expect(banner).to_contain_text("nodes starting (no node has registered")
        api.run(
            api.controller.register_node(
                controller_pb2.RegisterNodeRequest(node_id="n", address="n:1", task_slots=4)
            )
        )
        expect(banner).to_be_hidden()
        expect(banner).to_have_attribute("data-ready", "true")
        expect(page.get_by_text("No pipelines yet")).to_be_visible()
        form = page.locator("#new-form")
        form_alert = page.locator("#form-alert")
        # Every confirmation (stop now, restart, delete, new settings) is accepted.
        page.on("dialog", lambda dialog: dialog.accept())

        # A query that does not compile: its diagnostic, with line and column.
        form.get_by_label("Name").fill("counter")
        write_sql(page, BAD_QUERY)
        form.get_by_role("button", name="Validate").click()
        diagnostic = page.locator("#diagnostics li").first
        expect(diagnostic).to_contain_text("3:24")
        expect(diagnostic).to_contain_text("countr")
        expect(form_alert).to_be_hidden()

        # Create refuses it with the API's message and the same diagnostic.
        form.get_by_role("button", name="Create").click()
        expect(form_alert).to_contain_text("the query does not compile")
        expect(page.locator("#diagnostics")).to_contain_text("3:24")
        expect(page.locator("#pipelines tr")).to_have_count(0)

        # The good query validates and shows its dataflow.
        write_sql(page, QUERY)
        form.get_by_role("button", name="Validate").click()
        expect(page.locator("#form-status")).to_contain_text("The query is valid")
        expect(page.locator("#diagnostics")).to_be_hidden()
        graph = page.locator("#form-graph svg")
        expect(graph.locator(".node.source .label")).to_have_text("impulse")
        expect(graph.locator(".node.sink .label")).to_have_text("out")
        expect(graph.locator(".node.sink .kind")).to_have_text("sink · blackhole")
        expect(graph.locator(".edge")).to_have_count(1)

        # Created, it shows up in the list (refreshed by polling and after the create).
        form.get_by_role("button", name="Create").click()
        expect(page.locator("#form-status")).to_contain_text("Created counter")
        row = page.locator("#pipelines tr", has_text="counter")
        expect(row).to_contain_text("Created")

        # Its page.
        row.get_by_role("link", name="counter").click()
        expect(page).to_have_url(re.compile(r"/pipelines/pl_[a-z0-9]+$"))
        pipeline_id = page.url.rsplit("/", 1)[-1]
        # A link to the page works on its own (the api serves the UI at every page's path).
        page.goto(f"/pipelines/{pipeline_id}")
        expect(page.locator("#d-name")).to_have_text("counter")
        expect(page.locator("#d-state")).to_have_text("Created")
        expect(page.locator("#d-stop")).to_have_text("none")
        expect(page.locator("#d-generation")).to_have_text("0")
        expect(page.locator("#d-query")).to_contain_text("INSERT INTO out SELECT counter")
        # New settings: stored, shown, and the job restarts with them (the controller's part).
        page.get_by_text("Settings").click()
        settings = page.locator("#settings-form")
        expect(settings.get_by_label("Parallelism")).to_have_value("1")
        settings.get_by_label("Parallelism").fill("3")
        settings.get_by_label("Checkpoint interval (s)").fill("2.5")
        settings.get_by_role("button", name="Apply and restart").click()
        expect(page.locator("#detail-status")).to_contain_text(
            "Settings applied: parallelism 3, a checkpoint every 2.5 s."
        )
        expect(page.locator("#d-parallelism")).to_have_text("3")
        stored = page.request.get(f"/api/v1/pipelines/{pipeline_id}").json()
        assert (stored["parallelism"], stored["checkpoint_interval_micros"]) == (3, 2_500_000)
        # What the controller records shows up at the next refresh: the metrics of a running
        # job, then checkpoints and errors.
        job_id = JobId(page.locator("#d-job").inner_text())
        api.call(lambda: api.controller.report_metrics(job_id, metrics_sample()))
        expect(page.locator("#metrics")).to_contain_text("12.5")
        expect(page.locator("#metrics")).to_contain_text("3.0 MiB")
        expect(page.locator("#metrics tr", has_text="windows")).to_contain_text("—")
        expect(page.locator("#metrics tr", has_text="windows")).not_to_contain_text("-1")
        expect(page.get_by_text("No checkpoints yet.")).to_be_visible()
        expect(page.get_by_text("No errors.")).to_be_visible()

        # Each operator's figures on the graph, as the worker reports them: the source's and
        # the sink's rows per second, and a stateful operator drawn before the sink; a node's
        # metrics on a click.
        api.call(lambda: api.controller.report_nodes(job_id, 10_000_000, *operator_nodes()))
        graph = page.locator("#d-graph svg")
        expect(graph.locator('[data-id="impulse"] .rate')).to_have_text("out 25/s")
        expect(graph.locator('[data-id="sink:out"] .rate')).to_have_text("in 20/s")
        stateful = graph.locator('[data-id="sink:out/stateStoreSave0"]')
        expect(stateful.locator(".kind")).to_have_text("operator · aggregate")
        expect(stateful.locator(".rate")).to_have_text("state 2 KiB")
        expect(graph.locator(".edge")).to_have_count(2)
        expect(graph.locator('[data-id="sink:out"]')).to_have_class(re.compile("pressure-mid"))
        stateful.click()
        node = page.locator("#d-node")
        expect(node.locator("h3")).to_contain_text("sink:out/stateStoreSave0")
        expect(node.locator('tr[data-metric="state_bytes"]')).to_contain_text("2,048")
        # Its metrics over time, a chart each: a second report is a second point.
        api.call(lambda: api.controller.report_nodes(job_id, 20_000_000, *operator_nodes()))
        chart = node.locator('.chart[data-metric="state_bytes"]')
        expect(chart.locator("figcaption")).to_have_text("state bytes")
        expect(chart.locator("canvas")).to_have_count(1)
        expect(node.locator('tr[data-metric="state_bytes"] td').nth(2)).to_have_text("2")
        page.screenshot(path=str(screenshots() / "pipeline-graph.png"), full_page=True)
        node.get_by_role("button", name="close").click()
        expect(node).to_be_hidden()

        checkpoint = Checkpoint(
            job_id=job_id,
            query="out",
            epoch=41,
            generation=0,
            watermark_micros=None,
            offsets_json='{"impulse": 410}',
            state_rows=0,
            state_bytes=0,
            rows_in=1234,
            duration_micros=1_500_000,
            finished_at=1,
        )
        api.run(api.store.add_checkpoint(checkpoint))
        api.run(
            api.store.add_job_error(
                job_id,
                generation=0,
                domain="external",
                retryable=True,
                message="the worker was lost",
                details="heartbeat missed",
            )
        )
        # The checkpoints: a timeline of their durations and state sizes, and each epoch's
        # state per query, opened by a click (and kept open as the page refreshes).
        epoch = page.locator("#checkpoints details")
        expect(epoch).to_have_count(1)
        for text in ("Epoch 41", "1.50 s", "1,234 rows in"):
            expect(epoch.locator("summary")).to_contain_text(text)
        expect(page.locator("#checkpoint-charts .chart canvas")).to_have_count(2)
        epoch.locator("summary").click()
        query_row = epoch.locator('tr[data-query="out"]')
        expect(query_row).to_contain_text('{"impulse":410}')
        expect(query_row).to_contain_text("0 B")
        assert_fits(page)
        expect(page.locator("#errors li")).to_contain_text("the worker was lost")
        expect(page.locator("#errors li")).to_contain_text("external · generation 0 · retryable")
        # Only a stopped job can be started.
        expect(page.get_by_role("button", name="Start", exact=True)).to_be_disabled()

        # Stop (with a checkpoint): the API stores the request; no controller acts on it.
        page.get_by_role("button", name="Stop", exact=True).click()
        expect(page.locator("#detail-status")).to_have_text(
            "Stop with a final checkpoint requested."
        )
        expect(page.locator("#d-stop")).to_have_text("checkpoint")
        expect(page.locator("#d-state")).to_have_text("Created · stopping")
        stored = page.request.get(f"/api/v1/pipelines/{pipeline_id}").json()
        assert (stored["stop"], stored["state"]) == ("checkpoint", "Created")

        # Delete is refused while the job is not stopped, and the UI says why.
        page.get_by_role("button", name="Delete").click()
        detail_alert = page.get_by_role("alert").filter(has_text="Could not delete counter")
        expect(detail_alert).to_contain_text(f"pipeline {pipeline_id} is Created; stop it first")
        expect(detail_alert).to_contain_text("HTTP 409")
        assert page.request.get(f"/api/v1/pipelines/{pipeline_id}").ok

        page.get_by_role("button", name="Restart", exact=True).click()
        expect(page.locator("#detail-status")).to_have_text("Restart requested.")
        expect(detail_alert).to_be_hidden()

        # The controller's part, played through the store: the job failed for good.
        job = api.run(api.store.get_job(job_id))
        assert job is not None
        failed = dataclasses.replace(
            job.status,
            state=JobState.FAILED,
            generation=2,
            restarts=1,
            restart_nonce=job.config.restart_nonce,
            failure_message="the worker was lost",
            failure_domain="external",
        )
        api.run(api.store.update_job_status(job_id, failed))
        expect(page.locator("#d-state")).to_have_text("Failed")
        expect(page.locator("#d-failure")).to_have_text("Failure: the worker was lost")
        expect(page.locator("#d-generation")).to_have_text("2")
        expect(page.locator("#d-restarts")).to_have_text("1")
        expect(page.get_by_role("button", name="Start", exact=True)).to_be_enabled()
        expect(page.get_by_role("button", name="Stop", exact=True)).to_be_disabled()

        # A failed pipeline can be deleted: back to the list, which no longer has it.
        page.get_by_role("button", name="Delete").click()
        expect(
            page.get_by_role("status").filter(has_text="Deleted pipeline counter.")
        ).to_be_visible()
        expect(page.get_by_text("No pipelines yet")).to_be_visible()
        assert page.request.get(f"/api/v1/pipelines/{pipeline_id}").status == 404

        # A preview streams its output rows into the page.
        write_sql(page, QUERY)
        form.get_by_role("button", name="Preview").click()
        expect(page.locator("#d-name")).to_have_text(re.compile(r"^preview-pl_"))
        expect(page.locator("#output-state")).to_have_text("done")
        expect(page.locator("#output-count")).to_have_text("3 row(s) received · 3 kept")
        expect(page.get_by_role("button", name="Stop", exact=True).last).to_be_disabled()
        expect(page.locator("#output-head")).to_have_text(re.compile("counter.*subtask"))
        expect(page.locator("#output-rows tr")).to_have_count(len(OUTPUT_ROWS))
        expect(page.locator("#output-rows tr").nth(2)).to_contain_text("2")
        expect(page.locator("#output-alert")).to_be_hidden()

        assert api.controller.nudges >= 3

    # Chromium logs every refused request; those two the test provoked are the only errors.
    expected = {
        "console: Failed to load resource: the server responded with a status of 400 (Bad Request)",
        "console: Failed to load resource: the server responded with a status of 409 (Conflict)",
    }
    assert [p for p in problems if p not in expected] == []
    assert set(problems) == expected


# An updating query's preview: debezium change records, as the worker writes them.
CHANGES = [
    {"op": "c", "after": {"user": "ann", "n": 1}},
    {"op": "c", "after": {"user": "bob", "n": 5}},
    {"op": "u", "before": {"user": "ann", "n": 1}, "after": {"user": "ann", "n": 2}},
    {"op": "d", "before": {"user": "bob", "n": 5}},
]


@pytest.mark.spark
def test_a_preview_of_changes_is_sorted_filtered_folded_and_stopped(
    tmp_path: Path, spark: SparkSession
) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        # The job's changes, then a stream that stays open (the job goes on running).
        api.controller.any_job_output = [
            OutputBatch("out", [json.dumps(c) for c in CHANGES], done=False),
            api.call(asyncio.Event),
        ]
        page.goto("/")
        write_sql(page, QUERY)
        page.locator("#new-form").get_by_role("button", name="Preview").click()
        card = page.locator("#output-card")
        rows = card.locator("#output-rows tr")
        expect(card.locator("#output-state")).to_have_text("streaming")
        expect(rows).to_have_count(4)
        expect(card.locator("#output-head")).to_have_text(re.compile("change.*user.*n"))
        expect(card.locator("#output-count")).to_have_text("4 row(s) received · 4 kept")
        expect(rows.locator(".op")).to_have_text(["create", "create", "update", "delete"])
        expect(rows.nth(3)).to_contain_text("bob")  # a delete shows the row it removes

        # Filtered: by any column's text, the kind of change included.
        card.get_by_label("Filter").fill("update")
        expect(rows).to_have_count(1)
        expect(card.locator("#output-count")).to_contain_text("1 match the filter")
        card.get_by_label("Filter").fill("")
        expect(rows).to_have_count(4)

        # Sorted by a click on a column's head: ascending, then descending, then as they came.
        sort_n = card.locator("#output-head button", has_text=re.compile(r"^n( ▲| ▼)?$"))
        sort_n.click()
        expect(card.locator('th[aria-sort="ascending"]')).to_have_text("n ▲")
        expect(rows.locator("td:last-child")).to_have_text(["1", "2", "5", "5"])
        sort_n.click()
        expect(rows.locator("td:last-child")).to_have_text(["5", "5", "2", "1"])
        page.screenshot(path=str(screenshots() / "preview-changes.png"), full_page=True)

        # Folded into the result as it is now: bob deleted, ann updated.
        card.get_by_label("Show").select_option("result")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_text(re.compile("ann.*2"))
        expect(card.locator("#output-count")).to_contain_text("1 distinct row(s) now")

        # Stop: the preview's job is asked to stop at once, and the stream is closed.
        card.get_by_role("button", name="Stop").click()
        expect(card.locator("#output-state")).to_have_text("stopped")
        expect(page.locator("#d-stop")).to_have_text("immediate")
        expect(card.get_by_role("button", name="Stop")).to_be_disabled()
        assert_fits(page)
    assert problems == []


@pytest.mark.spark
def test_the_editor_underlines_a_typo_completes_names_and_runs_on_a_shortcut(
    tmp_path: Path, spark: SparkSession
) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        page.goto("/")
        editor = page.get_by_label("SQL", exact=True)
        live = page.locator("#live-status")

        # A typo, validated as it is typed: underlined where it is, its message on hover.
        write_sql(page, BAD_QUERY)
        underline = page.locator(".cm-lintRange-error")
        expect(underline).to_have_count(1)
        expect(underline).to_have_text("countr")
        expect(live).to_have_text("1 problem(s): hover the underlined text.")
        underline.hover()
        expect(page.locator(".cm-tooltip-lint")).to_contain_text("countr")

        page.screenshot(path=str(screenshots() / "editor-typo.png"), full_page=True)

        # Fixed, the underline goes.
        write_sql(page, QUERY)
        expect(live).to_have_text("Valid.")
        expect(underline).to_have_count(0)

        # Completion: a table the last validation found, and a connector's option.
        page.keyboard.press("ControlOrMeta+End")
        page.keyboard.type("\nSELECT * FROM impu")
        option = page.locator(".cm-tooltip-autocomplete li", has_text="impulse")
        expect(option.first).to_be_visible()
        page.keyboard.press("Escape")
        # A function: Spark's, Arroyo's (a window), from the catalog the compiler has.
        page.keyboard.type(" WHERE regexp_lik")
        expect(page.locator(".cm-tooltip-autocomplete li", has_text="regexp_like")).to_be_visible()
        page.keyboard.press("Escape")
        page.keyboard.type(" AND tumbl")
        expect(page.locator(".cm-tooltip-autocomplete li", has_text="tumble")).to_be_visible()
        page.keyboard.press("Escape")
        write_sql(page, "CREATE TABLE t WITH (connector = 'impulse', event_r")
        page.keyboard.press("Control+Space")
        expect(page.locator(".cm-tooltip-autocomplete li", has_text="event_rate")).to_be_visible()
        page.keyboard.press("Escape")

        # An example, then the shortcut that previews it.
        page.get_by_label("Examples").select_option("Windows: a count per tumbling second")
        expect(editor).to_contain_text("tumble(interval '1 second')")
        editor.click()
        page.keyboard.press("ControlOrMeta+Enter")
        expect(page.locator("#d-name")).to_have_text(re.compile(r"^preview-pl_"))
        page.screenshot(path=str(screenshots() / "editor-preview.png"), full_page=True)
    assert problems == []


def _examples() -> dict[str, str]:
    """The editor's example queries, read from its module as the browser reads them."""
    text = (web_root() / "examples.js").read_text()
    return dict(re.findall(r'^  "([^"]+)": `([^`]*)`', text, re.MULTILINE))


def test_the_examples_are_read_whole() -> None:
    assert len(_examples()) == 5


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(_examples()))
def test_each_example_query_plans(name: str, spark: SparkSession, tmp_path: Path) -> None:
    from arroyo.compiler import Compiler

    compiled = Compiler(spark).compile(_examples()[name], "", parallelism=1)
    assert [d.message for d in compiled.diagnostics] == []


BAD_UDF = """from arroyo_udf import udf

@udf
def double_it(x: int) -> int:
    return 2 * x +
"""
UDF = BAD_UDF.replace("2 * x +", "2 * x")


@pytest.mark.spark
def test_a_udf_is_validated_as_typed_saved_used_in_a_query_and_deleted(
    tmp_path: Path, spark: SparkSession
) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        page.on("dialog", lambda dialog: dialog.accept())
        # A link of the UI's first, hash-routed version leads to the same page.
        page.goto("/#/udfs")
        expect(page).to_have_url(re.compile(r"/udfs$"))
        expect(page.get_by_role("heading", name="UDFs")).to_be_visible()
        expect(page.get_by_text("No saved UDFs yet")).to_be_visible()
        live = page.locator("#udf-live")

        # A syntax error, underlined on its line as it is typed.
        write_sql(page, BAD_UDF, "UDF")
        expect(live).to_have_text("1 problem(s): hover the underlined text.")
        expect(page.locator("#udf-editor .cm-lintRange-error")).to_have_count(1)
        expect(page.locator("#udf-editor .cm-gutter-lint .cm-lint-marker-error")).to_have_count(1)
        page.screenshot(path=str(screenshots() / "udf-error.png"), full_page=True)

        # Fixed, saved: listed, and every pipeline's queries may call it.
        write_sql(page, UDF, "UDF")
        expect(live).to_have_text("Valid: defines double_it.")
        page.get_by_label("Description").fill("twice its argument")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#udf-status")).to_have_text(
            "Saved double_it: every pipeline may call it now."
        )
        row = page.locator('#udfs tr[data-udf="double_it"]')
        expect(row).to_contain_text("twice its argument")
        page.get_by_role("link", name="Pipelines").click()
        write_sql(page, QUERY.replace("SELECT counter", "SELECT double_it(counter) AS twice"))
        expect(page.locator("#live-status")).to_have_text("Valid.")

        # A name already saved is refused with the API's message.
        page.get_by_role("link", name="UDFs").click()
        write_sql(page, UDF, "UDF")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#udf-alert")).to_contain_text("double_it")
        expect(page.locator("#udf-alert")).to_contain_text("HTTP 409")

        # Deleted, it is gone from the list.
        row.get_by_role("button", name="Delete").click()
        expect(page.locator("#udf-status")).to_have_text("Deleted double_it.")
        expect(row).to_have_count(0)

        # A link to a pipeline that does not exist: the API's answer where the page would be,
        # and no "Loading" left behind; a path that is no page says so.
        page.goto("/pipelines/pl_gone")
        expect(page.locator("#load-alert")).to_have_text(
            re.compile(r"Could not load the pipeline: .*pl_gone.*\(HTTP 404\)")
        )
        expect(page.locator("#detail-loading")).to_be_hidden()
        page.goto("/nowhere")
        expect(page.locator("#route-alert")).to_have_text(
            "There is no page /nowhere: see the pipelines."
        )
    refused = {
        "console: Failed to load resource: the server responded with a status of 409 (Conflict)",
        "console: Failed to load resource: the server responded with a status of 404 (Not Found)",
    }
    assert [p for p in problems if p not in refused] == []


@pytest.mark.spark
def test_an_api_that_requires_a_key_asks_for_one(tmp_path: Path, spark: SparkSession) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark, keys=True) as api, browser_page(api.url) as (page, problems):
        key, token = new_api_key("browser")
        api.run(api.store.create_api_key(key))
        page.goto("/")
        signin = page.locator("#signin")
        expect(signin).to_contain_text("This Arroyo requires an API key.")
        expect(page.locator("#list-alert")).to_contain_text("HTTP 401")

        # A wrong key: refused, with the API's reason, and not kept.
        signin.get_by_label("API key").fill(token[:-2] + "xx")
        signin.get_by_role("button", name="Sign in").click()
        expect(page.locator("#signin-alert")).to_contain_text("was not accepted")
        expect(page.locator("#signin-alert")).to_contain_text("HTTP 401")

        # The key: every page works, the preview's event stream included (by the cookie).
        signin.get_by_label("API key").fill(token)
        signin.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text("No pipelines yet")).to_be_visible()
        expect(signin).to_be_hidden()
        page.screenshot(path=str(screenshots() / "signed-in.png"), full_page=True)
        write_sql(page, QUERY)
        page.locator("#new-form").get_by_role("button", name="Preview").click()
        expect(page.locator("#output-state")).to_have_text("done")
        expect(page.locator("#output-rows tr")).to_have_count(len(OUTPUT_ROWS))

        # Revoked: the page asks again.
        api.run(api.store.revoke_api_key(key.id))
        page.get_by_role("button", name="Sign out").click()
        expect(signin).to_contain_text("This Arroyo requires an API key.")
    refused = "console: Failed to load resource: the server responded with a status of 401"
    assert [p for p in problems if not p.startswith(refused)] == []
