"""Adaptation that does not fragment: hand-made scenarios for each rule that keeps free
slots whole (elastic growth and reclaim, hot-spot destinations, in-place probes) and for
consolidation that does not flap."""

from __future__ import annotations

from adapt_builders import cell, config, finished, kinds, node, run, run_envs, task, tick, usage

from schemas.events import TaskMigrating, TaskPlaced, TaskResized
from streams.core.adapt.elastic import keeps_slots


def test_only_an_odd_free_gpu_keeps_every_pair_quad_and_whole_node():
    assert [keeps_slots(f) for f in range(9)] == [False, True, False, True, False, True,
                                                   False, True, False]


def _grown(keep_slots: bool, gpus: int, node_gpus: int = 4) -> int:
    c = cell(elastic_keep_slots=keep_slots)
    run(c, node("n1", gpus=node_gpus, t=0), task("job", gpus=gpus, t=1, elastic=(1, 4)))
    run(c, usage("job", "n1", 10, 95, gpus=c.tasks["job"].gpus))
    run(c, tick(1, 41))
    return len(c.tasks["job"].gpus)


def test_growth_never_takes_a_gpu_of_a_free_pair():
    assert _grown(True, gpus=2) == 2  # 2 free: an arriving 2-GPU job wants both
    assert _grown(False, gpus=2) == 3  # the original rule took one


def test_growth_takes_the_odd_one_out_and_then_stops():
    c = cell()
    run(c, node("n1", gpus=4, t=0), task("job", gpus=1, t=1, elastic=(1, 4)))
    run(c, usage("job", "n1", 10, 95))
    out = run(c, tick(1, 41))  # 3 free: taking one leaves a pair
    assert kinds(out) == ["TaskResized"] and out[0].direction == "up" and len(out[0].gpus) == 2
    run(c, usage("job", "n1", 50, 99, gpus=(0, 1)))
    assert run(c, tick(2, 200), tick(3, 400)) == []  # 2 free: a pair, kept for arrivals


def _borrowing(waiting_gpus: int):
    """job asked for 1 GPU of n1 (4 GPUs) and grew to 2; filler takes 1 more, so n1 has 1
    free GPU, 1 borrowed; then a task of ``waiting_gpus`` arrives and waits."""
    c = cell()
    run(c, node("n1", gpus=4, t=0), task("job", gpus=1, t=1, elastic=(1, 4)))
    run(c, usage("job", "n1", 10, 95))
    assert kinds(run(c, tick(1, 41))) == ["TaskResized"]
    run(c, task("filler", gpus=1, t=42, duration_s=36000))
    assert c.tasks["filler"].node == "n1"
    out = run(c, task("waiting", gpus=waiting_gpus, t=50))
    assert "TaskPlaced" not in kinds(out)
    run(c, usage("job", "n1", 60, 99, gpus=c.tasks["job"].gpus))
    return c


def test_borrowed_gpus_are_reclaimed_at_once_for_a_queued_task_that_fits_with_them():
    c = _borrowing(2)  # 1 free + 1 borrowed = 2
    out = run(c, tick(2, 70))  # within the cooldown: a reclaim does not wait for it
    assert kinds(out) == ["TaskResized", "TaskPlaced"]
    assert out[0].reason.code == "reclaim" and len(out[0].gpus) == 1
    assert out[1].task_id == "waiting" and len(out[1].gpus) == 2


def test_no_reclaim_for_a_queued_task_the_gpus_cannot_help_and_no_shrink_regrow_cycle():
    c = _borrowing(3)  # 1 free + 1 borrowed = 2 < 3: giving it back starts nothing
    out = run(c, *(tick(k, 60.0 + 100 * k) for k in range(2, 8)))
    assert [p for p in out if isinstance(p, TaskResized)] == []
    assert len(c.tasks["job"].gpus) == 2 and c.tasks["waiting"].status == "queued"


def test_no_growth_while_a_task_waits_even_for_an_odd_gpu():
    c = cell()
    run(c, node("n1", gpus=4, t=0), task("big", gpus=2, t=0.5, duration_s=36000),
        task("job", gpus=1, t=1, elastic=(1, 4)))
    run(c, task("waiting", gpus=4, t=2))  # needs a whole node: waits
    run(c, usage("job", "n1", 10, 99, gpus=c.tasks["job"].gpus))
    assert run(c, tick(1, 41), tick(2, 200)) == []


def _hot(onto_idle: bool, busy_node: bool):
    """n1 (2 GPUs) runs a and a2 (long), both 99% busy: a hot spot. n2 and n3 (1 GPU each)
    idle; with ``busy_node``, n4 (2 GPUs) runs b on one GPU and has one free."""
    c = cell(hot_spot_onto_idle=onto_idle)
    run(c, node("n1", gpus=2, t=0), task("a", t=1, duration_s=36000),
        task("a2", t=1.5, duration_s=72000))
    if busy_node:
        run(c, node("n4", gpus=2, t=1.8), task("b", t=1.9, duration_s=36000))
        assert c.tasks["b"].node == "n4"
    run(c, node("n2", gpus=1, t=2), node("n3", gpus=1, t=2))
    run(c, usage("a", "n1", 4, 99.0, gpus=c.tasks["a"].gpus),
        usage("a2", "n1", 4, 99.0, gpus=c.tasks["a2"].gpus))
    return c


def test_a_hot_spot_keeps_idle_nodes_whole_when_asked():
    assert kinds(run(_hot(True, False), tick(1, 10))) == ["TaskMigrating"]  # original
    assert run(_hot(False, False), tick(1, 10)) == []  # only idle nodes: stay
    out = run(_hot(False, True), tick(1, 10))
    assert kinds(out) == ["TaskMigrating"] and out[0].to_node_id == "n4"


def test_a_multi_gpu_task_is_probed_in_place_and_never_moved():
    c = cell(probe_s=30.0, probe_in_place_gpus=2)
    out = run(c, node("n1", gpus=4, t=0), task("p1", gpus=2, t=1, profile=None))
    assert kinds(out) == ["TaskProbe"] and len(out[0].gpus) == 2
    assert all(g.share_milli == 1000 for g in out[0].gpus)
    run(c, usage("p1", "n1", 5, 92, gpus=c.tasks["p1"].gpus))
    assert run(c, tick(1, 32)) == []  # classified where it runs
    assert "probe" not in c.tasks["p1"].spec["adapt"] and c.tasks["p1"].spec["adapt"]["kind"]
    out = run(c, task("p2", t=40, profile=None, argv=("infer.py",)))  # one GPU: as before
    assert kinds(out) == ["TaskProbe"] and out[0].gpus[0].share_milli == 500


def _consolidated_then_hot(onto_idle: bool) -> list[TaskMigrating]:
    """c1 and c2 (1 GPU, long) run alone on n1 and n2 (2 GPUs each); n3 and n4 (1 GPU)
    idle: 2 of 6 GPUs booked. Consolidation puts both on one node; both run 99% busy, so
    it is a hot spot. Returns the moves of the ten ticks after the consolidation."""
    c = cell(consolidate_pct=50.0, hot_spot_onto_idle=onto_idle)
    envs = run_envs(c, node("n1", gpus=2, t=0), task("a", t=1, duration_s=600),
                    task("c1", t=2, duration_s=72000), node("n2", gpus=2, t=2.5),
                    task("b", t=3, duration_s=600), task("c2", t=4, duration_s=72000))
    assert (c.tasks["c1"].node, c.tasks["c2"].node) == ("n1", "n2")
    ids = {e.payload.task_id: e for e in envs if isinstance(e.payload, TaskPlaced)}
    run(c, finished("a", ids["a"].payload.node_id, ids["a"].event_id, 600),
        finished("b", ids["b"].payload.node_id, ids["b"].event_id, 601))
    run(c, node("n3", gpus=1, t=602), node("n4", gpus=1, t=602))
    out = run(c, tick(1, 610))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "consolidate"
    assert c.tasks["c1"].node == c.tasks["c2"].node
    moves = []
    for k in range(2, 12):
        for t in ("c1", "c2"):
            run(c, usage(t, c.tasks[t].node, 610.0 + 60 * k, 99.0, gpus=c.tasks[t].gpus))
        moves += [p for p in run(c, tick(k, 611.0 + 60 * k)) if isinstance(p, TaskMigrating)]
    assert c.adapt.meta["counters"]["hot_spots"] > 0
    return moves


def test_consolidation_and_hot_spot_moves_do_not_flap():
    codes = [m.reason.code for m in _consolidated_then_hot(True)]
    assert codes[:2] == ["hot_spot", "consolidate"]  # the original rule: back and forth
    assert _consolidated_then_hot(False) == []  # the hot spot stays: no idle destination


def _moved_to(energy_weight: float | None) -> str:
    """c (1 GPU, light) alone on A100 node n0 (1 GPU); A100 node n1 and T4 node n2 (4 GPUs
    each) run a 3-GPU task each: consolidation empties n0 onto n1 or n2, whichever the
    hour's placement prefers (the energy objective: the T4's TFLOPS per watt)."""
    from streams.adapter import apply
    from streams.core.cell import Cell
    from streams.core.objectives import WeightRule, WeightSchedule
    from streams.core.profile import Profile
    from streams.profiles.compile import compile_profile
    from streams.profiles.service import service_scheduler, typical_tasks

    objectives = None
    if energy_weight is not None:
        prof = Profile("offpeak", {"hetsched": 1.0, "energy": energy_weight})
        sched = compile_profile(prof, {"typical": typical_tasks(), "seed": 0})
        objectives = WeightSchedule((WeightRule("all-day", sched),))
    c = Cell("cell-0", service_scheduler("hetsched"), objectives=objectives,
             adapt=config(consolidate_pct=90.0))  # 7 of 9 GPUs booked
    for e in (node("n0", gpus=1, t=0), task("c", t=1, duration_s=72000),
              node("n1", gpus=4, t=2), task("a", gpus=3, t=3, duration_s=72000,
                                             models=("A100",)),
              node("n2", model="T4", gpus=4, t=4),
              task("b", gpus=3, t=5, duration_s=72000, models=("T4",))):
        apply(c, e)
    assert (c.tasks["c"].node, c.tasks["a"].node, c.tasks["b"].node) == ("n0", "n1", "n2")
    run(c, usage("c", "n0", 6, 10.0, gpus=c.tasks["c"].gpus))
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "consolidate"
    return out[0].to_node_id


def test_consolidation_destinations_follow_the_hours_objectives():
    assert _moved_to(None) == "n1"  # the cell's own profile (packing) picks the A100
    assert _moved_to(5.0) == "n2"  # with the energy objective in force: the efficient T4
