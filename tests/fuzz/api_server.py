"""The real api (``tests.api.running_api``: a SQLite store, the real compiler service, a
``ScriptedController``) served from a background event loop, so that a synchronous HTTP client
(schemathesis's) can call it from the test's own thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.aio import loop_thread
from tests.api import running_api

if TYPE_CHECKING:
    from arroyo.compiler import Compiler


@dataclass(frozen=True, slots=True)
class ServedApi:
    base_url: str
    # Path parameters naming objects that exist: a pipeline, its job.
    known_ids: dict[str, str]


@contextmanager
def served_api(tmp_path: Path, compiler: Compiler) -> Iterator[ServedApi]:
    """The api, up for the block, with one pipeline (and its job) created."""
    with loop_thread("fuzz-api", timeout_s=120) as thread:
        context = running_api(tmp_path, compiler, compiler_wait_s=30)
        env = thread.run(context.__aenter__())
        try:
            pipeline = thread.run(env.create("fuzzed"))
            yield ServedApi(
                str(env.client.make_url("")).rstrip("/"),
                {"pipeline_id": pipeline["id"], "job_id": pipeline["job_id"]},
            )
        finally:
            thread.run(context.__aexit__(None, None, None))
