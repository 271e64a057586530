"""The core's scoring pass refuses arrays and slots that do not fit the state it is told.

A caller bug (a slot past the state's nodes, arrays shorter than ``n``) must be a
``ValueError`` naming the number, not a read past the end: cargo-mutants found both
bounds of ``native/src/place.rs`` unheld by the tests that go through the scheduler,
which never passes such arrays.
"""

from __future__ import annotations

import hetsched_core
import numpy as np
import pytest

BESTFIT = [(1.0, ("bestfit", (64000.0, 8000.0)))]


def _score(n: int, rows: int, idx: list[int]) -> tuple:
    """Score a one-GPU task over ``rows`` idle 2-GPU nodes, telling the core ``n``."""
    ones = np.ones(rows, np.int64)
    return hetsched_core.score_feasible(
        n, ones, ones * 8000, ones * 65536, np.ones(rows, np.bool_), ones * 0,
        np.full((rows, 2), 1000, np.int64), np.array(idx, np.int64),
        (1000, 1024, 1, 1000, False, None), BESTFIT, False, 3)


def test_arrays_as_long_as_n_are_scored() -> None:
    at, gpu, total, scores = _score(3, 3, [0, 1, 2])
    assert at.tolist() == [0, 1, 2] and gpu is None and len(total) == 3 == len(scores[0])


def test_n_beyond_the_arrays_is_refused() -> None:
    with pytest.raises(ValueError, match="n = 4 but the state's arrays hold 3 node slots"):
        _score(4, 3, [0])


@pytest.mark.parametrize("slot", [3, 7, -1])
def test_a_slot_outside_the_first_n_is_refused(slot: int) -> None:
    with pytest.raises(ValueError, match=f"node slot {slot} is outside the state's 3 nodes"):
        _score(3, 5, [0, slot])
