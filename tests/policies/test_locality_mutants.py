"""Locality's argument checks and score, where ``./dev mutate`` found nothing checked.

Rule (streams/policies/locality.py): the term is -weight_per_s x transfer seconds
from the input's node, capped at cap_s; the input's own node costs 0; a task whose
input is on a node the cell does not know scores 0 everywhere. Arguments:
input_mib, weight_per_s >= 0 and cap_s > 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.policy import NodesView, Options
from streams.core.request import TaskRequest
from streams.core.state import ClusterState
from streams.policies.locality import Locality, factory

BAD = "policy 'locality': input_mib, weight_per_s >= 0 and cap_s > 0"


def test_zero_input_and_weight_and_any_positive_cap_are_accepted():
    pol = Locality(0.0, 0.0, 0.5)
    assert (pol.input_mib, pol.weight_per_s, pol.cap_s) == (0.0, 0.0, 0.5)


@pytest.mark.parametrize("args", [(-1.0, 1.0, 1.0), (1.0, -1.0, 1.0), (1.0, 1.0, 0.0),
                                  (0.0, 0.0, 0.0)])
def test_negative_sizes_or_weights_and_a_cap_of_zero_are_rejected(args):
    with pytest.raises(ValueError, match=BAD):
        Locality(*args)


def test_a_bad_argument_is_reported_with_the_policy_name():
    with pytest.raises(ValueError, match="policy 'locality': unknown arguments"):
        factory({"nope": 1})


def scores(pol: Locality, input_node: str) -> list[float]:
    state = ClusterState(capacity=3)
    for name in ("a", "b", "c"):
        state.add_node(name, 8000, 1 << 20, 0, None)
    task = TaskRequest("t", 1000, 0, input_node=input_node)
    view = NodesView(state, np.arange(3))
    return pol.score(task, view, Options.for_task(task, view)).tolist()


def test_the_input_node_costs_nothing_and_others_the_capped_weighted_transfer():
    # any transfer of 10 GiB takes far more than a millisecond: capped at cap_s
    pol = factory({"cap_s": 0.001, "weight_per_s": 2.0})
    assert scores(pol, "b") == [-0.002, 0.0, -0.002]


def test_an_input_on_a_node_the_cell_does_not_know_scores_zero_everywhere():
    assert scores(factory(), "elsewhere") == [0.0, 0.0, 0.0]
