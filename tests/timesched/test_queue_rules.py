"""The queue's rules one at a time, each at its boundary: aging, the starvation bound, quotas.

Each test is built so that the rule it names, and nothing else, decides the
answer: the aging test stays well before the starvation bound (which alone
would also let an old task through), the starvation test sets the aging step
to 0, and the quota tests leave free GPUs beside the task that must wait.
"""

from __future__ import annotations

from streams.core.queue import FairQueue, QueueConfig, TaskMeta
from tests.timesched.helpers import cell, end, running, submit


def _order(q: FairQueue, now_s: float) -> list[str]:
    return [e.task for e in q.ordered(now_s)]


def test_aging_puts_a_long_waiting_task_ahead_of_a_higher_priority_before_the_bound():
    """``old`` (priority 0) and ``late`` (priority 150) gain 100 per full minute waited,
    in steps. Both stay far from the starvation bound (1 h), so only the aging bonus
    can put ``old`` first; without it the higher priority would always lead."""
    q = FairQueue(QueueConfig(aging_interval_s=60.0, aging_step=100, starvation_s=3600.0))
    q.push("old", 0, TaskMeta("a", priority=0), 1000, now_s=0.0)
    q.push("late", 1, TaskMeta("b", priority=150), 1000, now_s=110.0)
    assert _order(q, 110.0) == ["late", "old"], "old 0 + 100 against late 150"
    assert _order(q, 120.0) == ["old", "late"], "old 0 + 200 against late 150 + 0"
    assert _order(q, 169.9) == ["old", "late"], "late has not waited a full minute yet"
    assert _order(q, 170.0) == ["late", "old"], "late 150 + 100 against old 200"


def test_a_task_that_waited_exactly_the_starvation_bound_goes_above_every_priority():
    """No aging (step 0): only the bound lifts ``low``; it holds from ``starvation_s`` on."""
    q = FairQueue(QueueConfig(aging_interval_s=60.0, aging_step=0, starvation_s=600.0))
    q.push("low", 0, TaskMeta("a", priority=0), 1000, now_s=100.0)
    q.push("high", 1, TaskMeta("b", priority=9_000), 1000, now_s=100.0)
    assert _order(q, 699.0) == ["high", "low"]
    assert _order(q, 700.0) == ["low", "high"], "waited 600 s = starvation_s: starved"


def test_a_tenant_may_fill_its_quota_exactly_then_waits_while_another_starts():
    c = cell(nodes=1, gpus=4, config=QueueConfig(tenant_quota_milli={"a": 2000}))
    submit(c, "a1", tenant="a")
    submit(c, "a2", t=1.0, tenant="a")
    assert running(c) == {"a1", "a2"}, "1000 + 1000 = the quota of 2000: allowed"
    submit(c, "a3", t=2.0, tenant="a")
    assert c.tasks["a3"].status == "queued", "2000 + 1000 > 2000, with two GPUs free"
    submit(c, "b1", t=3.0, tenant="b")
    assert running(c) == {"a1", "a2", "b1"}, "the later task of a tenant without quota starts"
    assert c.tasks["a3"].status == "queued"


def test_a_task_held_by_its_quota_starts_in_the_pass_after_its_tenant_frees_room():
    c = cell(nodes=1, gpus=4, config=QueueConfig(tenant_quota_milli={"a": 2000}))
    submit(c, "a1", tenant="a")
    submit(c, "a2", t=1.0, tenant="a")
    submit(c, "a3", t=2.0, tenant="a")
    assert c.tasks["a3"].status == "queued"
    end(c, "a1", 10.0)  # a holds 1000: a3 brings it to exactly 2000
    assert running(c) == {"a2", "a3"}


def test_a_fractional_task_one_milli_over_the_quota_waits():
    c = cell(nodes=1, gpus=4, config=QueueConfig(tenant_quota_milli={"a": 1499}))
    submit(c, "a1", milli=1000, tenant="a")
    submit(c, "a2", milli=500, t=1.0, tenant="a")
    assert running(c) == {"a1"} and c.tasks["a2"].status == "queued"
    c2 = cell(nodes=1, gpus=4, config=QueueConfig(tenant_quota_milli={"a": 1500}))
    submit(c2, "a1", milli=1000, tenant="a")
    submit(c2, "a2", milli=500, t=1.0, tenant="a")
    assert running(c2) == {"a1", "a2"}


def test_priority_order_is_priority_then_submission_with_no_aging_nor_fair_share():
    """``order="priority"`` (the backfill baseline): the job's own priority, then FCFS.
    ``old`` has waited far past the starvation bound and tenant ``b`` holds most of the
    cell, yet neither moves anything; ``fifo`` ignores priority altogether."""
    def fill(order: str) -> FairQueue:
        q = FairQueue(QueueConfig(order=order, starvation_s=60.0))
        q.total_milli = 8000
        q.on_start("b", 6000)
        q.push("old", 0, TaskMeta("a", priority=0), 1000, now_s=0.0)
        q.push("b-low", 1, TaskMeta("b", priority=0), 1000, now_s=5.0)
        q.push("urgent", 2, TaskMeta("b", priority=500), 1000, now_s=9_000.0)
        q.push("a-mid", 3, TaskMeta("a", priority=100), 1000, now_s=9_000.0)
        return q

    assert _order(fill("priority"), 9_000.0) == ["urgent", "a-mid", "old", "b-low"]
    assert _order(fill("fifo"), 9_000.0) == ["old", "b-low", "urgent", "a-mid"]
    assert _order(fill("fair"), 9_000.0)[:2] == ["old", "b-low"]  # starved: above all
