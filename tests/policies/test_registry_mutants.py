"""The policy registry (streams/policies/registry.py) and the built-in profiles
(streams/core/profile.py), where ``./dev mutate`` found them unchecked: an unknown
name lists the known ones, and a policy gets the run-time context it declares, never
over an argument it was given nor a context it does not declare."""

from __future__ import annotations

import pytest

from streams.core.profile import BUILTIN_PROFILES, get_profile
from streams.core.request import TaskRequest
from streams.policies import registry
from streams.policies.fragmentation import TypicalTasks

MIX = TypicalTasks.from_tasks([TaskRequest("w", 1000, 0, 1, 1000)], coverage=1.0)


def test_an_unknown_policy_names_every_registered_one_in_order() -> None:
    known = ", ".join(registry.REGISTRY)
    assert known.startswith("fit, random, ")
    with pytest.raises(ValueError, match=rf"^unknown policy 'nope' \(known: {known}\)$"):
        registry.build("nope", None, {})


def test_a_policy_gets_the_context_it_declares_unless_given() -> None:
    assert registry.build("fgd", None, {"typical": MIX}).typical is MIX  # type: ignore[attr-defined]
    assert registry.build("random", None, {"seed": 4}).seed == 4  # type: ignore[attr-defined]
    assert registry.build("random", {"seed": 3}, {"seed": 4}).seed == 3  # type: ignore[attr-defined]
    # bestfit declares no context: the seed and mix are not passed (it refuses unknown args).
    assert registry.build("bestfit", None, {"seed": 4, "typical": MIX}).name == "bestfit"
    with pytest.raises(ValueError, match="needs 'typical'"):
        registry.build("fgd", None, {"seed": 4})


def test_get_profile_returns_the_builtin_or_lists_them_sorted() -> None:
    assert get_profile("fgd") is BUILTIN_PROFILES["fgd"]
    names = ", ".join(sorted(BUILTIN_PROFILES))
    assert names.startswith("balanced, bestfit, ")
    with pytest.raises(ValueError, match=rf"^unknown profile 'nope' \(built-in: {names}\)$"):
        get_profile("nope")
