"""The web UI against a real ``arroyo``: the session's cluster (api, compiler, controller, node
and Spark workers as separate processes on SQLite, conftest.py), driven in headless Chromium as
a user drives it. tests/webui covers each page's behaviour, refusals included, over a scripted
controller; these journeys are the same pages over jobs that run: rows a preview's worker
sends, rates its metrics report, a restart with a new parallelism, a stop with a checkpoint."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from arroyo.testing.redis import RedisServer
from tests.cluster.harness import Cluster
from tests.webui.browser import assert_fits, browser_page, chromium_path, screenshots, write_sql

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]

# A bounded pipeline into the saved Redis table, which it names without a CREATE TABLE (its key
# column must be a TEXT that is never null).
INTO_SAVED = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000',
    message_count = '20');
INSERT INTO ui_counters
SELECT coalesce(CAST(counter AS TEXT), '') AS k, counter FROM impulse;"""

# Seconds: a job's first batch on a cold worker takes a while.
TIMEOUT_S = 180

PREVIEW = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '20');
SELECT counter, counter * 2 AS twice FROM impulse;"""

COUNTS = """CREATE TABLE impulse WITH (
    connector = 'impulse', event_rate = '50', event_time_interval = '20 milliseconds'
);
CREATE TABLE out WITH (connector = 'blackhole', type = 'sink');
INSERT INTO out
SELECT tumble(interval '1 second') AS window, count(*) AS n FROM impulse GROUP BY window;"""

UDF = """from arroyo_udf import udf

@udf
def plus_ten(x: int) -> int:
    return x + 10
"""


def state(page: Page) -> str:
    return page.locator("#d-state").inner_text()


def test_write_preview_launch_watch_resize_stop_and_start(cluster: Cluster) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    base = cluster.api_url.removesuffix("/api/v1")
    with browser_page(base, local_ca=cluster.ssl_context is not None) as (page, problems):
        page.on("dialog", lambda dialog: dialog.accept())
        page.set_viewport_size({"width": 1024, "height": 768})
        page.goto("/")

        # A typo, underlined as it is typed; fixed, the query is valid.
        write_sql(page, PREVIEW.replace("counter * 2", "countr * 2"))
        expect(page.locator("#sql-editor .cm-lintRange-error")).to_have_count(1)
        live = page.locator("#live-status")
        expect(live).to_have_text("1 problem(s): hover the underlined text.")
        write_sql(page, PREVIEW)
        expect(page.locator("#live-status")).to_have_text("Valid.")
        expect(page.locator("#sql-editor .cm-lintRange-error")).to_have_count(0)

        # Preview: the worker's rows stream into the table, until the user stops it.
        page.keyboard.press("ControlOrMeta+Enter")
        expect(page.locator("#d-name")).to_have_text(re.compile(r"^preview-pl_"))
        rows = page.locator("#output-rows tr")
        expect(rows.nth(2)).to_be_visible()
        expect(page.locator("#output-head")).to_have_text(re.compile("counter.*twice"))
        first = rows.first.locator("td")
        counter = int(first.nth(0).inner_text())
        assert int(first.nth(1).inner_text()) == 2 * counter
        page.locator("#output-card").get_by_role("button", name="Stop").click()
        expect(page.locator("#output-state")).to_have_text("stopped")
        expect(page.locator("#d-state")).to_have_text(re.compile("Stopped|Finished"))

        # Launch: the pipeline's page, where its graph's rates move as the job runs.
        page.goto("/")
        page.get_by_label("Name").fill("counts")
        write_sql(page, COUNTS)
        page.keyboard.press("ControlOrMeta+Shift+Enter")
        page.locator("#form-status").get_by_role("link", name="counts").click()
        expect(page.locator("#d-state")).to_have_text("Running")
        graph = page.locator("#d-graph svg")
        expect(graph.locator('[data-id="impulse"] .rate')).to_have_text(re.compile(r"out [1-9]"))
        expect(graph.locator('[data-id="sink:out"] .rate')).to_have_text(re.compile(r"in [1-9]"))
        # The window's state between the source and the sink: impulse -> aggregate -> out.
        expect(graph.locator('[data-id="sink:out/stateStoreSave0"] .kind')).to_contain_text(
            "aggregate"
        )
        expect(graph.locator(".edge")).to_have_count(2)
        # A node's metrics over time: their points grow as the reports come.
        graph.locator('[data-id="impulse"]').click()
        node = page.locator("#d-node")
        expect(node.locator('.chart[data-metric="messages_sent"] canvas')).to_have_count(1)
        points = node.locator('tr[data-metric="messages_sent"] td').nth(2)
        expect(points).to_have_text(re.compile(r"\d+"))
        seen = int(points.inner_text())
        expect(points).not_to_have_text(str(seen))
        page.screenshot(path=str(screenshots() / "cluster-pipeline.png"), full_page=True)
        # The sink's: its query's batch duration and watermark lag over time too.
        graph.locator('[data-id="sink:out"]').click()
        expect(node.locator("h3")).to_contain_text("sink:out")
        for metric in ("batch_duration", "watermark_lag", "messages_recv"):
            expect(node.locator(f'.chart[data-metric="{metric}"] canvas')).to_have_count(1)

        # A new parallelism: the job restarts from its checkpoint with it.
        page.locator(".settings summary").click()
        page.locator("#settings-form").get_by_label("Parallelism").fill("2")
        page.get_by_role("button", name="Apply and restart").click()
        expect(page.locator("#d-parallelism")).to_have_text("2")
        expect(page.locator("#d-state")).to_have_text("Running")
        expect(page.locator("#checkpoints details").first).to_be_visible()

        # Stop with a checkpoint, then start again: it resumes.
        page.get_by_role("button", name="Stop", exact=True).click()
        expect(page.locator("#d-state")).to_have_text("Stopped")
        stopped_epochs = page.locator("#checkpoints details").count()
        page.get_by_role("button", name="Start", exact=True).click()
        expect(page.locator("#d-state")).to_have_text("Running")
        expect(page.locator("#checkpoints details")).not_to_have_count(stopped_epochs)
        assert_fits(page)
        page.get_by_role("button", name="Stop now").click()
        expect(page.locator("#d-state")).to_have_text("Stopped")
    assert problems == []


def test_a_saved_udf_is_used_in_a_preview(cluster: Cluster) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    base = cluster.api_url.removesuffix("/api/v1")
    with browser_page(base, local_ca=cluster.ssl_context is not None) as (page, problems):
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/udfs")
        write_sql(page, UDF, "UDF")
        expect(page.locator("#udf-live")).to_have_text("Valid: defines plus_ten.")
        page.get_by_role("button", name="Save").click()
        expect(page.locator('#udfs tr[data-udf="plus_ten"]')).to_be_visible()

        page.get_by_role("link", name="Pipelines").click()
        write_sql(page, PREVIEW.replace("counter * 2 AS twice", "plus_ten(counter) AS later"))
        expect(page.locator("#live-status")).to_have_text("Valid.")
        page.locator("#new-form").get_by_role("button", name="Preview").click()
        first = page.locator("#output-rows tr").first.locator("td")
        expect(first.nth(1)).to_have_text(re.compile(r"\d+"))
        assert int(first.nth(1).inner_text()) == int(first.nth(0).inner_text()) + 10
        page.locator("#output-card").get_by_role("button", name="Stop").click()
        expect(page.locator("#output-state")).to_have_text("stopped")

        page.goto("/udfs")
        page.locator('#udfs tr[data-udf="plus_ten"]').get_by_role("button", name="Delete").click()
        expect(page.locator('#udfs tr[data-udf="plus_ten"]')).to_have_count(0)
    assert problems == []


@pytest.mark.redis
def test_a_table_made_with_the_wizard_takes_a_pipelines_rows(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    import redis

    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    base = cluster.api_url.removesuffix("/api/v1")
    with browser_page(base, local_ca=cluster.ssl_context is not None) as (page, problems):
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/connections")
        page.locator("#wiz-connector").select_option("redis")
        # A profile for the server, tested and saved.
        page.locator("#wiz-profile").select_option("new")
        profile = page.locator(".profile-new")
        page.get_by_label("Profile name").fill("cluster_redis")
        profile.get_by_label("address", exact=True).fill(redis_server.address)
        profile.get_by_label("password").fill(redis_server.password)
        profile.get_by_role("button", name="Test profile").click()
        tested = page.locator(".step", has_text="2. Connection profile").get_by_role("status")
        expect(tested).to_contain_text("Connected: connected to redis")
        profile.get_by_role("button", name="Save profile").click()
        expect(tested).to_have_text("Saved profile cluster_redis.")
        # A string per row, under the row's key.
        options = page.locator(".step", has_text="3. Options")
        options.get_by_label("target", exact=True).select_option("string")
        options.get_by_label("target.key_prefix").fill("ui:")
        options.get_by_label("target.key_column").fill("k")
        page.get_by_label("Table name").fill("ui_counters")
        page.get_by_role("button", name="Save table").click()
        expect(page.get_by_text("Saved ui_counters: queries may name it now.")).to_be_visible()

        # A pipeline that names it, launched from the editor; it finishes, and Redis (read by
        # its own client) has a key per row.
        page.get_by_role("link", name="Pipelines").click()
        expect(page.get_by_role("complementary", name="Connections")).to_contain_text("ui_counters")
        page.get_by_label("Name").fill("into_redis")
        write_sql(page, INTO_SAVED)
        page.get_by_role("button", name="Validate").click()
        expect(page.locator("#form-status")).to_have_text(
            "The query is valid: 1 source(s), 1 sink(s).", timeout=30_000
        )
        page.get_by_role("button", name="Create").click()
        page.locator("#form-status").get_by_role("link", name="into_redis").click()
        expect(page.locator("#d-state")).to_have_text("Finished")
        client = redis.Redis(redis_server.host, redis_server.port, password=redis_server.password)
        values = {k.decode(): json.loads(client.get(k) or b"null") for k in client.keys("ui:*")}
        assert values == {f"ui:{n}": {"k": str(n), "counter": n} for n in range(20)}
    assert problems == []
