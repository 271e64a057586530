"""FGD's factory errors, where ``./dev mutate`` found nothing checked.

A profile may combine several policies, so a bad argument's error must name FGD
and say what is wrong: the missing task mix, or which arguments are unknown.
"""

from __future__ import annotations

import pytest

from streams.core.request import TaskRequest
from streams.policies.fgd import factory
from streams.policies.fragmentation import TypicalTasks

MIX = TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 1000)], coverage=1.0)


def test_fgd_without_a_task_mix_says_it_needs_typical():
    with pytest.raises(ValueError, match="policy 'fgd' needs 'typical'"):
        factory({})


def test_fgd_names_its_unknown_arguments_sorted():
    with pytest.raises(ValueError, match=r"policy 'fgd': unknown arguments \['a', 'b'\]"):
        factory({"typical": MIX, "b": 1, "a": 2})
