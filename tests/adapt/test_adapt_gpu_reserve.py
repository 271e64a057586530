"""An idle GPU's own reserve (driver, firmware) is not a stranger: whole-GPU tasks still
get idle GPUs that show it in use, while a real stranger's memory stays out of placement.

Found in the short chaos run (session 6): its telemetry reports 1 GiB in use on idle
A100s, as NVML's ``used`` does on real ones (~0.9 GiB); each such sample reserved
13 milli of the GPU, so no idle GPU stayed whole and every task asking for whole GPUs
was still queued when the load stopped, beside idle GPUs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from adapt_builders import at, cell, kinds, node, run, task, telemetry, tick

from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.reconcile import driver_reserve_mib, unaccounted_mib

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

IDLE_A100_V1_MIB = 912 * 1000 * 1000 // (1 << 20)
"""What NVML's v1 memory info reports in use on an idle 80 GB A100 (912 MB)."""


def _all_gpus(node_id: str, gpus: int, t: float, mem_mib: int) -> list:  # type: ignore[type-arg]
    return [telemetry(node_id, g, t, mem_mib=mem_mib) for g in range(gpus)]


def test_idle_gpus_showing_the_driver_reserve_still_take_a_whole_gpu_task():
    c = cell()
    run(c, node("n1", "A100", gpus=4, t=0), *_all_gpus("n1", 4, 1, IDLE_A100_V1_MIB))
    assert not c.nodes["n1"].extra["adapt"].get("phantom")
    assert kinds(run(c, task("two", gpus=2, share=1000, t=2))) == ["TaskPlaced"]
    assert kinds(run(c, task("one", gpus=1, share=1000, t=3))) == ["TaskPlaced"]


def test_the_chaos_loads_telemetry_leaves_every_idle_gpu_whole():
    """bench/chaos_load.py's samples (1 GiB in use on any GPU, idle or not), as in the run."""
    import random

    from chaos_load import telemetry_event

    c = cell()
    run(c, node("n1", "A100", gpus=4, t=0))
    rng = random.Random(1)
    for g in range(4):
        env = telemetry_event("n1", g, rng)
        run(c, env.model_copy(update={"cell": "cell-0", "occurred_at": at(1)}))
    assert not c.nodes["n1"].extra["adapt"].get("phantom")
    placed = run(c, task("a", gpus=2, share=1000, t=2), task("b", gpus=2, share=1000, t=2))
    assert kinds(placed) == ["TaskPlaced", "TaskPlaced"]


def test_a_stranger_above_the_reserve_is_still_kept_out_of_placement():
    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0), telemetry("n1", 0, 1, mem_mib=4096))
    assert c.nodes["n1"].extra["adapt"]["phantom"] == {"0": 50}  # all 4 GiB, not 4 less 1.6
    assert "TaskPlaced" not in kinds(run(c, task("whole", share=1000, t=2)))
    run(c, telemetry("n1", 0, 3, mem_mib=IDLE_A100_V1_MIB))  # the stranger left
    assert not c.nodes["n1"].extra["adapt"].get("phantom")
    assert kinds(run(c, tick(1, 4))) == ["TaskPlaced"]  # the queued task gets the GPU


def test_zero_percent_keeps_the_original_rule():
    c = cell(gpu_reserved_pct=0.0)
    run(c, node("n1", "A100", gpus=1, t=0), telemetry("n1", 0, 1, mem_mib=IDLE_A100_V1_MIB))
    assert c.nodes["n1"].extra["adapt"]["phantom"] == {"0": 11}
    assert "TaskPlaced" not in kinds(run(c, task("whole", share=1000, t=2)))


def test_the_reserve_is_a_share_of_the_gpus_memory_and_read_from_the_environment():
    assert driver_reserve_mib(81920, 2.0) == 1638.4
    assert driver_reserve_mib(81920, 0.0) == 0.0
    assert unaccounted_mib(1024, 0, 0.1, 1638.4) == 0.0
    assert unaccounted_mib(4096, 0, 0.1, 1638.4) == 4096
    assert unaccounted_mib(1024, 0, 0.1) == 1024  # no reserve given: as before
    assert AdaptConfig().gpu_reserved_pct == 2.0
    assert AdaptConfig.from_env({"HETSCHED_GPU_RESERVED_PCT": "0"}).gpu_reserved_pct == 0.0
