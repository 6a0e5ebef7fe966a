"""Secret options out of compiled programs (arroyo.connectors.secrets): taken out as
references, put back from the values a worker fetches, and a reference with no value named."""

from __future__ import annotations

import pytest

from arroyo.connectors import secrets
from arroyo.program.spec import ColumnSpec, PipelineProgram, SinkQuery, TableSpec


def _program() -> PipelineProgram:
    source = TableSpec(
        "events",
        "nats",
        "source",
        {"servers": "nats://127.0.0.1:4222", "auth.password": "hunter2", "subject": "s"},
        [ColumnSpec("n", "BIGINT")],
    )
    sink = TableSpec(
        "out",
        "redis",
        "sink",
        {"address": "redis://127.0.0.1:6379", "password": "s3cret", "target": "list"},
        [ColumnSpec("n", "BIGINT")],
    )
    return PipelineProgram([source], [], [SinkQuery(sink, "SELECT n FROM events")])


def test_secret_options_become_references_and_come_back_from_their_values() -> None:
    program = _program()
    taken = secrets.take(program)
    assert taken.secrets == {"events.auth.password": "hunter2", "out.password": "s3cret"}
    sent = secrets.without(taken)
    text = sent.to_json()
    assert "hunter2" not in text and "s3cret" not in text
    assert sent.sources[0].options["auth.password"] == "${secret:events.auth.password}"
    assert sent.queries[0].sink.options["target"] == "list"  # not secret: as it was
    assert secrets.wanted(sent) == {"events.auth.password", "out.password"}
    # What the worker runs: the values in memory, from what the controller answered.
    back = secrets.put(PipelineProgram.from_json(text), taken.secrets)
    assert back.sources == program.sources and back.queries == program.queries
    # Taking twice takes nothing more.
    assert secrets.take(taken) == taken


def test_a_reference_without_its_value_is_named() -> None:
    sent = secrets.without(secrets.take(_program()))
    with pytest.raises(secrets.MissingSecretError) as caught:
        secrets.put(sent, {"events.auth.password": "hunter2"})
    assert "table 'out' refers to secret 'out.password'" in caught.value.message
