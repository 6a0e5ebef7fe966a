"""The controller's transition table, walked: every state has a file and a row, every state is
reachable from Created, and from every state the job can come to rest."""

from __future__ import annotations

from arroyo.controller.states import STATES
from arroyo.controller.transitions import TRANSITIONS, allowed
from arroyo.store import JobState


def reachable(start: JobState) -> set[JobState]:
    seen, todo = {start}, [start]
    while todo:
        for following in TRANSITIONS[todo.pop()]:
            if following not in seen:
                seen.add(following)
                todo.append(following)
    return seen


def test_every_state_has_a_row_and_an_implementation() -> None:
    assert set(TRANSITIONS) == set(JobState)
    assert set(STATES) == set(JobState)
    for state, implementation in STATES.items():
        assert implementation.name is state


def test_every_state_is_reachable_from_created() -> None:
    assert reachable(JobState.CREATED) == set(JobState)


def test_every_state_can_come_to_rest() -> None:
    resting = {s for s in JobState if s.terminal}
    assert resting == {JobState.STOPPED, JobState.FINISHED, JobState.FAILED}
    for state in JobState:
        assert reachable(state) & resting, f"{state} can never stop, finish or fail"


def test_failures_recover_or_fail_and_terminal_states_only_start_again() -> None:
    for state in (JobState.SCHEDULING, JobState.RUNNING):
        assert allowed(state, JobState.RECOVERING)
        assert allowed(state, JobState.FAILING)
    for state in JobState:
        if state.terminal:
            assert TRANSITIONS[state] == frozenset({JobState.COMPILING})
    assert not allowed(JobState.FAILED, JobState.RUNNING)
