"""bench/tick_cost.py on a small workload, so the figures of BENCHMARKS.md stay reproducible."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_tick_bench_builds_a_cell_of_every_round_and_times_its_ticks() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from tick_cost import tick_cost

    seen, unfinished, per_tick = tick_cost(rounds=2, nodes=20, tasks=150, ticks=2)
    assert seen == 300  # each round's tasks under their own names
    assert 0 < unfinished < seen  # finished tasks stay in the cell, running ones too
    assert per_tick > 0
