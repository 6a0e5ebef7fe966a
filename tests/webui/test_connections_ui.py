"""The Connections page in a real browser (see ``test_webui`` for the api and the browser): a
connection profile and a connection table made with the wizard against a real Redis server,
tested, refused where an option is wrong, saved, named by a query on the pipelines page, and
deleted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from arroyo.testing.redis import RedisServer
from tests.webui.test_webui import (
    TIMEOUT_S,
    browser_page,
    chromium_path,
    running_api,
    screenshots,
    write_sql,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE = "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '10');\nINSERT INTO "
REST = " SELECT counter FROM impulse;"
JSON_SCHEMA = '{"type": "object", "properties": {"counter": {"type": "integer"}}}'


@pytest.mark.spark
@pytest.mark.redis
def test_a_profile_and_a_table_are_made_with_the_wizard_used_by_name_and_deleted(
    tmp_path: Path, spark: SparkSession, redis_server: RedisServer
) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        page.set_viewport_size({"width": 1024, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/")
        page.get_by_role("link", name="Connections").click()
        expect(page.get_by_role("heading", name="Connections", exact=True)).to_be_visible()
        expect(page.get_by_text("No connection tables yet")).to_be_visible()
        page.locator("#wiz-connector").select_option("redis")

        # A new profile: its settings from the connector's connection schema, the password
        # masked; tested with a wrong password (the server's refusal shown), then the right one.
        page.locator("#wiz-profile").select_option("new")
        profile = page.locator(".profile-new")
        page.get_by_label("Profile name").fill("local_redis")
        profile.get_by_label("address", exact=True).fill(redis_server.address)
        password = profile.get_by_label("password")
        expect(password).to_have_attribute("type", "password")
        password.fill("not-the-password")
        profile.get_by_role("button", name="Test profile").click()
        tested = page.locator(".step", has_text="2. Connection profile").get_by_role("status")
        expect(tested).to_contain_text(f"Failed: cannot reach redis at {redis_server.address}")
        password.fill(redis_server.password)
        profile.get_by_role("button", name="Test profile").click()
        expect(tested).to_contain_text("Connected: connected to redis")
        profile.get_by_role("button", name="Save profile").click()
        expect(tested).to_have_text("Saved profile local_redis.")
        expect(page.locator("#wiz-profile option:checked")).to_have_text("local_redis")

        # The table's options, from the connector's options schema; a bad one is refused
        # with the API's message, naming the option.
        options = page.locator(".step", has_text="3. Options")
        options.get_by_label("target", exact=True).select_option("string")
        options.get_by_label("target.key_prefix").fill("ui:")
        ttl = options.get_by_label("target.ttl_secs")
        ttl.fill("-5")
        page.get_by_label("Table name").fill("redis_out")
        page.get_by_role("button", name="Test table").click()
        alert = page.locator(".step", has_text="5. Test and save").get_by_role("alert")
        expect(alert).to_contain_text("Could not test the table: body.config.target.ttl_secs")
        expect(alert).to_contain_text("HTTP 400")
        ttl.fill("60")

        # The schema: a JSON Schema checked by the API, then none (a sink takes the query's).
        page.locator("#wiz-schema-mode").select_option("json")
        page.get_by_label("JSON Schema").fill(JSON_SCHEMA)
        page.get_by_role("button", name="Check schema").click()
        expect(page.locator(".step", has_text="4. Schema").get_by_role("status")).to_have_text(
            "Valid: counter BIGINT"
        )
        page.locator("#wiz-schema-mode").select_option("inferred")

        # Tested: each step of the API's test as it comes, then saved and listed.
        page.get_by_role("button", name="Test table").click()
        log = page.get_by_role("log")
        expect(log).to_contain_text("the sink table's options and schema are valid")
        expect(log).to_contain_text("connected to redis")
        expect(log).to_contain_text("the table is ready to use")
        expect(alert).to_be_hidden()
        page.screenshot(path=str(screenshots() / "connections-wizard.png"), full_page=True)
        page.get_by_role("button", name="Save table").click()
        expect(page.get_by_text("Saved redis_out: queries may name it now.")).to_be_visible()
        row = page.locator('#connection-tables tr[data-table="redis_out"]')
        expect(row).to_contain_text("redis · local_redis")
        expect(row).to_contain_text("sink")
        expect(page.locator('#connection-profiles tr[data-profile="local_redis"]')).to_be_visible()
        page.screenshot(path=str(screenshots() / "connections-list.png"), full_page=True)

        # On the pipelines page: listed beside the editor, put into a query by a click, and
        # the query that names it (with no CREATE TABLE for it) is valid.
        page.get_by_role("link", name="Pipelines").click()
        aside = page.get_by_role("complementary", name="Connections")
        expect(aside).to_contain_text("redis · sink")
        expect(aside).to_contain_text("local_redis (redis)")
        write_sql(page, SOURCE)
        aside.get_by_role("button", name="Insert redis_out").click()
        page.keyboard.insert_text(REST)
        expect(page.get_by_label("SQL", exact=True)).to_have_text(
            (SOURCE + "redis_out" + REST).replace("\n", "")
        )
        expect(page.locator("#live-status")).to_have_text("Valid.")
        page.get_by_role("button", name="Validate").click()
        expect(page.locator("#form-status")).to_have_text(
            "The query is valid: 1 source(s), 1 sink(s)."
        )
        page.screenshot(path=str(screenshots() / "connections-aside.png"), full_page=True)

        # Deleted after a confirmation: the table, then its profile.
        page.get_by_role("link", name="Connections").click()
        row.get_by_role("button", name="Delete").click()
        status = page.locator("#connections-status")
        expect(status).to_have_text("Deleted connection table redis_out.")
        expect(row).to_have_count(0)
        page.locator('#connection-profiles tr[data-profile="local_redis"]').get_by_role(
            "button", name="Delete"
        ).click()
        expect(status).to_have_text("Deleted connection profile local_redis.")
        expect(page.get_by_text("No connection profiles yet.")).to_be_visible()
    refused = "console: Failed to load resource: the server responded with a status of 400"
    assert [p for p in problems if not p.startswith(refused)] == []


@pytest.mark.spark
def test_a_source_table_takes_its_columns_from_the_column_editor(
    tmp_path: Path, spark: SparkSession
) -> None:
    chromium_path()
    expect.set_options(timeout=TIMEOUT_S * 1000)
    events = tmp_path / "events.json"
    events.write_text('{"id": 1, "name": "a"}\n')
    with running_api(tmp_path, spark) as api, browser_page(api.url) as (page, problems):
        page.set_viewport_size({"width": 1024, "height": 900})
        page.goto("/connections")
        page.get_by_label("Connector", exact=True).select_option("single_file")
        expect(page.get_by_text("single_file takes no profile.")).to_be_visible()
        options = page.locator(".step", has_text="3. Options")
        options.get_by_label("Table type").select_option("source")
        path = options.get_by_label("path")
        expect(path).to_have_attribute("aria-required", "true")
        path.fill(str(events))
        page.get_by_label("Table name").fill("events")

        # A column left without a name is refused by the API, which names the field.
        schema = page.locator(".step", has_text="4. Schema")
        schema.get_by_role("button", name="Add column").click()
        page.get_by_role("button", name="Save table").click()
        alert = page.locator(".step", has_text="5. Test and save").get_by_role("alert")
        expect(alert).to_contain_text("Could not save the table: body.schema.fields")
        expect(alert).to_contain_text("HTTP 400")

        # Two columns, one of them not nullable: tested, saved, listed with them.
        rows = schema.locator("tr.column")
        rows.nth(0).get_by_label("Column name").fill("id")
        rows.nth(0).get_by_label("Column type").select_option("int64")
        rows.nth(0).get_by_label("Nullable").uncheck()
        schema.get_by_role("button", name="Add column").click()
        rows.nth(1).get_by_label("Column name").fill("name")
        page.get_by_role("button", name="Test table").click()
        log = page.get_by_role("log")
        expect(log).to_contain_text("the source table's options and schema are valid")
        expect(log).to_contain_text("the table is ready to use")
        page.get_by_role("button", name="Save table").click()
        expect(page.get_by_text("Saved events: queries may name it now.")).to_be_visible()
        row = page.locator('#connection-tables tr[data-table="events"]')
        expect(row).to_contain_text("single_file")
        expect(row).to_contain_text("source")
        expect(row).to_contain_text("id, name")
        saved = api.run(api.store.list_connection_tables(10, None))
        assert [(f["name"], f["type"], f["required"]) for f in saved[0].schema["fields"]] == [
            ("id", "int64", True),
            ("name", "string", False),
        ]
    refused = "console: Failed to load resource: the server responded with a status of 400"
    assert [p for p in problems if not p.startswith(refused)] == []
