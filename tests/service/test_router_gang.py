"""The router sends a gang to a cell whose GPUs of its model together hold it (issue 30)."""

from __future__ import annotations

from streams.router import cell_for_task

SUMMARIES = {
    "small": {"nodes": 2, "queued": 0,
              "models": {"V100": {"gpus": 16, "free": 16, "max_per_node": 8}}},
    "big": {"nodes": 4, "queued": 0,
            "models": {"V100": {"gpus": 32, "free": 8, "max_per_node": 8}}},
}


def test_a_gang_goes_to_a_cell_that_can_hold_it_even_with_fewer_free_gpus():
    # 24 GPUs: more than any node has; only "big" has 24 V100s in all.
    assert cell_for_task("g", 24, ("V100",), ["big", "small"], SUMMARIES) == "big"
    # 16 fit both; the one with more free GPUs wins, as for one-node tasks.
    assert cell_for_task("h", 16, ("V100",), ["big", "small"], SUMMARIES) == "small"
