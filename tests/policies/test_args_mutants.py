"""Policy argument validation (streams/policies/_args.py), where ``./dev mutate`` found
it unchecked: given arguments over the defaults, unknown keys and non-numbers refused
with the policy's name, the key and the value."""

from __future__ import annotations

import pytest

from streams.policies._args import take

DEFAULTS = {"a": 1.0, "b": 2.0}


def test_given_arguments_replace_their_defaults_and_the_rest_stay() -> None:
    assert take("p", {"b": 5}, DEFAULTS) == {"a": 1.0, "b": 5}
    assert take("p", {"a": 0.5, "b": 0.25}, DEFAULTS) == {"a": 0.5, "b": 0.25}
    out = take("p", None, DEFAULTS)
    assert out == DEFAULTS and out is not DEFAULTS  # a copy: the defaults stay as they are
    out["a"] = 9.0
    assert DEFAULTS["a"] == 1.0


def test_unknown_keys_are_named_sorted() -> None:
    with pytest.raises(ValueError, match=r"^policy 'p': unknown arguments \['c', 'd'\]$"):
        take("p", {"d": 1, "a": 1, "c": 2}, DEFAULTS)


@pytest.mark.parametrize(("value", "shown"), [(True, "True"), ("1", "'1'"), (None, "None")])
def test_a_value_that_is_not_a_number_is_refused(value: object, shown: str) -> None:
    with pytest.raises(ValueError, match=rf"^policy 'p': argument 'b' must be a number, "
                                         rf"got {shown}$"):
        take("p", {"a": 1, "b": value}, DEFAULTS)
