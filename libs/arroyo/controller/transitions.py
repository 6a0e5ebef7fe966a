"""Which state may follow which: the one table every transition is checked against."""

from __future__ import annotations

from arroyo.store import JobState as S

TRANSITIONS: dict[S, frozenset[S]] = {
    S.CREATED: frozenset({S.COMPILING, S.STOPPED}),
    S.COMPILING: frozenset({S.SCHEDULING, S.STOPPED, S.FAILING}),
    S.SCHEDULING: frozenset({S.RUNNING, S.STOPPING, S.RECOVERING, S.FAILING}),
    S.RUNNING: frozenset(
        {S.CHECKPOINT_STOPPING, S.STOPPING, S.RESTARTING, S.RECOVERING, S.FINISHING, S.FAILING}
    ),
    S.CHECKPOINT_STOPPING: frozenset({S.STOPPING, S.FINISHING, S.RECOVERING}),
    S.STOPPING: frozenset({S.STOPPED}),
    S.STOPPED: frozenset({S.COMPILING}),
    S.RESTARTING: frozenset({S.COMPILING, S.STOPPING}),
    S.RECOVERING: frozenset({S.SCHEDULING, S.STOPPED, S.FAILING}),
    S.FINISHING: frozenset({S.FINISHED, S.RECOVERING}),
    S.FINISHED: frozenset({S.COMPILING}),
    S.FAILING: frozenset({S.FAILED}),
    S.FAILED: frozenset({S.COMPILING}),
}


def allowed(current: S, following: S) -> bool:
    return following in TRANSITIONS[current]
