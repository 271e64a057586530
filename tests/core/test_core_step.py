"""Given events, when a task arrives or ends, then these decisions (core.step)."""

from __future__ import annotations

import pytest

from streams.core.decisions import Placement, Rejected, Released, Unschedulable
from streams.core.events import NodeAdded, NodeHealthChanged, TaskArrived, TaskEnded
from streams.core.profile import Profile
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.core.step import replay, step
from streams.profiles.compile import compile_profile


@pytest.fixture
def sched():
    return compile_profile(Profile("bf", {"bestfit": 1.0}))


def boot(sched, *nodes: NodeAdded) -> ClusterState:
    state = ClusterState()
    for ev in nodes:
        state, out = step(state, ev, sched)
        assert out == []
    return state


def test_a_task_lands_on_the_fuller_node_with_reason_and_deterministic_id(sched):
    state = boot(
        sched,
        NodeAdded("e1", "big", 64000, 256000, 8, "V100M32"),
        NodeAdded("e2", "small", 16000, 64000, 1, "T4"),
    )
    state, out = step(state, TaskArrived("e3", TaskRequest("t1", 4000, 1000, 1, 500)), sched)
    (p,) = out
    assert isinstance(p, Placement)
    assert (p.decision_id, p.cause_id, p.node, p.gpus, p.share_milli) == ("e3/0", "e3", "small",
                                                                        (0,), 500)
    assert p.reason is not None and p.reason.weights == {"bestfit": 1.0}
    assert [c.node for c in p.reason.candidates] == ["small", "big"]
    assert set(p.reason.candidates[0].terms) == {"bestfit"}
    assert state.gpu_free[state.node_index["small"], 0] == 500


def test_a_task_that_fits_nowhere_is_unschedulable_with_counts_per_constraint(sched):
    # Pinned to one node (nodes=1): without the pin, 2 GPUs on a cell of 1-GPU nodes
    # is a gang (tests/core/test_gang.py).
    state = boot(sched, NodeAdded("e1", "n", 8000, 1000, 1, "T4"))
    _, out = step(state, TaskArrived("e2", TaskRequest("t", 4000, 100, 2, 1000, nodes=1)),
                  sched)
    (u,) = out
    assert isinstance(u, Unschedulable)
    assert u.verdict.code == "unschedulable" and u.verdict.policy == "fit"
    assert "insufficient idle gpus: 1 of 1 nodes" in u.verdict.reasons


def test_a_finished_task_releases_its_share(sched):
    state = boot(sched, NodeAdded("e1", "n", 8000, 1000, 2, "T4"))
    state, _ = step(state, TaskArrived("e2", TaskRequest("t", 1000, 100, 1, 300)), sched)
    state, out = step(state, TaskEnded("e3", "t"), sched)
    assert out == [Released("e3/0", "e3", "t", "n", (0,))]
    assert state.gpu_free[0, :2].tolist() == [1000, 1000]
    assert state.cpu_free[0] == 8000


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(NodeAdded("x", "n", 1, 1, 0), id="a duplicate node is rejected"),
        pytest.param(TaskEnded("x", "ghost"), id="ending an unknown task is rejected"),
        pytest.param(NodeHealthChanged("x", "ghost", False), id="health of unknown node"),
        pytest.param(NodeAdded("x", "m", 1, 1, 2, None), id="GPUs without a model"),
    ],
)
def test_invalid_inputs_are_rejected_and_change_nothing(sched, event):
    state = boot(sched, NodeAdded("e1", "n", 8000, 1000, 1, "T4"))
    before = state.copy()
    state, out = step(state, event, sched)
    assert len(out) == 1 and isinstance(out[0], Rejected)
    assert state.n == before.n and (state.cpu_free[:1] == before.cpu_free[:1]).all()


def test_an_unhealthy_node_gets_no_new_tasks(sched):
    state = boot(sched, NodeAdded("e1", "a", 8000, 1000, 1, "T4"),
                 NodeAdded("e2", "b", 8000, 1000, 1, "T4"))
    state, _ = step(state, NodeHealthChanged("e3", "a", False), sched)
    _, out = step(state, TaskArrived("e4", TaskRequest("t", 100, 1, 1, 100)), sched)
    assert out[0].node == "b"


def test_replaying_the_log_rebuilds_the_same_state_and_decisions(sched):
    events = [
        NodeAdded("e1", "a", 32000, 64000, 4, "T4"),
        NodeAdded("e2", "b", 32000, 64000, 2, "V100M16"),
        TaskArrived("e3", TaskRequest("t1", 4000, 1000, 1, 250)),
        TaskArrived("e4", TaskRequest("t2", 4000, 1000, 2, 1000)),
        TaskEnded("e5", "t1"),
        TaskArrived("e6", TaskRequest("t3", 2000, 1000, 1, 700, ("T4",))),
    ]
    state, log = ClusterState(), []
    for ev in events:
        state, out = step(state, ev, sched)
        log.append(ev)
        log.extend(out)
    rebuilt = replay(ClusterState(), [f for f in log if not isinstance(f, TaskEnded)])
    assert (rebuilt.gpu_free[: rebuilt.n] == state.gpu_free[: state.n]).all()
    assert (rebuilt.cpu_free[: rebuilt.n] == state.cpu_free[: state.n]).all()
    # Re-deciding from the same inputs reproduces every decision.
    again, log2 = ClusterState(), []
    for ev in events:
        again, out = step(again, ev, sched)
        log2.extend(out)
    assert log2 == [f for f in log if not isinstance(f, type(events[0]) | TaskArrived
                                                     | TaskEnded)]
