"""The queue's heap merge yields the order of a plain scan of every bucket head (hypothesis).

This proves the optimisation, not the rule: ``reference`` ranks with the queue's
own ``level`` and ``share``, so a wrong rule would pass here (the rule is checked
against an independent oracle in ``test_queue_order.py``). What it does cover
is the merge under the changes a dispatch pass really sees: the caller starts
tasks between steps (shares rise), and a preemption stops a started task (its
tenant's share falls) and queues the victim again *during* the pass, as
``Cell._preempt_for`` does; the heap must then agree with a scan that ranks every
bucket's first live entry afresh at each step.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.queue import Entry, FairQueue, QueueConfig, TaskMeta

TENANTS = ("a", "b", "c", "d")


def reference(q: FairQueue, now_s: float, act: Callable[[Entry], None]) -> list[str]:
    """Scan every bucket's first live entry per step; ``act(entry)`` is the caller."""
    cursors = {key: 0 for key in sorted(q.buckets)}
    out: list[str] = []
    while cursors:
        best, best_key = None, None
        for key in list(cursors):
            bucket = q.buckets.get(key, [])
            i = cursors[key]
            while i < len(bucket) and q.entries.get(bucket[i].task) is not bucket[i]:
                i += 1
            if i >= len(bucket):
                del cursors[key]
                continue
            cursors[key] = i
            e = bucket[i]
            rank = (-q.level(e, now_s), q.share(e.meta.tenant), e.seq)
            if best is None or rank < best:
                best, best_key = rank, key
        if best_key is None:
            break
        entry: Entry = q.buckets[best_key][cursors[best_key]]
        cursors[best_key] += 1
        out.append(entry.task)
        act(entry)
    return out


def build(tasks: list[tuple[int, int, int, int]]) -> FairQueue:
    q = FairQueue(QueueConfig(tenant_weights={"a": 2.0}, aging_interval_s=60.0))
    q.total_milli = 16_000
    for n, (tenant, prio, t, milli) in enumerate(tasks):
        q.push(f"t{n}", n, TaskMeta(TENANTS[tenant], prio * 100), milli, float(t))
    return q


def caller(q: FairQueue, moves: list[int], log: list[str]) -> Callable[[Entry], None]:
    """Start some yielded tasks, and now and then preempt one started earlier (requeue)."""
    started: list[Entry] = []
    step = iter(moves)

    def act(entry: Entry) -> None:
        move = next(step, 0)
        if move >= 1:
            q.remove(entry.task)
            q.on_start(entry.meta.tenant, entry.demand_milli)
            started.append(entry)
        if move == 2 and len(started) > 1:
            victim = started.pop(0)
            q.on_stop(victim.meta.tenant, victim.demand_milli)
            q.push(victim.task, victim.seq, victim.meta, victim.demand_milli, 500.0)
        log.append(entry.task)

    return act


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 400),
                          st.sampled_from([250, 1000, 2000])), min_size=1, max_size=40),
       st.lists(st.integers(0, 2), max_size=60), st.integers(0, 3),
       st.sampled_from([400.0, 600.0, 5000.0]))
def test_the_heap_merge_yields_the_order_of_a_scan(tasks, moves, usage, now_s):
    a, b = build(tasks), build(tasks)
    for q in (a, b):
        q.on_start("b", 1000 * usage)
    want: list[str] = []
    reference(a, now_s, caller(a, moves, want))
    got: list[str] = []
    act = caller(b, moves, got)
    for entry in b.ordered(now_s):
        act(entry)
    assert got == want
    assert set(b.entries) == set(a.entries)
