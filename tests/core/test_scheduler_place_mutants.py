"""``place`` and the scheduler's grouping of identical nodes, held to their documented rules.

``./dev mutate streams/core/scheduler.py`` found behaviours of the module that no fast
unit test held, because the decision came out right anyway: the reason's candidates
(``Reason.candidates`` promises the top ``top_k`` nodes, best total first, then the
lowest tie-break rank) were only ever checked on clusters of at most three nodes, so
picking the worst three or any three went unseen; and ``_node_classes`` ("nodes of
``idx`` with identical scoring state: representatives, class of each"; now the compiled
core's, held to its oracle by ``test_node_classes.py``) was reached only through the
cached-vs-uncached property test, whose decisions are the same whether nodes are
grouped or not. Every expected value here is worked out from those rules and from bestfit's formula
(``streams/policies/bestfit.py``: s = trunc(100 * (1 - (0.5 * (C - c) / 128000
+ 0.5 * (T - G) / 8000)))).
"""

from __future__ import annotations

import numpy as np
import pytest
from core_builders import BESTFIT, cpu_nodes

from streams.core.request import TaskRequest
from streams.core.scheduler import _node_classes, place
from streams.core.state import ClusterState
from streams.profiles.compile import compile_profile

# A 1-core task on GPU-less nodes: bestfit = trunc(100 * (1 - 0.5 * (C - 1000) / 128000)).
# C = 129000 -> 50, 33000 -> 87 (87.5), 65000 -> 75, 9000 -> 96 (96.875), 17000 -> 93 (93.75)
FIVE = (129000, 33000, 65000, 9000, 17000)
TASK = TaskRequest("t", 1000, 1024)


def test_the_reason_names_the_three_best_nodes_best_first_whatever_their_order():
    state = cpu_nodes(*FIVE)
    res = place(state, compile_profile(BESTFIT), TASK)
    assert state.node_names[res.node] == "n3"
    assert res.reason is not None and res.reason.feasible_nodes == 5
    assert [(c.node, c.total, c.terms["bestfit"], c.rank) for c in res.reason.candidates] == [
        ("n3", 96.0, 96.0, 3), ("n4", 93.0, 93.0, 4), ("n1", 87.0, 87.0, 1)]


@pytest.mark.parametrize("top_k, names", [(1, ["n3"]), (2, ["n3", "n4"]),
                                          (4, ["n3", "n4", "n1", "n2"]),
                                          (5, ["n3", "n4", "n1", "n2", "n0"]),
                                          (9, ["n3", "n4", "n1", "n2", "n0"])])
def test_top_k_sets_how_many_candidates_the_reason_keeps(top_k, names):
    state = cpu_nodes(*FIVE)
    res = place(state, compile_profile(BESTFIT, top_k=top_k), TASK)
    assert res.reason is not None
    assert [c.node for c in res.reason.candidates] == names


def test_infeasible_nodes_are_neither_counted_nor_candidates():
    # n1 and n3 have 500 milli-CPU, less than the task's 1000: infeasible.
    state = cpu_nodes(129000, 500, 65000, 500, 17000)
    res = place(state, compile_profile(BESTFIT), TASK)
    assert res.reason is not None and res.reason.feasible_nodes == 3
    assert [(c.node, c.total) for c in res.reason.candidates] == [
        ("n4", 93.0), ("n2", 75.0), ("n0", 50.0)]
    res = place(state, compile_profile(BESTFIT, top_k=2), TASK)
    assert res.reason is not None
    assert [c.node for c in res.reason.candidates] == ["n4", "n2"]


# ---- _node_classes ------------------------------------------------------------------


def grouped_cluster(max_gpus: int = 4, gpus: int = 4) -> ClusterState:
    """Five empty nodes of one model: a, b and d with 8 cores, c and e with 16."""
    state = ClusterState(capacity=2, max_gpus=max_gpus)
    for name, cpu in (("a", 8000), ("b", 8000), ("c", 16000), ("d", 8000), ("e", 16000)):
        state.add_node(name, cpu, 65536, gpus, "A100")
    return state


def check_classes(state: ClusterState, idx: np.ndarray, expected: list[list[str]]) -> None:
    reps, cls = _node_classes(state, idx)
    assert cls.shape == idx.shape
    assert len(reps) == len(expected)
    groups: dict[int, list[str]] = {}
    for node, c in zip(idx.tolist(), cls.tolist(), strict=True):
        groups.setdefault(c, []).append(state.node_names[node])
        # each node's representative has the node's state
        rep = int(reps[c])
        assert state.cpu_free[rep] == state.cpu_free[node]
        assert (state.gpu_free[rep] == state.gpu_free[node]).all()
    assert sorted(groups.values()) == sorted(expected)


def test_nodes_in_the_same_state_share_one_class():
    state = grouped_cluster()
    check_classes(state, np.arange(state.n), [["a", "b", "d"], ["c", "e"]])


def test_a_task_on_one_node_moves_it_to_a_class_of_its_own():
    state = grouped_cluster()
    state.allocate(TaskRequest("x", 1000, 0, 1, 500), state.node_index["b"], (2,))
    check_classes(state, np.arange(state.n), [["a", "d"], ["b"], ["c", "e"]])
    # a subset of the nodes is grouped the same way
    idx = np.array([state.node_index[n] for n in ("e", "b", "a", "c")])
    check_classes(state, idx, [["a"], ["b"], ["e", "c"]])


def test_nodes_with_many_gpus_are_grouped_too():
    # 32 GPU slots: 5 + 32 + 33 = 70 columns (the numpy version's hash had 64 multipliers)
    state = grouped_cluster(max_gpus=32, gpus=32)
    check_classes(state, np.arange(state.n), [["a", "b", "d"], ["c", "e"]])
