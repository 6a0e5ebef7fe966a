"""One program running in this process's SparkSession, on a thread of its own.

The worker's gRPC handlers stay on the event loop; Spark calls block, so the run lives on a
thread and tells the worker what happens through a ``Reporter``, whose methods are called on that
thread, in order: ``started`` once, ``batch`` per committed micro-batch, then exactly one of
``finished`` (all bounded input consumed), ``stopped`` (a stop was asked for) or ``failed``.
"""

from __future__ import annotations

import enum
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import structlog

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.program.spec import PipelineProgram

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.connectors.runtime.remote_state import RemoteState
    from arroyo.engine.runner import BatchReport, PipelineRunner

log = structlog.get_logger(__name__)


class Phase(enum.StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"


class Reporter(Protocol):
    """What a run tells its worker; called on the run's thread."""

    def started(self) -> None: ...

    def batch(self, report: BatchReport) -> None: ...

    def finished(self) -> None: ...

    def stopped(self) -> None: ...

    def failed(self, error: ArroyoError) -> None: ...


class Execution:
    """Starts the program on ``start()``; ``stop()`` may be called from any thread."""

    def __init__(
        self,
        spark: SparkSession,
        program: PipelineProgram,
        state_dir: Path,
        reporter: Reporter,
        *,
        restore: bool,
        trigger_interval_ms: int = 0,
        remote: RemoteState | None = None,
    ) -> None:
        self.spark = spark
        self.remote = remote
        self.program = program
        self.state_dir = state_dir
        self.reporter = reporter
        self.restore = restore
        self.trigger_interval_ms = trigger_interval_ms
        self.phase = Phase.IDLE
        self._runner: PipelineRunner | None = None
        self._thread = threading.Thread(target=self._run, name="execution", daemon=True)
        self._stop_asked: bool | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self.phase = Phase.RUNNING
        self._thread.start()

    def stop(self, *, graceful: bool) -> None:
        with self._lock:
            if self.phase not in (Phase.IDLE, Phase.RUNNING):
                return
            self.phase = Phase.STOPPING
            self._stop_asked = graceful
            if self._runner is not None:
                self._runner.stop(graceful=graceful)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        from arroyo.engine.runner import PipelineRunner

        try:
            if not self.restore and self.state_dir.exists():
                # Starting from nothing: earlier checkpoints must not be resumed from.
                shutil.rmtree(self.state_dir)
            if not self.restore and self.remote is not None:
                self.remote.clear()
            runner = PipelineRunner(
                self.spark,
                self.program,
                self.state_dir,
                on_batch=self.reporter.batch,
                trigger_interval_ms=self.trigger_interval_ms,
                remote=self.remote,
            )
            with self._lock:
                self._runner = runner
                asked = self._stop_asked
            if asked is not None:
                runner.stop(graceful=asked)
            runner.start()
            self.reporter.started()
            finished = runner.wait()
        except ArroyoError as err:
            self.phase = Phase.FAILED
            self.reporter.failed(err)
            return
        except Exception as err:
            self.phase = Phase.FAILED
            log.exception("execution_crashed")
            failure = ArroyoError(f"{type(err).__name__}: {err}", code="worker_error")
            failure.domain = ErrorDomain.INTERNAL
            failure.retryable = True
            self.reporter.failed(failure)
            return
        finally:
            if self.remote is not None:
                # Only a working copy: the state is in the object store.
                shutil.rmtree(self.state_dir, ignore_errors=True)
        if finished:
            self.phase = Phase.FINISHED
            self.reporter.finished()
        else:
            self.phase = Phase.STOPPED
            self.reporter.stopped()
