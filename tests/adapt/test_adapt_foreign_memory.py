"""Foreign GPU memory (held by processes of no task, as the node's per-process
accounting sees it) is kept out of placement even where the whole-GPU figure hides it."""

from __future__ import annotations

from adapt_builders import _ev, cell, kinds, node, run, task, tick, usage

from schemas.events import GpuTelemetry, TaskPlaced


def _telemetry(t: float, mem_mib: int, foreign_mib: int | None):  # type: ignore[no-untyped-def]
    return _ev(GpuTelemetry(node_id="n1", gpu_index=0, gpu_uuid="GPU-n1-0", gpu_util_pct=50.0,
                            mem_used_mib=mem_mib, temperature_c=50.0, power_w=200.0,
                            foreign_mem_mib=foreign_mib), t, "tel/n1")


def test_foreign_memory_hidden_under_a_light_task_is_never_booked():
    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0))
    assert kinds(run(c, task("a", share=500, t=1))) == ["TaskPlaced"]  # books 40 GiB
    # 'a' uses 8 GiB and a stranger 30 GiB: 38 GiB in use is within a's booking, so the
    # whole-GPU check sees nothing wrong; the node's per-process figure does.
    run(c, _telemetry(2, mem_mib=38 * 1024, foreign_mib=30 * 1024))
    assert c.nodes["n1"].extra["adapt"]["phantom"] == {"0": 375}  # 30 of 80 GiB
    assert kinds(run(c, task("c", share=100, t=3))) == ["TaskPlaced"]  # fits beside it
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("b", share=500, t=4)))


def test_without_the_node_figure_the_same_gpu_is_booked_full():
    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0))
    run(c, task("a", share=500, t=1))
    run(c, _telemetry(2, mem_mib=38 * 1024, foreign_mib=None))
    assert kinds(run(c, task("b", share=500, t=3))) == ["TaskPlaced"]


def test_a_stranger_leaving_frees_the_memory_again():
    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0))
    run(c, _telemetry(1, mem_mib=60 * 1024, foreign_mib=60 * 1024))
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("a", share=500, t=2)))
    run(c, _telemetry(3, mem_mib=0, foreign_mib=0))
    assert not c.nodes["n1"].extra["adapt"].get("phantom")
    assert "TaskPlaced" in kinds(run(c, tick(1, 4)))  # the queued task gets the GPU


def test_over_use_is_only_counted_by_default_and_its_memory_is_still_reserved():
    """``warn`` (the default) leaves the task alone; the over-use shows in the GPU's
    memory, which the next telemetry reserves, so nothing lands on it either."""
    c = cell()
    assert c.adapt.config.overuse_policy == "warn"
    run(c, node("n1", "A100", gpus=1, t=0), task("a", share=250, t=1))
    assert run(c, usage("a", "n1", 5, 50, mem_mib=40960)) == []  # booked 20 GiB
    assert c.adapt.meta["counters"]["overuse"] == 1
    assert c.tasks["a"].request.gpu_milli == 250
    run(c, _telemetry(6, mem_mib=40960, foreign_mib=0))
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("b", share=600, t=7)))


def test_what_a_node_agent_sends_keeps_placement_off_a_strangers_memory():
    """The agent's own event (per-process figures -> trigger -> ``GpuTelemetry``) drives
    the same reservation: the node and the core agree on the field end to end."""
    from agents.events import gpu_telemetry
    from agents.telemetry.base import GpuSample
    from agents.triggers import TriggerEngine

    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0), task("a", share=500, t=1))
    sample = GpuSample(0, 30.0, 38 * 1024.0, 81920.0, temperature_c=50.0, power_w=150.0,
                       power_limit_w=400.0, foreign_mem_mib=30 * 1024.0)
    (snapshot,) = TriggerEngine().observe(0.0, [sample])
    run(c, _ev(gpu_telemetry("n1", "GPU-n1-0", snapshot), 2, "tel/agent"))
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("b", share=500, t=3)))
