"""Feasibility at its boundaries, in ``Fit`` and in the core's plain-Python twin.

``./dev mutate`` found that no test read the reasons ``Fit.explain`` gives (the
words and counts an ``Unschedulable`` verdict shows), nor a node whose free CPU or
memory equals the request exactly, nor ``Fit.score``. The scheduler scores a few
nodes without numpy (``_score_feasible_py``, the same feasibility as ``Fit.filter``);
each case here is checked on both paths, so the two cannot drift apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.fit import Fit, allowed_models, factory, gpu_fit
from streams.core.policy import NodesView, Options
from streams.core.profile import Profile
from streams.core.request import TaskRequest
from streams.core.scheduler import _score_feasible_py
from streams.core.state import ClusterState
from streams.profiles.compile import compile_profile


def cluster() -> ClusterState:
    """exact: CPU and memory equal to the request; sick: unhealthy; cpu/mem: one short;
    t4: the wrong model; busy: one GPU partly taken; full: both GPUs taken."""
    state = ClusterState(capacity=2)
    for name, model in (("exact", "A100"), ("sick", "A100"), ("cpu", "A100"),
                        ("mem", "A100"), ("t4", "T4"), ("busy", "A100"), ("full", "A100")):
        state.add_node(name, 4000, 8192, 2, model)
    state.set_health(state.node_index["sick"], False)
    state.allocate(TaskRequest("c", 1, 0), state.node_index["cpu"], ())
    state.allocate(TaskRequest("m", 0, 1), state.node_index["mem"], ())
    state.allocate(TaskRequest("b", 0, 0, 1, 600), state.node_index["busy"], (0,))
    state.allocate(TaskRequest("f", 0, 0, 2, 1000), state.node_index["full"], (0, 1))
    return state


def feasible(state: ClusterState, task: TaskRequest) -> tuple[set[str], set[str]]:
    """The feasible nodes by ``Fit.filter`` and by the scheduler's plain-Python path."""
    idx = np.arange(state.n)
    by_fit = Fit().filter(task, NodesView(state, idx))
    sched = compile_profile(Profile("p", {"bestfit": 1.0}))
    pos, _, _, _ = _score_feasible_py(state, sched, task, idx)
    names = state.node_names
    return {names[i] for i in np.flatnonzero(by_fit)}, {names[int(i)] for i in pos}


@pytest.mark.parametrize(("task", "want"), [
    (TaskRequest("cpu-only", 4000, 8192), {"exact", "t4", "busy", "full"}),
    (TaskRequest("whole", 4000, 8192, 2, 1000), {"exact", "t4"}),
    (TaskRequest("a100", 4000, 8192, 2, 1000, ("A100",)), {"exact"}),
    (TaskRequest("share", 4000, 8192, 1, 400, ("A100",)), {"exact", "busy"}),
    (TaskRequest("big-share", 4000, 8192, 1, 500, ("A100", "H100")), {"exact", "busy"}),
])
def test_both_feasibility_paths_take_a_node_whose_free_resources_equal_the_request(task, want):
    by_fit, by_core = feasible(cluster(), task)
    assert by_fit == want
    assert by_core == want


def test_an_unschedulable_verdict_counts_the_nodes_each_constraint_rules_out():
    state = cluster()
    view = NodesView(state, np.arange(state.n))
    verdict = Fit().explain(TaskRequest("t", 4000, 8192, 2, 1000, ("A100",)), view)
    assert verdict.code == "unschedulable" and verdict.policy == "fit"
    assert verdict.reasons == (
        "unhealthy: 1 of 7 nodes",
        "insufficient cpu: 1 of 7 nodes",
        "insufficient memory: 1 of 7 nodes",
        "gpu model not allowed: 1 of 7 nodes",
        "insufficient idle gpus: 2 of 7 nodes",
    )
    share = Fit().explain(TaskRequest("s", 0, 0, 1, 500), view).reasons
    assert share == ("unhealthy: 1 of 7 nodes", "insufficient cpu: 0 of 7 nodes",
                     "insufficient memory: 0 of 7 nodes", "gpu model not allowed: 0 of 7 nodes",
                     "insufficient gpu share: 1 of 7 nodes")
    cpu_only = Fit().explain(TaskRequest("c", 0, 0), view).reasons
    assert cpu_only == ("unhealthy: 1 of 7 nodes", "insufficient cpu: 0 of 7 nodes",
                        "insufficient memory: 0 of 7 nodes")


def test_a_task_without_gpus_or_models_passes_the_gpu_checks_on_every_node():
    state = cluster()
    view = NodesView(state, np.arange(state.n))
    cpu_only = gpu_fit(TaskRequest("cpu", 1, 1), view)
    assert cpu_only.dtype == np.bool_ and cpu_only.all() and len(cpu_only) == state.n
    assert allowed_models(TaskRequest("any", 1, 1, 1, 1000), view).tolist() == [True] * state.n
    share = TaskRequest("s", 0, 0, 1, 500)
    assert gpu_fit(share, view).tolist() == [True] * (state.n - 1) + [False]


def test_fit_scores_every_option_zero_and_takes_no_arguments():
    state = cluster()
    view = NodesView(state, np.arange(state.n))
    task = TaskRequest("share", 0, 0, 1, 300)
    options = Options.for_task(task, view)
    assert len(options) > state.n  # one option per GPU with room
    assert np.array_equal(Fit().score(task, view, options), np.zeros(len(options)))
    with pytest.raises(ValueError, match="takes no arguments"):
        factory({"x": 1})
