"""``arroyo run --timings`` and ``arroyo validate --timings``: where a cold process's time goes.

Phases are marked on the main thread as the command reaches them, from the process's own start
(the kernel's record of it, so the interpreter's start and imports count too). Spark's own part
is read from its JVM: how many analyses planning made (each ``spark.sql``, ``spark.table`` or
DataFrame step analyses a plan) and how long Catalyst's rules ran, over analysis and
optimization alike. The breakdown goes to standard error, after the command's own output.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Analysis runs this rule once per plan it analyses (a batch of its own, applied once).
_ONCE_PER_ANALYSIS = "org.apache.spark.sql.catalyst.analysis.Analyzer$LookupFunctions"


def process_age_s() -> float:
    """Seconds since this process started (Linux's /proc); 0.0 where that is not known."""
    try:
        with open("/proc/self/stat") as f:
            # The command name, in parentheses, may hold spaces: fields count from its end.
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime_s = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))


@dataclass(frozen=True, slots=True)
class CatalystWork:
    """Catalyst's work in this JVM so far: plans analysed, and time in rules (seconds)."""

    analyses: int
    rules_s: float

    @staticmethod
    def read(spark: SparkSession) -> CatalystWork:
        executor = spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor  # type: ignore[union-attr]
        seconds = executor.getCurrentMetrics().time() / 1e9
        runs = 0
        for line in str(executor.dumpTimeSpent()).splitlines():
            if line.startswith(_ONCE_PER_ANALYSIS + " "):
                # Columns: rule, effective / total time (ns), effective / total runs.
                found = re.findall(r"\d+\s*/\s*(\d+)", line)
                runs = int(found[1]) if len(found) > 1 else 0
        return CatalystWork(runs, seconds)

    def __sub__(self, other: CatalystWork) -> CatalystWork:
        return CatalystWork(self.analyses - other.analyses, self.rules_s - other.rules_s)


@dataclass
class Timings:
    """Phases of one command, each the time since the previous mark, plus notes. Disabled, it
    records nothing and costs nothing, so commands mark their phases unconditionally."""

    enabled: bool
    started: float = field(default_factory=time.monotonic)
    _last: float = 0.0
    _phases: list[tuple[str, float, str]] = field(default_factory=list)
    _notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.enabled:
            # Everything before this object (interpreter start, imports) is its first phase.
            self.started -= process_age_s()
        self._last = self.started

    def mark(self, phase: str, detail: str = "", *, at: float | None = None) -> None:
        """End ``phase`` now (or at ``at``, a ``time.monotonic()`` taken earlier)."""
        if not self.enabled:
            return
        # A moment noted on another thread may precede the last mark: the phase is then empty.
        now = time.monotonic() if at is None else max(at, self._last)
        self._phases.append((phase, now - self._last, detail))
        self._last = now

    def note(self, text: str) -> None:
        if self.enabled:
            self._notes.append(text)

    def since_start(self, moment: float) -> float:
        return moment - self.started

    def report(self) -> str:
        width = max((len(name) for name, _, _ in self._phases), default=0)
        lines = ["timings (seconds):"]
        for name, seconds, detail in self._phases:
            note = f"  {detail}" if detail else ""
            lines.append(f"  {name:<{width}}  {seconds:6.2f}{note}")
        lines.append(f"  {'total':<{width}}  {self._last - self.started:6.2f}")
        lines.extend(f"  {text}" for text in self._notes)
        return "\n".join(lines)

    def print(self) -> None:
        if self.enabled:
            print(self.report(), file=sys.stderr, flush=True)
