"""How a failed streaming query becomes the job's error: Spark's own Python processes failing
(not starting in time under load, or killed) is worth a restart from the checkpoint; a
pipeline's own error is not."""

from __future__ import annotations

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
