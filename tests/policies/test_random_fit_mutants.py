"""Random's score keys (streams/policies/random_fit.py), where ``./dev mutate`` found
only the chosen node checked.

The rule: a node's key dominates (a uniform permutation of the feasible nodes), a GPU
key orders options within a node; scores are whole numbers (keys), so a node's options
lie in one band of width 256 and the bands of the nodes are 0, 1, ..., n - 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.random_fit import factory


@pytest.mark.parametrize("arrivals", range(8))
def test_a_node_key_dominates_and_every_score_is_a_whole_key(arrivals):
    state = ClusterState(capacity=4)
    for v in range(4):
        state.add_node(f"n{v}", 8000, 1 << 20, 3, "T4")
    state.arrivals = arrivals
    task = TaskRequest("t", 1000, 0, 1, 300)
    view = NodesView(state, np.arange(4))
    options = Options.for_task(task, view)
    scores = factory({"seed": 5}).score(task, view, options)
    assert scores.dtype == np.float64 and len(scores) == 12
    assert all(s >= 0 and s == int(s) for s in scores.tolist())
    band = {}
    for node, s in zip(options.node.tolist(), scores.tolist(), strict=True):
        band.setdefault(node, set()).add(int(s) // 256)
    assert all(len(b) == 1 for b in band.values())  # one band per node
    assert sorted(b.pop() for b in band.values()) == [0, 1, 2, 3]
    assert len(set(scores.tolist())) == 12  # no two options tie


def test_the_same_seed_and_arrival_count_give_the_same_keys():
    """Seeded from ``seed`` and the arrival count: a replay makes the same decisions."""
    state = ClusterState(capacity=4)
    for v in range(4):
        state.add_node(f"n{v}", 8000, 1 << 20, 3, "T4")
    state.arrivals = 3
    task = TaskRequest("t", 1000, 0, 1, 300)
    view = NodesView(state, np.arange(4))
    options = Options.for_task(task, view)
    first = factory({"seed": 5}).score(task, view, options).tolist()
    assert factory({"seed": 5}).score(task, view, options).tolist() == first


def test_a_bad_argument_is_reported_with_the_policy_name():
    with pytest.raises(ValueError, match="policy 'random': argument 'seed'"):
        factory({"seed": True})
