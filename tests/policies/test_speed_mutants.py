"""The speed term's factory (streams/policies/speed.py), where ./dev mutate found it unchecked:
its arguments reach the policy, and a bad one is refused naming the policy."""

from __future__ import annotations

import pytest

from streams.policies import speed


def test_the_scale_given_is_the_scale_used() -> None:
    assert speed.factory({"scale": 7.5}).scale == 7.5
    assert speed.factory(None).scale == speed.DEFAULTS["scale"]


def test_an_unknown_argument_is_refused_naming_the_policy() -> None:
    with pytest.raises(ValueError, match=r"policy 'speed': unknown arguments \['bogus'\]"):
        speed.factory({"bogus": 1.0})
