"""Chaos across every service: a Kafka -> tumble -> Kafka exactly-once pipeline runs at a
steady input rate on a cluster on PostgreSQL while a seeded schedule strikes it with faults, one
at a time; afterwards an independent read_committed consumer checks that every window came out
exactly once. ``tests/cluster/test_chaos.py`` runs it small in CI, ``bench/chaos.py`` at length.

The faults (``FAULT_KINDS``):

- ``api``, ``controller``, ``compiler``, ``node``: kill -9 of the service's process, which the
  run (as a supervisor would: systemd's ``Restart=always``, ``arroyo cluster``) starts again at
  once with the same configuration. A node's worker outlives it: the node started again adopts
  it, and the job runs on in its generation. A kind with several replicas loses one, in turn:
  the chaos cluster runs two compilers (``running_cluster(compilers=2)``, the api given both
  addresses), as a deployment answers "a compiler dies" (the compiler is stateless; one
  compiler's restart is a JVM, a Spark session and a warm-up plan: 6-19 s on a loaded 2-core
  machine, which the api would wait out with no other).
- ``worker``: kill -9 of the job's worker; nothing but the controller brings it back.
- ``postgres``: ``pg_ctl restart -m fast``: every service's connections are cut.
- ``kafka``: SIGSTOP of the broker for ``pause_s`` seconds, then SIGCONT.

Recovery, per fault: the seconds from the fault (for the broker pause, from its SIGCONT: the
pause itself is the fault's length, not its recovery) until both
(1) the component answers again: the api serves the job from the database (``api``,
    ``postgres``), the api validates a query through the compilers (``compiler``: with two,
    that is the api's failover to the other one; each answer is checked to have come while the
    killed one's gRPC port was still closed, ``by_survivor``), the controller
    says it is ready on ``/status`` and the job is Running (``controller``), the node says it is
    ready and the job is Running (``node``: no new generation, its worker adopted), the job runs
    a new generation (``worker``); and
(2) the pipeline has caught up: the watching read_committed consumer has seen the row of the
    window that was still being fed when the fault struck (its last events came after it), so
    the pipeline read, windowed and committed input fed after the fault.
Part (2) takes a while with no fault at all: the window's remaining input, the watermark's
second, a micro-batch and the transaction. The run measures that the same way at no fault
(``none``, the baseline) before the first fault; a recovery is the fault's cost plus that.
A fault with no recovery within ``deadline_s`` ends the run (the rest of the schedule is not
struck; the report says how many faults were survived).

The killed compiler replica's own restart, until its ``/status`` says ready again, is timed
beside its recovery and reported as a figure of its own (``compiler restart (replica back)``),
for information: the recovery does not wait for it, and the JVM's start cost stays in view.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import statistics
import time
import urllib.error
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from arroyo.testing.kafka import KafkaBroker
from arroyo.testing.postgres import PostgresServer
from tests.cluster.chaos_stream import (
    Feeder,
    Tally,
    Watcher,
    closed_windows,
    read_windows,
    tally,
)
from tests.cluster.harness import ApiError, Cluster

# The same Kafka -> tumble -> Kafka exactly-once pipeline the Kafka cluster test runs.
from tests.cluster.test_kafka_cluster import PIPELINE

SERVICE_KINDS = ("api", "controller", "compiler", "node")
FAULT_KINDS = (*SERVICE_KINDS, "worker", "postgres", "kafka")
GOAL_S = 15.0
T = TypeVar("T")
_POLL_S = 0.1
_PROBE_ERRORS = (ApiError, urllib.error.URLError, ConnectionError, OSError, TimeoutError)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at_s: float  # from the start of the schedule; struck no earlier than the last recovery


def schedule(seed: int, faults: int, seconds: float) -> list[Fault]:
    """``faults`` faults over ``seconds``: the kinds as evenly as the count allows (every kind
    at least once from seven faults on) in a seeded random order, each at a seeded random point
    of the first half of its equal share of the time."""
    rng = random.Random(seed)
    kinds = list(FAULT_KINDS) * (faults // len(FAULT_KINDS))
    kinds += rng.sample(FAULT_KINDS, faults % len(FAULT_KINDS))
    rng.shuffle(kinds)
    share = seconds / max(faults, 1)
    return [Fault(k, i * share + rng.uniform(0, share / 2)) for i, k in enumerate(kinds)]


@dataclass(frozen=True, slots=True)
class Recovery:
    kind: str
    seconds: float | None  # None: not recovered within the deadline
    at_s: float  # when the fault struck, from the start of the schedule
    back_s: float | None = None  # of which until the component answered again
    # The compiler, one of several replicas killed: which, until it said ready again itself
    # (None: not within the deadline), and whether the api's answer came while its gRPC port
    # was still closed (so another replica gave it; None: no answer).
    replica: str | None = None
    restart_s: float | None = None
    by_survivor: bool | None = None


@dataclass
class ChaosReport:
    recoveries: list[Recovery] = field(default_factory=list)
    unplanned_exits: list[str] = field(default_factory=list)
    events: int = 0
    feed_failures: list[str] = field(default_factory=list)
    tally: Tally | None = None
    services_back: bool = False
    job_state: str = ""

    @property
    def faults(self) -> list[Recovery]:
        return [r for r in self.recoveries if r.kind != "none"]

    @property
    def survived(self) -> int:
        return sum(1 for r in self.faults if r.seconds is not None)

    def by_kind(self) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {}
        for r in self.recoveries:
            if r.seconds is not None:
                times.setdefault(r.kind, []).append(r.seconds)
        return times

    def over_goal(self) -> list[Recovery]:
        return [r for r in self.faults if r.seconds is None or r.seconds > GOAL_S]

    def replicated(self, kind: str) -> list[Recovery]:
        """The faults of ``kind`` that killed one of several replicas."""
        return [r for r in self.faults if r.kind == kind and r.replica is not None]

    def lines(self) -> list[str]:
        out = [f"faults survived: {self.survived} of {len(self.faults)}"]
        rows: list[tuple[str, int, list[float], str]] = []  # label, count, times, missing
        times = self.by_kind()
        for kind in ("none", *FAULT_KINDS):
            struck = [r for r in self.recoveries if r.kind == kind]
            if struck:
                rows.append((kind, len(struck), times.get(kind, []), "not recovered"))
            if replicated := self.replicated(kind):
                restarts = [r.restart_s for r in replicated if r.restart_s is not None]
                label = f"{kind} restart (replica back)"
                rows.append((label, len(replicated), restarts, "not back"))
        width = max(len(label) for label, *_ in rows)
        out.append(f"{'fault':<{width}} {'count':>5} {'median s':>9} {'max s':>7}")
        for label, count, got, missing in rows:
            failed = count - len(got)
            median = f"{statistics.median(got):.1f}" if got else "-"
            worst = f"{max(got):.1f}" if got else "-"
            note = f"  ({failed} {missing})" if failed else ""
            out.append(f"{label:<{width}} {count:>5} {median:>9} {worst:>7}{note}")
        for kind in SERVICE_KINDS:
            if replicated := self.replicated(kind):
                by_survivor = sum(1 for r in replicated if r.by_survivor)
                out.append(
                    f"{kind} faults answered by a surviving replica (the killed one's port "
                    f"still closed): {by_survivor} of {len(replicated)}"
                )
        over = [r for r in self.over_goal() if r.seconds is not None and r.kind != "none"]
        out.append(f"recoveries over {GOAL_S:g} s: {len(over)}")
        for r in over:
            out.append(f"  {r.kind} at {r.at_s:.0f} s: {r.seconds:.1f} s")
        if self.tally is not None:
            t = self.tally
            out.append(
                f"events fed: {self.events}; windows closed: {t.closed}, "
                f"rows expected: {t.rows_expected}"
            )
            out.append(f"rows lost: {t.rows_lost}  rows duplicated: {t.rows_duplicated}")
            for what, windows in (("missing", t.missing), ("written twice", t.duplicated)):
                if windows:
                    out.append(f"  windows {what}: {list(windows)[:20]}")
            if t.wrong:
                out.append(f"  windows with a wrong count: {list(t.wrong)[:20]}")
        out.append(f"services that died unasked: {self.unplanned_exits or 'none'}")
        out.append(f"every service back at the end: {self.services_back}")
        out.append(f"job at the end: {self.job_state}")
        if self.feed_failures:
            out.append(f"feed failures: {self.feed_failures[:5]}")
        return out


class Chaos:
    """Strikes faults at a running pipeline and times each recovery. Owns nothing it did not
    start: the caller's cluster, broker and PostgreSQL stay the caller's to stop."""

    def __init__(
        self,
        cluster: Cluster,
        broker: KafkaBroker,
        postgres: PostgresServer,
        *,
        pause_s: float = 20.0,
        deadline_s: float = 120.0,
        say: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.cluster, self.broker, self.postgres = cluster, broker, postgres
        self.pause_s, self.deadline_s, self.say = pause_s, deadline_s, say
        self.report = ChaosReport()
        self.pipeline_id = ""
        self.query = ""
        self._struck: Counter[str] = Counter()  # faults per service kind, to take turns

    # the run

    def run(
        self, faults: list[Fault], *, rate: int, seconds: float = 0.0, baseline: int = 1
    ) -> ChaosReport:
        """Feed, start the pipeline, time ``baseline`` catch-ups at no fault, strike ``faults``
        at their times, keep running until ``seconds`` have passed since the first fault's
        schedule started, then check the output."""
        topic = f"chaos-{os.getpid()}-{int(time.time() * 1000)}"
        source, sink = f"{topic}-events", f"{topic}-counts"
        self.broker.create_topic(source, partitions=2)
        self.broker.create_topic(sink)
        self.query = PIPELINE.format(
            servers=self.broker.bootstrap_servers, source=source, sink=sink
        )
        feeder = Feeder(self.broker, source, rate).start()
        watcher = Watcher(self.broker, sink, rate).start()
        try:
            body = {"name": "chaos", "query": self.query, "parallelism": 1}
            self.pipeline_id = self.cluster.call("POST", "/pipelines", body)["id"]
            self.cluster.wait_state(self.pipeline_id, "Running")
            self._wait_for("the first window", lambda: watcher.newest() >= 0, 120)
            started = time.monotonic()
            self.say(f"running; first window out; {len(faults)} faults to strike")
            for _ in range(baseline):
                self.report.recoveries.append(self.strike("none", feeder, watcher, 0.0))
            started = time.monotonic()
            for fault in faults:
                while time.monotonic() - started < fault.at_s:
                    self._supervise()
                    time.sleep(_POLL_S)
                recovery = self.strike(fault.kind, feeder, watcher, time.monotonic() - started)
                self.report.recoveries.append(recovery)
                took = "not recovered"
                if recovery.seconds is not None and recovery.back_s is not None:
                    took = f"{recovery.seconds:.1f} s (answering again in {recovery.back_s:.1f} s"
                    if recovery.replica is not None:
                        restart = recovery.restart_s
                        took += (
                            f"; by the surviving replica: {recovery.by_survivor}; the killed "
                            f"{recovery.replica} ready again in "
                            + (f"{restart:.1f} s" if restart is not None else "-")
                        )
                    took += ")"
                self.say(f"{recovery.at_s:6.1f} s  {fault.kind:<10} recovered in {took}")
                if recovery.seconds is None:
                    break
            while time.monotonic() - started < seconds:
                self._supervise()
                time.sleep(_POLL_S)
        finally:
            feeder.stop()
            self.report.events = feeder.produced
            self.report.feed_failures = feeder.failures
        try:
            closed = closed_windows(feeder.produced, rate)
            self._wait_for("every closed window", lambda: watcher.newest() >= closed - 1, 120)
            self._check_services()
            self.report.tally = tally(read_windows(self.broker, sink), rate, closed)
        finally:
            watcher.stop()
        return self.report

    def strike(self, kind: str, feeder: Feeder, watcher: Watcher, at_s: float) -> Recovery:
        """One fault of ``kind`` (``none``: no fault), and the seconds until the component
        answers again and the output caught up (None past ``deadline_s``).

        A service kind with several replicas loses one, in turn. For the compiler, the one
        replicated in this cluster, the recovery also says how long the killed replica took to
        say it was ready again (``restart_s``, for information: the api does not wait for it)
        and whether the api's validation was answered while the killed replica's gRPC port was
        still closed (``by_survivor``: so the api's channel took the call to the other one)."""
        back: Callable[[], bool] = lambda: True  # noqa: E731
        generation = -1  # the job's, before a node's kill
        victim = ""
        validation: _Validation | None = None

        def now() -> tuple[int, float]:
            """The window being fed, and the time."""
            return (feeder.produced - 1) // feeder.rate, time.monotonic()

        if kind == "none":
            open_window, struck = now()
        elif kind in SERVICE_KINDS:
            if kind == "node":
                generation = self.cluster.job(self.pipeline_id)["generation"]
            replicas = self.cluster.replicas(kind)
            victim = replicas[self._struck[kind] % len(replicas)]
            self._struck[kind] += 1
            if kind == "compiler":
                self._plan_on_every_compiler()
            open_window, struck = now()
            self.cluster.stop(victim, signal.SIGKILL, timeout=30)
            self.cluster.start(victim, *self.cluster.launched[victim])
            if kind == "compiler":
                killed_port = self.cluster.port(victim) if len(replicas) > 1 else None
                back = validation = _Validation(self.cluster, self.query, killed_port)
            else:
                back = self._probe(kind)
        elif kind == "worker":
            before = self.cluster.job(self.pipeline_id)["generation"]
            pid = self._worker_pid()
            open_window, struck = now()
            os.kill(pid, signal.SIGKILL)
            back = lambda: self._job_running(after_generation=before)  # noqa: E731
        elif kind == "postgres":
            open_window, struck = now()
            self.postgres.restart()
            back = self._probe("api")
        elif kind == "kafka":
            self.broker.pause()
            try:
                time.sleep(self.pause_s)
            finally:
                self.broker.resume()
            open_window, struck = now()  # the output catching up shows the broker answers
        else:
            raise ValueError(f"no fault {kind!r}")
        probes: dict[str, Callable[[], object]] = {
            "component": back,
            "output": lambda: watcher.advanced_past(open_window - 1) is not None,
        }
        replica = None
        if validation is not None and validation.killed_port is not None:
            replica = victim
            probes["replica"] = lambda: self._ready(victim)
        held = self._until(probes)
        restart = held["replica"] - struck if "replica" in held else None
        by_survivor = validation.by_survivor if validation is not None else None
        if "component" not in held or "output" not in held:
            return Recovery(kind, None, at_s, None, replica, restart, by_survivor)
        if kind == "node":
            # Adopted, not recovered: the job runs on in the generation it had.
            after = self.cluster.job(self.pipeline_id)["generation"]
            assert after == generation, (
                f"the node's restart moved the job from generation {generation} to {after}: "
                "its worker was not adopted"
            )
        seen = watcher.advanced_past(open_window - 1)
        assert seen is not None
        component = held["component"]
        return Recovery(
            kind,
            max(component, seen) - struck,
            at_s,
            component - struck,
            replica,
            restart,
            by_survivor,
        )

    # probes

    def _probe(self, kind: str) -> Callable[[], bool]:
        if kind == "api":
            return lambda: self.cluster.job(self.pipeline_id)["state"] != ""
        if kind == "compiler":
            return _Validation(self.cluster, self.query)
        if kind == "controller":
            return lambda: self._ready("controller") and self._job_running()
        # The node, and the job Running: its worker outlived the node, which adopted it again.
        return lambda: self._ready(kind) and self._job_running()

    def _plan_on_every_compiler(self) -> None:
        """Validate the query on every compiler replica, as the traffic replicas share in a
        deployment has before one dies: a JVM's first plan of a query takes a second or more
        longer than the next (cold code: a replica started again by an earlier fault has
        planned nothing), which is no part of the failover. The api takes turns (round
        robin): two validations per replica reach each one it is connected to."""
        validation = _Validation(self.cluster, self.query)
        for _ in range(2 * len(self.cluster.replicas("compiler"))):
            self._wait_for("the query validated", validation, 60)

    def _ready(self, name: str) -> bool:
        """The service's /status says it is ready (started, and its checks hold)."""
        return bool(self.cluster.admin_status(name)["ready"])

    def _job_running(self, after_generation: int = -1) -> bool:
        job = self.cluster.job(self.pipeline_id)
        return job["state"] == "Running" and job["generation"] > after_generation

    def _worker_pid(self) -> int:
        def find() -> int | None:
            worker_id = self.cluster.job(self.pipeline_id)["worker_id"]
            for worker in self.cluster.admin_status("node")["workers"]:
                if worker["worker_id"] == worker_id:
                    return int(worker["pid"])
            return None

        pid = self._wait_for("the job's worker", find, 60)
        assert pid is not None
        return pid

    def _check_services(self) -> None:
        """Every service is running and says it is ready, and the job runs."""
        try:
            self.report.job_state = str(self.cluster.job(self.pipeline_id)["state"])
            self.report.services_back = all(
                p.poll() is None for p in self.cluster.processes.values()
            ) and all(self._ready(name) for name in self.cluster.launched)
        except _PROBE_ERRORS as err:
            self.report.job_state = f"unknown ({err})"

    # waiting

    def _supervise(self) -> None:
        """Start again any service that exited unasked (noted in the report)."""
        for name, process in list(self.cluster.processes.items()):
            if process.poll() is not None:
                self.report.unplanned_exits.append(f"{name} ({process.returncode})")
                self.say(f"{name} exited unasked with {process.returncode}; starting it again")
                self.cluster.processes.pop(name)
                self.cluster.start(name, *self.cluster.launched[name])

    def _until(self, probes: Mapping[str, Callable[[], object]]) -> dict[str, float]:
        """The monotonic time each of ``probes`` first held, polled side by side, each until it
        holds, for ``deadline_s`` at most (one that did not hold by then is left out)."""
        held: dict[str, float] = {}
        deadline = time.monotonic() + self.deadline_s
        while len(held) < len(probes) and time.monotonic() < deadline:
            self._supervise()
            for name, probe in probes.items():
                if name in held:
                    continue
                try:
                    if probe():
                        held[name] = time.monotonic()
                except _PROBE_ERRORS:
                    pass
            time.sleep(_POLL_S)
        return held

    def _wait_for(self, what: str, probe: Callable[[], T | None], timeout: float) -> T:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._supervise()
            try:
                if found := probe():
                    return found
            except _PROBE_ERRORS:
                pass
            time.sleep(_POLL_S)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class _Validation:
    """The compiler's probe: the api validates the pipeline's query through the compiler(s).
    Given the gRPC port of a compiler replica just killed, each successful answer also notes
    whether that port was still closed once the answer was in (``by_survivor``): a port that
    accepts no connection after the call accepted none during it, so another replica answered
    and the recovery is the api's failover, not the killed replica's restart."""

    def __init__(self, cluster: Cluster, query: str, killed_port: int | None = None) -> None:
        self.cluster, self.body, self.killed_port = cluster, {"query": query}, killed_port
        self.by_survivor: bool | None = None

    def __call__(self) -> bool:
        answer = self.cluster.call("POST", "/pipelines/validate_query", self.body)
        if answer["errors"]:
            return False
        if self.killed_port is not None:
            self.by_survivor = not _listening(self.killed_port)
        return True


def _listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
