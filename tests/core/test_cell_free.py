"""A cell frees a finished task's resources as ``step`` of its ``TaskEnded`` does.

``Cell.end`` and ``Cell.requeue`` call ``streams.core.cell._free`` instead of
``step(state, TaskEnded)`` whose decisions they dropped (replay speed, issue 9):
the state after it must be the same, array for array, for running tasks and for
tasks that hold nothing.
"""

from __future__ import annotations

import random

import numpy as np

from streams.core.cell import _free
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.profile import Profile
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.core.step import step
from streams.profiles.compile import compile_profile


def _same(a: ClusterState, b: ClusterState) -> None:
    for name, value in vars(a).items():
        if name in ("cache", "catalog", "topology"):
            continue
        other = vars(b)[name]
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and np.array_equal(value, other), name
        else:
            assert value == other, name


def test_free_changes_the_state_as_step_of_task_ended_does() -> None:
    sched = compile_profile(Profile("bf", {"bestfit": 1.0}))
    rng = random.Random(4)
    by_step, by_free = ClusterState(), ClusterState()
    for i in range(6):
        node = NodeAdded(f"n{i}", f"node-{i}", 32000, 131072, 8 if i % 3 else 0,
                         "A100" if i % 3 else None)
        by_step, _ = step(by_step, node, sched)
        by_free, _ = step(by_free, node, sched)
    running: list[str] = []
    for k in range(600):
        if running and rng.random() < 0.45:
            task = running.pop(rng.randrange(len(running))) if rng.random() < 0.9 else "nope"
            by_step, _ = step(by_step, TaskEnded(f"e{k}", task), sched)
            _free(by_free, task)
        else:
            req = TaskRequest(f"t{k}", rng.choice([0, 1000, 4000]), 1024,
                              rng.choice([0, 1, 1, 2]), rng.choice([250, 500, 1000]))
            arrived = TaskArrived(f"a{k}", req)
            by_step, out = step(by_step, arrived, sched)
            by_free, again = step(by_free, arrived, sched)
            assert out == again
            if out and type(out[0]).__name__ == "Placement":
                running.append(req.task)
        _same(by_step, by_free)
    assert running  # some tasks still run, and many were freed on the way
