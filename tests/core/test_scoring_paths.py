"""Each run of this package's tests goes through the scoring path it names (conftest.py)."""

from __future__ import annotations

import pytest

from streams.core import scheduler
from streams.core.profile import get_profile
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.profiles.compile import compile_profile


def test_the_path_named_is_the_one_that_scores(scoring_path: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    core = scheduler.score_feasible
    monkeypatch.setattr(scheduler, "score_feasible",
                        lambda *args: calls.append(1) or core(*args))
    state = ClusterState()
    for i in range(4):
        state.add_node(f"n{i}", 32000, 65536, 4, "A100")
    sched = compile_profile(get_profile("bestfit"), {})
    assert sched.native
    found = scheduler.place(state, sched, TaskRequest("t", 1000, 1024, 1, 500))
    assert found.node >= 0
    assert bool(calls) == (scoring_path == "core")
