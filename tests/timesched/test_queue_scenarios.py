"""Hand-made scenarios with known answers: fair share, aging, backfill, preemption, workflows."""

from __future__ import annotations

from streams.core.cell import Preempted
from streams.core.decisions import Placement
from streams.core.queue import QueueConfig
from tests.timesched.helpers import LOCALITY, cell, end, running, submit


def test_fair_share_converges_to_the_tenant_weights():
    c = cell(nodes=2, gpus=6, config=QueueConfig(tenant_weights={"a": 2.0, "b": 1.0}))
    for k in range(12):  # fill the cluster with a third tenant's work
        submit(c, f"x{k}", tenant="x", expected_s=100.0)
    for k in range(60):
        submit(c, f"a{k}", t=1.0, tenant="a", expected_s=100.0)
        submit(c, f"b{k}", t=1.0, tenant="b", expected_s=100.0)
    t = 10.0
    for k in range(12):  # capacity frees up one GPU at a time
        end(c, f"x{k}", t)
        t += 1.0
    held = {ten: sum(1 for r in c.tasks.values() if r.status == "running"
                     and r.meta.tenant == ten) for ten in "ab"}
    assert held == {"a": 8, "b": 4}


def test_aging_lets_a_low_priority_task_start_within_its_bound():
    cfg = QueueConfig(starvation_s=600.0, aging_interval_s=60.0, aging_step=1)
    c = cell(nodes=1, gpus=1, config=cfg)
    submit(c, "busy", expected_s=60.0)
    submit(c, "low", t=1.0, priority=0)
    t, k = 2.0, 0
    while "low" not in running(c):  # a stream of urgent work keeps arriving
        submit(c, f"hi{k}", t=t, priority=400)
        current = next(iter(running(c)))
        t += 60.0
        end(c, current, t)
        k += 1
        assert t < 2000.0, "the low-priority task starved"
    assert c.tasks["low"].started_s - 1.0 <= cfg.starvation_s + 60.0


def test_backfill_never_delays_the_head_task():
    c = cell(nodes=1, gpus=4)
    submit(c, "r1", gpus=1, expected_s=1000.0)
    submit(c, "r2", gpus=2, expected_s=100.0)
    submit(c, "head", gpus=3, t=1.0, expected_s=500.0)  # needs r2 gone: expected at t=100
    long_out = submit(c, "long", gpus=1, t=2.0, expected_s=5000.0)
    short_out = submit(c, "short", gpus=1, t=3.0, expected_s=50.0)
    assert not any(isinstance(o, Placement) for o in long_out), "would hold the head's GPU"
    assert any(isinstance(o, Placement) for o in short_out), "ends before the head starts"
    end(c, "short", 53.0)
    out = end(c, "r2", 100.0)
    assert next(o.task for o in out if isinstance(o, Placement)) == "head"


def test_strict_fifo_baseline_does_not_backfill():
    from streams.policies import static

    c = cell(nodes=1, gpus=4, config=static.QUEUE)
    submit(c, "r1", gpus=2)
    submit(c, "head", gpus=3, t=1.0)
    out = submit(c, "small", gpus=1, t=2.0)
    assert not any(isinstance(o, Placement) for o in out)


def test_preemption_picks_the_cheapest_victims_and_spares_higher_classes():
    c = cell(nodes=2, gpus=2)
    submit(c, "guard", gpus=1, qos="guaranteed", priority=10)
    submit(c, "burst", gpus=1, qos="burstable", priority=10)
    submit(c, "old-be", gpus=1, qos="best_effort", t=0.0)
    submit(c, "new-be", gpus=1, qos="best_effort", t=500.0)
    out = submit(c, "urgent", gpus=1, t=600.0, priority=800)
    stopped = [o for o in out if isinstance(o, Preempted)]
    assert [o.task for o in stopped] == ["new-be"], "ran 100 s, less lost than old-be's 600 s"
    assert "urgent" in running(c) and {"guard", "burst"} <= running(c)
    assert c.tasks["new-be"].status == "queued" and c.tasks["new-be"].progress_s == 100.0


def test_best_effort_never_preempts_and_budget_is_guarded():
    c = cell(nodes=1, gpus=2, config=QueueConfig(preemptions_per_tick=1))
    submit(c, "be1", qos="best_effort")
    submit(c, "be2", qos="best_effort")
    assert not any(isinstance(o, Preempted) for o in
                   submit(c, "be3", qos="best_effort", t=1.0))
    assert any(isinstance(o, Preempted) for o in submit(c, "u1", priority=900, t=2.0))
    assert not any(isinstance(o, Preempted) for o in submit(c, "u2", priority=900, t=3.0))
    out = c.tick("tick", 1, now_s=60.0)  # budget reset: the head may preempt again
    assert any(isinstance(o, Preempted) for o in out)


def test_a_workflow_second_stage_waits_then_lands_on_its_predecessors_node():
    c = cell(nodes=4, gpus=4, sched=LOCALITY)
    submit(c, "fill", gpus=4)  # node-0 full so the first stage goes elsewhere
    submit(c, "extract", gpus=1, t=1.0)
    home = c.tasks["extract"].node
    out = submit(c, "train", gpus=2, t=2.0, depends_on=("extract",))
    assert not any(isinstance(o, Placement) for o in out) and c.tasks["train"].status == "waiting"
    out = end(c, "extract", 100.0)
    placed = [o for o in out if isinstance(o, Placement)]
    assert [(o.task, o.node) for o in placed] == [("train", home)]


def test_a_failed_predecessor_fails_its_dependents():
    c = cell(nodes=1, gpus=4)
    submit(c, "a", gpus=1)
    submit(c, "b", gpus=1, t=1.0, depends_on=("a",))
    submit(c, "c", gpus=1, t=1.0, depends_on=("b",))
    end(c, "a", 5.0, failed=True)
    assert c.tasks["b"].status == "done" and not c.tasks["b"].ok
    assert c.tasks["c"].status == "done" and not c.tasks["c"].ok
