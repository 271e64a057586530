"""A reason's top candidates: the compiled selection against its oracle, and the rule.

The rule exists because numpy's ``argpartition``, which chose them before engine
version 2, picks different nodes among tied totals on CPUs with and without AVX-512 or
AVX2: a log recorded on one machine then did not replay EQUAL on another.
"""

from __future__ import annotations

import hetsched_core
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle.top_k import top_k as oracle

# Few distinct values, so ties (the case the rule is for) are everywhere.
_TOTALS = st.sampled_from([-np.inf, np.inf, np.nan, -1.5, 0.0, 2.0, 2.0, 7.25, 100.0])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_TOTALS, st.integers(0, 6)), max_size=60), st.integers(0, 8))
def test_the_core_picks_what_the_rule_says(nodes: list[tuple[float, int]], k: int) -> None:
    total = np.array([t for t, _ in nodes], dtype=np.float64)
    rank = np.array([r for _, r in nodes], dtype=np.int64)
    assert hetsched_core.top_k(total, rank, k) == oracle(total.tolist(), rank.tolist(), k)


def test_ties_go_to_the_lowest_rank_then_the_lowest_slot() -> None:
    total = np.array([5.0, 9.0, 9.0, 9.0, 9.0, 1.0])
    rank = np.array([0, 4, 2, 2, 1, 0], dtype=np.int64)
    assert hetsched_core.top_k(total, rank, 3) == [4, 2, 3]
    assert hetsched_core.top_k(total, rank, 6) == [4, 2, 3, 1, 0, 5]


def test_infeasible_and_undefined_totals_are_never_candidates() -> None:
    total = np.array([-np.inf, np.nan, np.inf, 3.0])
    assert hetsched_core.top_k(total, np.zeros(4, dtype=np.int64), 3) == [3]
    assert hetsched_core.top_k(total, np.zeros(4, dtype=np.int64), 0) == []


def test_a_strided_array_is_read_as_its_values() -> None:
    total = np.array([1.0, 0.0, 3.0, 0.0, 2.0, 0.0])[::2]
    rank = np.arange(6, dtype=np.int64)[::2]
    assert hetsched_core.top_k(total, rank, 2) == [1, 2]


def test_totals_and_ranks_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="3 totals but 2 ranks"):
        hetsched_core.top_k(np.zeros(3), np.zeros(2, dtype=np.int64), 1)


def test_the_choice_does_not_depend_on_how_many_nodes_follow() -> None:
    """The reason this is in the core: the same leading nodes, the same candidates, for
    any length of batch (argpartition's choice among ties changes with both)."""
    for n in (4, 130, 300, 5000):
        total = np.full(n, 2.0)
        total[:3] = [1.0, 2.0, 2.0]
        assert hetsched_core.top_k(total, np.zeros(n, dtype=np.int64), 3) == [1, 2, 3]
