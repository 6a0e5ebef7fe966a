"""A warm worker skips its warm-up run when its job was handed over while Spark started (found
by the chaos run: a node killed and started again had its job wait out the warm-up of the
worker that replaced its own)."""

from __future__ import annotations

import os
import sys

import pytest

from arroyo_services.worker import main  # type: ignore[import-not-found, unused-ignore]


def test_an_assignment_waiting_on_stdin_is_seen_without_blocking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read, write = os.pipe()
    with os.fdopen(read) as stdin, os.fdopen(write, "w") as node:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert not main._assignment_waiting()
        node.write('{"job_id": "job_1", "generation": 1}\n')
        node.flush()
        assert main._assignment_waiting()
