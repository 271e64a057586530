"""The policy contract's helpers (streams/policies/base.py), where ``./dev mutate`` found
them unchecked; expected values follow from each helper's docstring."""

from __future__ import annotations

import math

import numpy as np

from streams.policies.base import trunc


def test_trunc_is_numpys_for_every_float() -> None:
    for value in (2.7, -2.7, -0.3, 0.0, -0.0, math.inf, -math.inf, math.nan, 99.99999):
        got, want = trunc(value), float(np.trunc(value))
        assert (math.isnan(got) and math.isnan(want)) or (
            got == want and math.copysign(1, got) == math.copysign(1, want))
