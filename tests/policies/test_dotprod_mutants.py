"""DotProd's scores against its documented formula (streams/policies/dotprod.py).

s = trunc(100 * (1 - ((C/128000)*(c/128000) + (T/8000)*(G/8000)) / 2)); the
existing test only checked which node wins, which many wrong formulas also pick.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.dotprod import factory


def test_dotprod_scores_follow_the_formula():
    state = ClusterState(capacity=2)
    state.add_node("half", 64000, 1 << 20, 4, "A100")   # C/128000 = 0.5, T/8000 = 0.5
    state.add_node("full", 128000, 1 << 20, 8, "A100")  # C/128000 = 1,   T/8000 = 1
    task = TaskRequest("t", 32000, 0, 2, 1000)          # c/128000 = 0.25, G/8000 = 0.25
    view = NodesView(state, np.arange(2))
    got = factory().score(task, view, Options.for_task(task, view))
    # half: (0.125 + 0.125) / 2 = 0.125 -> trunc(87.5) = 87; full: 0.25 -> 75
    assert got.tolist() == [87.0, 75.0]


def test_a_bad_argument_is_reported_with_the_policy_name():
    with pytest.raises(ValueError, match="policy 'dotprod': argument 'cpu_norm_milli'"):
        factory({"cpu_norm_milli": "x"})
