"""Secret options out of compiled programs (arroyo.connectors.secrets): taken out as
references, put back from the values a worker fetches, and a reference with no value named.
The options are as the planner stores them (``model_dump``: Python names, maps as maps)."""

from __future__ import annotations

import pytest

from arroyo.connectors import secrets
from arroyo.program.spec import ColumnSpec, PipelineProgram, SinkQuery, TableSpec

SOURCE_OPTIONS = {
    "servers": "nats://127.0.0.1:4222",
    "auth_type": "credentials",
    "auth_username": "app",
    "auth_password": "hunter2",
    "subject": "s",
}
SINK_OPTIONS = {
    "path": "s3://bucket/out",
    "storage_options": {"aws_access_key_id": "AKIA", "aws_secret_access_key": "s3cret"},
}


def _program(sink_options: dict[str, object] = SINK_OPTIONS) -> PipelineProgram:
    source = TableSpec(
        "events", "nats", "source", dict(SOURCE_OPTIONS), [ColumnSpec("n", "BIGINT")]
    )
    sink = TableSpec("out", "filesystem", "sink", dict(sink_options), [ColumnSpec("n", "BIGINT")])
    return PipelineProgram([source], [], [SinkQuery(sink, "SELECT n FROM events")])


def test_secret_options_become_references_and_come_back_from_their_values() -> None:
    program = _program()
    taken = secrets.take(program)
    assert set(taken.secrets) == {"events.auth_password", "out.storage_options"}
    sent = secrets.without(taken)
    text = sent.to_json()
    assert "hunter2" not in text and "s3cret" not in text
    assert sent.sources[0].options["auth_password"] == "${secret:events.auth_password}"
    assert sent.sources[0].options["auth_username"] == "app"  # not secret: as it was
    assert secrets.wanted(sent) == {"events.auth_password", "out.storage_options"}
    # What the worker runs: the values in memory, from what the controller answered.
    back = secrets.put(PipelineProgram.from_json(text), taken.secrets)
    assert back.sources == program.sources and back.queries == program.queries


def test_a_reference_without_its_value_is_named() -> None:
    sent = secrets.without(secrets.take(_program()))
    with pytest.raises(secrets.MissingSecretError) as caught:
        secrets.put(sent, {"events.auth_password": "hunter2"})
    assert "table 'out' refers to secret 'out.storage_options'" in caught.value.message


def test_a_reference_written_into_another_option_is_left_as_text() -> None:
    """A query cannot copy a secret into an option that is not secret (a path, a key prefix)."""
    sink = {"path": "${secret:events.auth_password}"}
    taken = secrets.take(_program(sink))
    sent = secrets.without(taken)
    assert secrets.wanted(sent) == {"events.auth_password"}
    back = secrets.put(sent, taken.secrets)
    assert back.queries[0].sink.options["path"] == "${secret:events.auth_password}"
