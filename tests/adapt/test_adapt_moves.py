"""Defragmentation, hot-spot and consolidation moves on hand-made clusters with known answers.

Each scenario is small enough to work out by hand: which tasks must move, where
to, and whether the migration cost gate lets them.
"""

from __future__ import annotations

from adapt_builders import cell, finished, kinds, node, run, run_envs, task, tick, usage

from schemas.events import TaskMigrating, TaskPlaced


def _fragmented(c, big1_s: float, frac_mem: int = 4096):
    """n1 (2 GPUs) runs big1 on both; f1 and f2 (half a GPU each) share one GPU of n2
    (2 GPUs), so n2 has one free whole GPU; n3 (1 GPU) joins empty. big2 wants 2 GPUs:
    it fits nowhere, and only moving f1 and f2 to n3 lets it start (on n2)."""
    run(c, node("n1", gpus=2, t=0), task("big1", gpus=2, t=1, duration_s=big1_s))
    run(c, node("n2", gpus=2, t=2),
        task("f1", share=500, t=3, duration_s=36000, memory_mib=frac_mem),
        task("f2", share=500, t=4, duration_s=36000, memory_mib=frac_mem))
    assert c.tasks["big1"].node == "n1"
    assert c.tasks["f1"].node == c.tasks["f2"].node == "n2"
    assert c.tasks["f1"].gpus == c.tasks["f2"].gpus  # packed on one GPU
    run(c, node("n3", gpus=1, t=5))
    assert not any(isinstance(p, TaskPlaced) for p in run(c, task("big2", gpus=2, t=6)))


def test_defragmentation_moves_the_fractional_tasks_and_the_waiting_task_starts():
    c = cell(defrag=True)
    _fragmented(c, big1_s=3600)
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating", "TaskMigrating", "TaskPlaced"]
    moved = [p for p in out if isinstance(p, TaskMigrating)]
    assert sorted(p.task_id for p in moved) == ["f1", "f2"]
    assert {(p.from_node_id, p.to_node_id, p.reason.code) for p in moved} == {
        ("n2", "n3", "defragment")}
    placed = out[-1]
    assert placed.task_id == "big2" and placed.node_id == "n2"
    assert c.adapt.meta["counters"]["defrags"] == 1
    assert run(c, tick(2, 20)) == []  # nothing left to do: no further moves


def test_defragmentation_is_refused_when_the_wait_saved_does_not_pay_for_the_moves():
    # big1 ends in about a minute: 2 GPUs x ~55 s saved < 1.5 x (2 moves of ~114 s x 0.5 GPU)
    c = cell(defrag=True)
    _fragmented(c, big1_s=60, frac_mem=100_000)
    assert run(c, tick(1, 10)) == []
    assert c.adapt.meta["counters"]["defrag_refused"] >= 1
    assert c.tasks["f1"].node == c.tasks["f2"].node == "n2"


def test_defragmentation_is_off_by_default():
    c = cell()
    _fragmented(c, big1_s=3600)
    assert run(c, tick(1, 10)) == []


def _hot(duration_s: float, idle_node: bool = True):
    """n1 (2 GPUs) runs a and a2 (twice as long), both 99% busy; n2 and n3 (1 GPU each)
    idle, or n2 runs b and only n3 idles (the last idle node is kept for whole-node work).
    The original destination rule (idle nodes allowed); the default keeps idle nodes whole
    (test_adapt_no_fragment.py)."""
    c = cell(hot_spot_onto_idle=True)
    run(c, node("n1", gpus=2, t=0), task("a", t=1, duration_s=duration_s),
        task("a2", t=1.5, duration_s=2 * duration_s))
    assert c.tasks["a2"].node == "n1"
    run(c, node("n2", gpus=1, t=2), node("n3", gpus=1, t=2))
    if not idle_node:
        run(c, task("b", share=300, t=3, duration_s=36000))
        assert c.tasks["b"].node == "n2"
    run(c, usage("a", "n1", 4, 99.0, gpus=c.tasks["a"].gpus),
        usage("a2", "n1", 4, 99.0, gpus=c.tasks["a2"].gpus))
    return c


def test_a_hot_spot_moves_its_long_task_to_the_idle_node():
    c = _hot(36000)
    out = run(c, tick(1, 10))
    assert kinds(out) == ["TaskMigrating"]
    m = out[0]
    assert (m.task_id, m.from_node_id, m.reason.code) == ("a2", "n1", "hot_spot")
    assert m.to_node_id in ("n2", "n3")
    assert m.reason.metrics["benefit_s"] > 1.5 * m.reason.metrics["cost_s"]


def test_a_hot_spot_with_a_short_task_stays_put():
    c = _hot(120)  # a2: 10% faster for 4 minutes saves 24 s; a move costs 30 s and more
    assert run(c, tick(1, 10)) == []
    assert c.adapt.meta["counters"]["migrations_refused"] == 1


def test_a_task_alone_on_a_busy_node_is_no_hot_spot():
    c = cell(hot_spot_onto_idle=True)  # idle destinations allowed: still no move
    run(c, node("n1", gpus=1, t=0), task("a", t=1, duration_s=36000), node("n2", gpus=1, t=2),
        node("n3", gpus=1, t=2))
    run(c, usage("a", "n1", 4, 99.0))
    assert run(c, tick(1, 10)) == []  # moving it would only make n2 the same


def test_no_hot_spot_move_onto_the_last_idle_node():
    c = _hot(36000, idle_node=False)
    assert run(c, tick(1, 10)) == []


def _two_half_empty(c):
    """n1 and n2 (4 GPUs each) each end up running one 1-GPU task (c1, c2): 25% load."""
    envs = run_envs(c, node("n1", gpus=4, t=0), node("n2", gpus=4, t=0),
                    task("a", gpus=3, t=1, duration_s=600), task("b", gpus=3, t=2,
                                                                  duration_s=600))
    assert {c.tasks["a"].node, c.tasks["b"].node} == {"n1", "n2"}
    run(c, task("c1", t=3, duration_s=36000), task("c2", t=4, duration_s=36000))
    assert {c.tasks["c1"].node, c.tasks["c2"].node} == {"n1", "n2"}
    ids = {e.payload.task_id: e for e in envs if isinstance(e.payload, TaskPlaced)}
    run(c, finished("a", ids["a"].payload.node_id, ids["a"].event_id, 600),
        finished("b", ids["b"].payload.node_id, ids["b"].event_id, 601))


def test_off_peak_consolidation_empties_one_of_two_lightly_loaded_nodes():
    c = cell(consolidate_pct=50.0)
    _two_half_empty(c)
    out = run(c, tick(1, 610))
    assert kinds(out) == ["TaskMigrating"] and out[0].reason.code == "consolidate"
    assert c.tasks["c1"].node == c.tasks["c2"].node
    assert sum(1 for v in c.on_node.values() if v) == 1
    assert run(c, tick(2, 1300)) == []  # one busy node left: nothing to consolidate


def test_no_consolidation_above_the_load_threshold_or_when_off():
    c = cell(consolidate_pct=20.0)  # 25% load is not off-peak for this threshold
    _two_half_empty(c)
    assert run(c, tick(1, 610)) == []
    c = cell()
    _two_half_empty(c)
    assert run(c, tick(1, 610)) == []


def _t4_and_a100(c, c2_util: float | None):
    """c2 (1 GPU) runs alone on a T4 node; c1 (2 GPUs, A100 only) on an A100 node: 3 of 8
    GPUs booked. Emptying the T4 node saves its idle draw, 150 W + 4 x 20% x 70 W = 206 W;
    c2 on an A100 draws 80% x (400 - 70) W = 264 W more per busy GPU."""
    run(c, node("n2", model="T4", gpus=4, t=0), task("c2", t=1, duration_s=36000))
    run(c, node("n1", model="A100", gpus=4, t=2),
        task("c1", gpus=2, t=3, duration_s=36000, models=("A100",)))
    assert (c.tasks["c1"].node, c.tasks["c2"].node) == ("n1", "n2")
    if c2_util is not None:
        run(c, usage("c2", "n2", 4, c2_util, gpus=c.tasks["c2"].gpus))


def test_consolidation_is_refused_when_the_destination_burns_more_than_the_node_saves():
    c = cell(consolidate_pct=50.0)
    _t4_and_a100(c, c2_util=100.0)  # 264 W more > 206 W saved
    assert run(c, tick(1, 60)) == []
    assert c.adapt.meta["counters"]["consolidations_refused_energy"] == 1
    assert c.tasks["c2"].node == "n2"


def test_consolidation_moves_a_light_task_onto_the_hungrier_gpus():
    c = cell(consolidate_pct=50.0)
    _t4_and_a100(c, c2_util=10.0)  # 26 W more < 206 W saved
    out = run(c, tick(1, 60))
    assert kinds(out) == ["TaskMigrating"] and out[0].to_node_id == "n1"
    assert not c.on_node.get("n2")
