"""A real browser for the UI's tests: headless Chromium (the system's ``chromium``, as Debian
installs it) driven by Playwright's sync API, and what the tests do with it as a user would."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Error, Page, expect, sync_playwright


def screenshots() -> Path:
    """Where the tests save screenshots of the pages they reach: ``ARROYO_TEST_ARTIFACTS``'s
    ``webui`` (CI keeps it), else a temporary directory."""
    root = os.environ.get("ARROYO_TEST_ARTIFACTS") or tempfile.mkdtemp(prefix="arroyo-ui-")
    path = Path(root) / "webui"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_sql(page: Page, text: str, editor_label: str = "SQL") -> None:
    """Replace an editor's text as a user would: select all of it, then type (as one input,
    which is what pasting is). Playwright's ``fill`` on the editor's content can add to the
    text CodeMirror holds rather than replace it."""
    editor = page.get_by_label(editor_label, exact=True)
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(text)
    expect(editor).to_have_text(text.replace("\n", ""))


def assert_fits(page: Page) -> None:
    """The page is no wider than the window: nothing needs a sideways scroll to be seen."""
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path is not None:
            return path
    pytest.fail(
        "no Chromium on PATH (chromium or chromium-browser): the web UI's tests drive a real "
        "browser; install Debian's package (apt-get install chromium), as .ci/run does",
        pytrace=False,
    )


@contextmanager
def browser_page(base_url: str, *, local_ca: bool = False) -> Iterator[tuple[Page, list[str]]]:
    """A page of a headless Chromium, and the errors its console and scripts report.
    ``local_ca``: the site's certificate is from a CA of the test's own, which the browser
    does not know; the page is served over HTTPS all the same."""
    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            # The page formats numbers and times in the browser's locale.
            page = browser.new_page(base_url=base_url, locale="en-US", ignore_https_errors=local_ca)
            problems: list[str] = []

            def on_console(message: ConsoleMessage) -> None:
                if message.type == "error":
                    problems.append(f"console: {message.text}")

            def on_page_error(error: Error) -> None:
                problems.append(f"uncaught: {error.message}")

            page.on("console", on_console)
            page.on("pageerror", on_page_error)
            yield page, problems
        finally:
            browser.close()
