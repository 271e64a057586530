"""The queue's edges that mutation testing showed no test held (``./dev mutate``).

Each test pins one documented behaviour of ``streams.core.queue`` at the point a
mutant changed it: the aging arithmetic and the starvation bound at equality, the
weighted share with no capacity, the quota boundary, usage bookkeeping when a stop
comes first or for a CPU-only task, FIFO as push order, a removal mid-pass that
exposes an older head, a nested pass, and the bound on dead entries the queue keeps.
"""

from __future__ import annotations

from streams.core.queue import STARVED_LEVEL, Entry, FairQueue, QueueConfig, TaskMeta


def entry(priority: int = 100, enqueued_s: float = 0.0, tenant: str = "a",
          demand: int = 1000) -> Entry:
    return Entry("t", 0, TaskMeta(tenant, priority), demand, enqueued_s)


def test_the_aging_bonus_is_whole_steps_of_waiting_added_to_the_priority():
    q = FairQueue(QueueConfig(aging_interval_s=600.0, aging_step=50, starvation_s=3600.0))
    assert q.level(entry(enqueued_s=1000.0), 1000.0) == 100
    assert q.level(entry(enqueued_s=1000.0), 1599.0) == 100
    assert q.level(entry(enqueued_s=1000.0), 1600.0) == 150
    assert q.level(entry(enqueued_s=1000.0), 2200.0) == 200


def test_a_clock_behind_the_enqueue_time_gives_no_bonus_and_no_penalty():
    q = FairQueue(QueueConfig(aging_interval_s=0.5, aging_step=50))
    assert q.level(entry(enqueued_s=10.0), 10.0) == 100
    assert q.level(entry(enqueued_s=10.0), 9.0) == 100


def test_waiting_exactly_the_starvation_bound_lifts_a_task_above_every_priority():
    q = FairQueue(QueueConfig(aging_interval_s=600.0, starvation_s=3600.0))
    assert q.level(entry(enqueued_s=0.0), 3599.0) == 100 + 5 * 50
    assert q.level(entry(enqueued_s=0.0), 3600.0) == STARVED_LEVEL


def test_the_share_is_usage_over_capacity_over_weight_and_zero_without_usage():
    q = FairQueue(QueueConfig(tenant_weights={"a": 2.0}))
    q.total_milli = 8000
    q.on_start("a", 2000)
    assert q.share("a") == 2000 / 8000 / 2.0
    assert q.share("nobody") == 0.0


def test_a_cell_without_capacity_ranks_by_usage_alone():
    """Capacity 0 (every node left) or 1 must neither divide by zero nor halve usage."""
    q = FairQueue()
    q.on_start("a", 500)
    for capacity in (0, 1):
        q.total_milli = capacity
        assert q.share("a") == 500.0


def test_a_task_that_fills_its_tenants_quota_exactly_is_not_over_it():
    q = FairQueue(QueueConfig(tenant_quota_milli={"a": 1000}))
    assert not q.over_quota(entry(demand=1000))
    assert q.over_quota(entry(demand=1001))
    q.on_start("a", 400)
    assert not q.over_quota(entry(demand=600))
    assert q.over_quota(entry(demand=601))
    assert not q.over_quota(entry(tenant="free", demand=10**9))


def test_usage_counts_each_start_once_and_a_tenant_back_to_zero_leaves_the_table():
    q = FairQueue()
    q.on_start("a", 500)
    assert q.usage_milli == {"a": 500}
    q.on_stop("a", 200)
    assert q.usage_milli == {"a": 300}
    q.on_stop("a", 300)
    assert q.usage_milli == {}


def test_a_stop_read_before_its_start_nets_out_to_no_usage():
    q = FairQueue()
    q.on_stop("z", 100)
    q.on_start("z", 100)
    assert q.usage_milli.get("z", 0) == 0
    assert q.share("z") == 0.0


def test_a_cpu_only_task_of_a_tenant_without_usage_stops_cleanly():
    q = FairQueue()
    q.on_stop("cpu-only", 0)
    assert q.usage_milli == {}


def test_the_queue_iterates_its_task_ids_and_removing_an_unknown_task_is_a_no_op():
    q = FairQueue()
    for n in range(3):
        q.push(f"t{n}", n, TaskMeta("a"), 1000, 0.0)
    assert list(q) == ["t0", "t1", "t2"] and len(q) == 3 and "t1" in q
    assert q.remove("missing") is None
    assert list(q) == ["t0", "t1", "t2"]


def test_equal_tasks_of_two_tenants_go_by_sequence_number():
    q = FairQueue()
    q.push("late", 7, TaskMeta("a"), 1000, 0.0)
    q.push("early", 3, TaskMeta("b"), 1000, 0.0)
    assert [e.task for e in q.ordered(0.0)] == ["early", "late"]


def test_fifo_order_is_the_order_of_pushes_whatever_the_tenant_priority_or_sequence():
    q = FairQueue(QueueConfig(order="fifo"))
    q.push("first", 5, TaskMeta("a", priority=0), 1000, 0.0)
    q.push("second", 6, TaskMeta("b", priority=900), 1000, 0.0)
    q.push("requeued", 1, TaskMeta("c", priority=0), 1000, 0.0)  # an old task back
    assert [e.task for e in q.ordered(5000.0)] == ["first", "second", "requeued"]


def test_removing_a_head_mid_pass_exposes_an_older_task_behind_it_at_once():
    """A requeued task keeps its enqueue time, so it can wait behind a younger one in
    its bucket; removing that younger head mid-pass must let it rank by its own age."""
    q = FairQueue(QueueConfig(aging_interval_s=600.0, aging_step=50))
    q.push("urgent", 0, TaskMeta("c", priority=900), 1000, 650.0)
    q.push("young", 5, TaskMeta("a"), 1000, 100.0)  # waited 550 s: level 0
    q.push("old", 1, TaskMeta("a"), 1000, 0.0)  # requeued, waited 650 s: level 50
    q.push("other", 2, TaskMeta("b"), 1000, 50.0)  # waited 600 s: level 50
    got = []
    for e in q.ordered(650.0):
        got.append(e.task)
        if e.task == "urgent":
            q.remove("young")
    assert got == ["urgent", "old", "other"]


def test_pushing_a_queued_task_again_mid_pass_also_exposes_the_task_behind_it():
    q = FairQueue(QueueConfig(aging_interval_s=600.0, aging_step=50))
    q.push("urgent", 0, TaskMeta("c", priority=900), 1000, 650.0)
    q.push("young", 5, TaskMeta("a"), 1000, 100.0)
    q.push("old", 1, TaskMeta("a"), 1000, 0.0)
    q.push("other", 2, TaskMeta("b"), 1000, 50.0)
    got = []
    for e in q.ordered(650.0):
        got.append(e.task)
        if e.task == "urgent":
            q.push("young", 5, TaskMeta("a"), 1000, 650.0)  # its spec changed: queued anew
    assert got == ["urgent", "old", "other", "young"]
    assert len(q) == 4


def test_a_pass_goes_on_after_a_nested_pass_while_a_bucket_was_emptied():
    q = FairQueue()
    q.push("a1", 0, TaskMeta("a", priority=100), 1000, 0.0)
    q.push("b1", 1, TaskMeta("b", priority=50), 1000, 0.0)
    q.push("c1", 2, TaskMeta("c"), 1000, 0.0)
    q.push("c2", 3, TaskMeta("c"), 1000, 0.0)
    outer, inner = [], []
    for e in q.ordered(0.0):
        outer.append(e.task)
        if e.task == "a1":
            q.remove("b1")
            inner = [x.task for x in q.ordered(0.0)]
    assert inner == ["a1", "c1", "c2"]
    assert outer == ["a1", "c1", "c2"]


def test_a_preemption_after_a_nested_pass_still_reranks_the_outer_pass():
    """The outer pass must still know it is iterating once a nested pass has ended, so
    that a tenant's share falling (a preemption's ``on_stop``) ranks its task again."""
    q = FairQueue()
    q.total_milli = 10_000
    q.on_start("a", 1000)
    q.on_start("b", 3000)
    q.push("x", 0, TaskMeta("c", priority=900), 1000, 0.0)
    q.push("b1", 1, TaskMeta("b"), 1000, 0.0)
    q.push("a1", 2, TaskMeta("a"), 1000, 0.0)
    got = []
    for e in q.ordered(0.0):
        got.append(e.task)
        if e.task == "x":
            assert [x.task for x in q.ordered(0.0)] == ["x", "a1", "b1"]
            q.on_stop("b", 3000)
    assert got == ["x", "b1", "a1"]


def test_a_pass_that_starts_every_task_it_yields_sees_every_task():
    """Removing the yielded tasks mid-pass (what dispatch does) must not compact the
    buckets under the pass's cursors, however many dead entries that leaves."""
    q = FairQueue()
    for n in range(6):
        q.push(f"t{n}", n, TaskMeta("a"), 1000, 0.0)
    got = []
    for e in q.ordered(0.0):
        got.append(e.task)
        q.remove(e.task)
    assert got == [f"t{n}" for n in range(6)] and len(q) == 0


def _dead(q: FairQueue) -> int:
    return sum(len(b) for b in q.buckets.values()) - len(q)


def test_removed_tasks_do_not_pile_up_in_the_buckets():
    """Removal is lazy, but the dead entries kept stay within max(64, live tasks)."""
    q = FairQueue()
    for n in range(100):
        q.push(f"t{n}", n, TaskMeta(f"tenant{n % 3}"), 1000, 0.0)
    for n in range(90):
        q.remove(f"t{n}")
        assert _dead(q) <= max(64, len(q)), n
    assert [e.task for e in q.ordered(0.0)] == [f"t{n}" for n in range(90, 100)]


def test_dead_entries_a_pass_drops_are_no_longer_counted_but_the_others_still_are():
    q = FairQueue()
    for n in range(100):
        q.push(f"t{n}", n, TaskMeta("a"), 1000, 0.0)
    for n in (0, *range(50, 100)):
        q.remove(f"t{n}")
    first_pass = q.ordered(0.0)
    assert next(first_pass).task == "t1"  # the pass drops t0, ahead of the first live one
    first_pass.close()
    for n in range(1, 21):
        q.remove(f"t{n}")
        assert _dead(q) <= max(64, len(q)), n


def test_a_pass_drops_the_dead_entries_ahead_of_each_bucket_and_the_emptied_buckets():
    q = FairQueue()
    for n in range(6):
        q.push(f"t{n}", n, TaskMeta("a" if n < 3 else "b"), 1000, 0.0)
    for n in (0, 1, 3, 4, 5):
        q.remove(f"t{n}")
    assert [e.task for e in q.ordered(0.0)] == ["t2"]
    assert {k: [e.task for e in b] for k, b in q.buckets.items()} == {("a", 0, 0, 0): ["t2"]}
    q.remove("t2")
    assert list(q.ordered(0.0)) == [] and q.buckets == {}
    q.push("again", 9, TaskMeta("a"), 1000, 0.0)
    assert [e.task for e in q.ordered(0.0)] == ["again"]
