"""Clusters and profiles shared by the scheduler's mutant tests (tests/core).

Why here: ``test_scheduler_cache_mutants`` and ``test_scheduler_place_mutants`` each
carried their own copy of these, and their expected scores are worked out from them
(bestfit's formula on these nodes), so a change to one copy alone would make the two
files disagree about the same cluster.
"""

from __future__ import annotations

from streams.core.profile import Profile
from streams.core.state import ClusterState

BESTFIT = Profile("bf", {"bestfit": 1.0})
"""bestfit alone, weight 1: a node's total is its bestfit score."""


def cpu_nodes(*cpus: int) -> ClusterState:
    """GPU-less nodes named n0, n1, ... with these free CPUs (milli) and 64 GiB."""
    state = ClusterState(capacity=2)
    for i, cpu in enumerate(cpus):
        state.add_node(f"n{i}", cpu, 65536, 0, None)
    return state
