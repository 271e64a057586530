"""The fragmentation measure's cache (streams/policies/fragmentation.py), where
``./dev mutate`` found it unchecked: each state keeps one ``FragCache`` per task mix,
created on first use and returned again after, so refreshed rows are not recomputed."""

from __future__ import annotations

from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.fragmentation import TypicalTasks, frag_cache

ONE = TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 1000)], coverage=1.0)
HALF = TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 500)], coverage=1.0)


def test_a_state_keeps_one_cache_per_mix() -> None:
    state = ClusterState(capacity=2)
    state.add_node("a", 8000, 8192, 2, "T4")
    first = frag_cache(state, ONE)
    assert first.typical is ONE
    assert frag_cache(state, ONE) is first          # created once, then returned
    other = frag_cache(state, HALF)                 # another mix: its own cache
    assert other.typical is HALF and other is not first
    assert frag_cache(state, HALF) is other and frag_cache(state, ONE) is first


def test_rows_stay_right_as_the_cache_grows_one_node_at_a_time() -> None:
    # One typical task: 1 GPU of 1000 milli. A node whose GPU 0 has 500 milli taken
    # strands those 500 (F = 500); a node with only idle GPUs strands nothing (F = 0).
    state = ClusterState(capacity=1)
    state.add_node("n0", 8000, 8192, 2, "T4")
    cache = frag_cache(state, ONE)
    cache.refresh(state)
    for i in range(1, 6):
        state.add_node(f"n{i}", 8000, 8192, 2, "T4")
        if i % 2:
            state.allocate(TaskRequest(f"t{i}", 0, 0, 1, 500), i, (0,))
        cache.refresh(state)
        assert cache.frag(i + 1).tolist() == [500.0 if v % 2 else 0.0 for v in range(i + 1)]
