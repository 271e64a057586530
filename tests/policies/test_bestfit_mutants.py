"""BestFit's scalar path and its factory, where ``./dev mutate`` found nothing checked.

``score_rows`` pairs each option's free CPU with its idle milli-GPU; ``OptionRows``
holds one entry per option in every list, so lists of different lengths are a bug
in whoever built them, and the policy must refuse them rather than score the
shorter list and drop options silently. A bad argument's error names the policy
(the profile may hold several).
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import OptionRows
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.bestfit import BestFit, factory


def rows(cpu_free: list[int], idle_milli: list[int]) -> OptionRows:
    state = ClusterState(capacity=1)
    state.add_node("n", 128000, 1024, 8, "A100")
    n = len(cpu_free)
    return OptionRows(state, np.zeros(1, np.intp), [0] * n, cpu_free, idle_milli, [0] * n,
                      None, list(range(n)))


def test_score_rows_follow_the_documented_formula():
    # s = trunc(100 * (1 - (0.5 * (C - c) / 128000 + 0.5 * (T - G) / 8000)))
    task = TaskRequest("t", 32000, 0, 2, 1000)
    got = factory().score_rows(task, rows([96000, 32000], [6000, 2000]))
    # (96000-32000)/128000 = 0.5, (6000-2000)/8000 = 0.5 -> 100 * (1 - 0.5) = 50
    # (32000-32000)/128000 = 0,   (2000-2000)/8000 = 0   -> 100
    assert got == [50.0, 100.0]


def test_score_rows_refuse_lists_of_different_lengths():
    task = TaskRequest("t", 1000, 0, 1, 1000)
    with pytest.raises(ValueError):
        BestFit(128000.0, 8000.0).score_rows(task, rows([8000, 8000], [1000]))


def test_a_bad_argument_is_reported_with_the_policy_name():
    with pytest.raises(ValueError, match="policy 'bestfit': unknown arguments"):
        factory({"nope": 1})
