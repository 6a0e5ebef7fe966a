"""One file per state; ``STATES`` is the registry the driver looks states up in."""

from __future__ import annotations

from arroyo.controller.states.base import State
from arroyo.controller.states.checkpoint_stopping import CheckpointStopping
from arroyo.controller.states.compiling import Compiling
from arroyo.controller.states.created import Created
from arroyo.controller.states.failed import Failed
from arroyo.controller.states.failing import Failing
from arroyo.controller.states.finished import Finished
from arroyo.controller.states.finishing import Finishing
from arroyo.controller.states.recovering import Recovering
from arroyo.controller.states.restarting import Restarting
from arroyo.controller.states.running import Running
from arroyo.controller.states.scheduling import Scheduling
from arroyo.controller.states.stopped import Stopped
from arroyo.controller.states.stopping import Stopping
from arroyo.store import JobState

STATES: dict[JobState, State] = {
    s.name: s
    for s in (
        Created(),
        Compiling(),
        Scheduling(),
        Running(),
        CheckpointStopping(),
        Stopping(),
        Stopped(),
        Restarting(),
        Recovering(),
        Finishing(),
        Finished(),
        Failing(),
        Failed(),
    )
}

__all__ = ["STATES", "State"]
