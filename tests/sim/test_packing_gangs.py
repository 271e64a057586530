"""Packing mode places a gang whole over several nodes, or drops it with nothing held."""

from __future__ import annotations

from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.sim.packing import run_packing
from streams.sim.traces import NodeSpec

V100 = "V100"


def _nodes(count: int) -> list[NodeSpec]:
    return [NodeSpec(f"rack00-node{i}", 96_000, 393_216, 8, V100) for i in range(count)]


def _gang(gpus: int = 16) -> TaskRequest:
    return TaskRequest("train", 4_000, 16_384, gpus, MILLI_PER_GPU)


def test_a_16_gpu_task_runs_whole_over_two_8_gpu_nodes() -> None:
    run = run_packing(_nodes(2), [_gang()], "bestfit", seed=42, tune=1.0,
                      record_decisions=True)
    assert (run.arrivals, run.placed) == (1, 1)
    assert run.decisions is not None
    members = run.decisions[0]["members"]
    assert [m["rank"] for m in members] == [0, 1]
    assert sorted(m["node"] for m in members) == ["rack00-node0", "rack00-node1"]
    assert all(m["gpus"] == list(range(8)) for m in members)
    assert run.decisions[0]["node"] == members[0]["node"]
    assert run.curve[-1].alloc_pct == 100.0  # all 16 GPUs allocated by the one gang


def test_a_gang_larger_than_what_is_idle_is_dropped_and_holds_nothing() -> None:
    # Two arrivals: the gang takes both nodes, then a second copy finds nothing idle.
    run = run_packing(_nodes(2), [_gang()], "bestfit", seed=42, tune=2.0,
                      record_decisions=True)
    assert (run.arrivals, run.placed) == (2, 1)
    assert run.decisions is not None
    assert run.decisions[1]["node"] is None and "members" not in run.decisions[1]


def test_a_gang_larger_than_the_cell_is_dropped() -> None:
    run = run_packing(_nodes(1), [_gang()], "bestfit", seed=42, tune=2.0,
                      record_decisions=True)
    assert (run.arrivals, run.placed) == (1, 0)
    assert run.curve[-1].alloc_pct == 0.0
