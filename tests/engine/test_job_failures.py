"""How a failed streaming query becomes the job's error: Spark's own Python processes failing
(not starting in time under load, or killed) is worth a restart from the checkpoint; a
pipeline's own error is not."""

from __future__ import annotations

import pytest

from arroyo.connectors.kafka.client import AbandonedCallError
from arroyo.connectors.runtime.sinks import batch_in_flight
from arroyo.engine.runner import _job_failed
from arroyo.errors import ErrorDomain


def test_a_python_worker_that_did_not_start_in_time_is_retried() -> None:
    failure = _job_failed(
        [
            "org.apache.spark.sql.streaming.StreamingQueryException: Python worker failed to "
            "connect back.",
            "java.net.SocketTimeoutException: Timed out while waiting for the Python worker to "
            "connect back",
        ]
    )
    assert failure.retryable
    assert failure.domain == ErrorDomain.INTERNAL


def test_a_pipelines_own_error_is_not() -> None:
    failure = _job_failed(
        ["org.apache.spark.api.python.PythonException: KinesisError: kinesis stream 'x' failed"]
    )
    assert not failure.retryable
    assert failure.domain == ErrorDomain.USER


def test_a_sinks_own_error_keeps_its_retry_hint() -> None:
    """A Kafka sink that lost its broker mid-batch raised KafkaUnavailableError (retryable)
    into Spark, which hands back only its traceback's text: the job's error is retried still,
    as the chaos test's paused broker showed it must be."""
    message = "Kafka at 127.0.0.1:1: send_offsets_to_transaction did not finish in 35 s"
    with pytest.raises(AbandonedCallError), batch_in_flight():
        raise AbandonedCallError(message)
    failure = _job_failed(
        [
            "org.apache.spark.sql.streaming.StreamingQueryException: An exception was raised by "
            "the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "sink.py", line 1, in write_batch\n'
            f"arroyo.connectors.kafka.client.AbandonedCallError: {message}\n"
        ]
    )
    assert failure.retryable
    assert failure.domain == ErrorDomain.EXTERNAL
    assert str(failure) == f"AbandonedCallError: {message}"
