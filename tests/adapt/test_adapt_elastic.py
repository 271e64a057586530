"""Elastic resizing on hand-made usage sequences: exactly when sustained, never flapping."""

from __future__ import annotations

from adapt_builders import cell, kinds, node, run, task, tick, usage

from schemas.events import TaskResized


def _elastic_job(gpus: int = 1, node_gpus: int = 4, keep_slots: bool = True):
    """``keep_slots=False``: the original growth rule (any free GPU), so that a task can
    grow twice in a row; the slot rule itself is tested in test_adapt_no_fragment.py."""
    c = cell(elastic_keep_slots=keep_slots)
    run(c, node("n1", gpus=node_gpus, t=0), task("job", gpus=gpus, t=1, elastic=(1, 4)))
    return c


def test_it_scales_up_exactly_when_utilisation_stayed_high_for_the_window():
    c = _elastic_job()
    run(c, usage("job", "n1", 10, 95), usage("job", "n1", 25, 97))
    assert run(c, tick(1, 39)) == []  # high for 29 s of the 30 s window: not yet
    out = run(c, tick(2, 41))
    assert kinds(out) == ["TaskResized"]
    assert out[0].direction == "up" and len(out[0].gpus) == 2
    assert out[0].reason.code == "util_high"


def test_one_low_sample_inside_the_window_prevents_the_resize():
    c = _elastic_job()
    run(c, usage("job", "n1", 10, 95), usage("job", "n1", 20, 60), usage("job", "n1", 22, 95))
    assert run(c, tick(1, 45)) == []
    assert kinds(run(c, tick(2, 53))) == ["TaskResized"]  # high since 22 s: 31 s sustained


def test_no_second_resize_within_the_cooldown_and_no_flapping():
    c = _elastic_job(keep_slots=False)
    run(c, usage("job", "n1", 10, 95))
    assert kinds(run(c, tick(1, 41))) == ["TaskResized"]
    # still saturated, but the window restarted at the resize and the cooldown holds
    run(c, usage("job", "n1", 42, 99))
    assert run(c, tick(2, 80)) == []
    out = run(c, tick(3, 102))
    assert kinds(out) == ["TaskResized"] and len(out[0].gpus) == 3
    # utilisation that swings between the marks never resizes
    for i, u in enumerate([50, 92, 40, 95, 91, 60] * 4):
        run(c, usage("job", "n1", 110 + 10 * i, u))
    assert [p for p in run(c, tick(4, 400), tick(5, 500)) if isinstance(p, TaskResized)] == []


def test_it_scales_down_when_idle_only_while_others_wait():
    c = _elastic_job(gpus=2, node_gpus=2)
    run(c, usage("job", "n1", 5, 10, gpus=(0, 1)))
    assert run(c, tick(1, 60)) == []  # idle but nobody waits: keep the GPUs
    run(c, task("waiting", t=61))
    out = run(c, tick(2, 62))
    assert kinds(out) == ["TaskResized", "TaskPlaced"]
    assert out[0].direction == "down" and len(out[0].gpus) == 1
    assert out[1].task_id == "waiting"


def test_it_never_grows_past_max_or_without_a_free_gpu():
    c = _elastic_job(gpus=1, node_gpus=1)
    run(c, usage("job", "n1", 5, 99))
    assert run(c, tick(1, 100)) == []


def test_borrowed_gpus_are_given_back_when_others_wait_even_if_busy():
    c = _elastic_job(gpus=1, node_gpus=3, keep_slots=False)
    run(c, usage("job", "n1", 10, 95))
    assert kinds(run(c, tick(1, 41))) == ["TaskResized"]  # grew to 2 while nobody waited
    run(c, usage("job", "n1", 42, 99, gpus=(0, 1)))
    assert kinds(run(c, tick(2, 170))) == ["TaskResized"]  # and to 3
    run(c, usage("job", "n1", 171, 99, gpus=(0, 1, 2)), task("waiting", gpus=2, t=175))
    out = run(c, tick(3, 200))  # the first tick anyone waits, within the cooldown too
    assert kinds(out) == ["TaskResized", "TaskPlaced"]
    assert out[0].direction == "down" and out[0].reason.code == "reclaim"
    assert len(out[0].gpus) == 1  # both borrowed GPUs at once
    assert out[1].task_id == "waiting" and len(out[1].gpus) == 2
    run(c, usage("job", "n1", 300, 99))
    assert run(c, tick(5, 600)) == []  # back at its own size: busy is fine, never below


def test_growth_keeps_the_asked_number_of_idle_nodes_of_its_model():
    def grown(headroom: int, idle_a100: int) -> bool:
        c = cell(elastic_headroom_nodes=headroom)
        run(c, node("n1", gpus=4, t=0), task("job", gpus=1, t=1, elastic=(1, 4)))
        for k in range(idle_a100):
            run(c, node(f"a{k}", gpus=4, t=0.5))
        run(c, node("t4", model="T4", gpus=4, t=0.5))  # idle, but not the task's model
        run(c, usage("job", "n1", 10, 95))
        return kinds(run(c, tick(1, 41))) == ["TaskResized"]

    assert grown(0, 0)  # the original rule
    assert not grown(1, 0)  # the idle T4 node does not count
    assert grown(1, 1)
    assert not grown(2, 1)
    assert grown(2, 2)
