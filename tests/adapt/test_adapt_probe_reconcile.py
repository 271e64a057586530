"""Probing with learnt profiles, and booked-vs-observed GPU memory."""

from __future__ import annotations

from adapt_builders import cell, kinds, node, run, task, telemetry, tick, usage

from schemas.events import TaskPlaced


def test_a_featureless_task_is_probed_classified_then_placed_and_its_kind_is_learnt():
    c = cell(probe_s=30.0)
    out = run(c, node("n1", gpus=4, t=0), task("p1", gpus=2, t=1, profile=None))
    assert kinds(out) == ["TaskProbe"] and out[0].gpus[0].share_milli == 500
    run(c, usage("p1", "n1", 5, 92), usage("p1", "n1", 20, 95))
    assert run(c, tick(1, 20)) == []  # the probe window has not ended
    out = run(c, tick(2, 32))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "probe_classified"
    assert out[0].reason.message.startswith("compute/") and len(out[0].to_gpus) == 2
    # the same tenant and command skips the probe
    assert kinds(run(c, task("p2", gpus=1, t=40, profile=None))) == ["TaskPlaced"]


def test_memory_in_use_that_no_booking_explains_is_never_booked():
    c = cell()
    run(c, node("n1", "A100", gpus=1, t=0))
    run(c, telemetry("n1", 0, 1, mem_mib=61440))  # 60 GiB used by a stranger on an idle GPU
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("half", share=500, t=2)))
    placed = run(c, task("small", share=200, t=3))
    assert kinds(placed) == ["TaskPlaced"]


def test_a_task_over_its_booking_is_rebooked_so_nothing_double_books_its_memory():
    c = cell(overuse_policy="rebook")
    run(c, node("n1", "A100", gpus=1, t=0), task("a", share=250, t=1))
    run(c, usage("a", "n1", 5, 50, mem_mib=40960))  # booked ~20 GiB, uses 40 GiB
    assert c.tasks["a"].request.gpu_milli == 500
    assert c.adapt.meta["counters"]["rebooked"] == 1
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("b", share=600, t=6)))
