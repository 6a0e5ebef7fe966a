"""A warm worker skips its warm-up run when its job was handed over while Spark started (found
by the chaos run: a node killed and started again had its job wait out the warm-up of the
worker that replaced its own)."""

from __future__ import annotations

import os

from arroyo_services.worker import main  # type: ignore[import-not-found, unused-ignore]


def test_an_assignment_waiting_on_stdin_is_seen_without_blocking() -> None:
    read, write = os.pipe()  # the worker's stdin, as the node's pipe gives it
    with os.fdopen(read) as stdin, os.fdopen(write, "w") as node:
        assert not main._assignment_waiting(stdin)
        node.write('{"job_id": "job_1", "generation": 1}\n')
        node.flush()
        assert main._assignment_waiting(stdin)
