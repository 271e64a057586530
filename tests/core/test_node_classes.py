"""The scheduler's node classes: the compiled grouping against its oracle.

``_node_classes`` decides which nodes are scored once for all their class, so a node put
in the wrong class gets another node's score; the grouping must be exact (the numpy
version hashed the columns and fell back on a collision).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.request import TaskRequest
from streams.core.scheduler import _node_classes
from streams.core.state import ClusterState
from tests.oracle.node_classes import node_classes as oracle


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[ClusterState, np.ndarray]:
    """Nodes of few shapes (so classes are large), some with tasks on them, some down."""
    state = ClusterState(capacity=4, max_gpus=8)
    for i in range(draw(st.integers(1, 40))):
        gpus = draw(st.sampled_from([0, 2, 8]))
        state.add_node(f"n{i}", draw(st.sampled_from([8000, 16000])), 65536, gpus,
                       draw(st.sampled_from(["A100", "T4", None])) if gpus else None)
        if gpus and draw(st.booleans()):
            share = draw(st.sampled_from([250, 500, 1000]))
            state.allocate(TaskRequest(f"t{i}", 1000, 1024, 1, share), i,
                           (draw(st.integers(0, gpus - 1)),), task_id=f"t{i}")
        if draw(st.integers(0, 9)) == 0:
            state.set_health(i, False)
    order = draw(st.permutations(range(state.n)))
    size = draw(st.integers(1, state.n))
    return state, np.array(order[:size], dtype=np.intp)


@settings(max_examples=200, deadline=None)
@given(_clusters())
def test_the_core_groups_as_the_rule_says(case: tuple[ClusterState, np.ndarray]) -> None:
    state, idx = case
    reps, inverse = _node_classes(state, idx)
    assert (reps.tolist(), inverse.tolist()) == oracle(state, idx)


def test_a_slot_outside_the_state_is_refused() -> None:
    state = ClusterState(capacity=2)
    state.add_node("a", 8000, 65536, 2, "A100")
    with pytest.raises(ValueError, match="node slot 9 is outside the state's arrays"):
        _node_classes(state, np.array([0, 9], dtype=np.intp))
