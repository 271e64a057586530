"""The queue yields the order docs/simulation.md defines, against an independent oracle.

``DocumentedQueue`` below is the documented rule written afresh, calling
nothing of ``streams.core.queue``: a task's level is its priority plus
``aging_step`` per full ``aging_interval_s`` waited (since it last entered the
queue), or above every priority once it waited ``starvation_s``; within one
tenant and priority tasks go in the order they entered the queue; and at each
step of a pass the next task is, of those first-in-line tasks, the one with the
highest level, then the lowest GPU share / weight of its tenant *now*, then the
lowest sequence number. The caller starts tasks between steps (its tenant's
share rises) and preempts started ones (the share falls mid-pass; the victim
queues again after the pass), so the order must be recomputed as it goes.

A reference built from the queue's own ``level`` and ``share`` would only
prove that the heap merge agrees with a scan; this one fails if the rule
itself is wrong (an aging bonus dropped, a weight ignored, a share not updated).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.queue import FairQueue, QueueConfig, TaskMeta

TENANTS = ("a", "b", "c", "d")
WEIGHTS = {"a": 2}  # every other tenant: weight 1
AGING_INTERVAL_S, AGING_STEP, STARVATION_S = 60.0, 50, 3600.0
TOTAL_MILLI = 16_000
REQUEUED_AT_S = 500.0


@dataclass(frozen=True)
class Waiting:
    task: str
    tenant: str
    priority: int
    seq: int
    milli: int
    since_s: float


class DocumentedQueue:
    """The order of docs/simulation.md ("What the scheduler does"), nothing more."""

    def __init__(self) -> None:
        self.waiting: list[Waiting] = []  # in the order they entered the queue
        self.usage: dict[str, int] = {}

    def push(self, w: Waiting) -> None:
        self.waiting.append(w)

    def level(self, w: Waiting, now_s: float) -> float:
        waited = max(0.0, now_s - w.since_s)
        if waited >= STARVATION_S:
            return float("inf")  # above every priority
        return w.priority + AGING_STEP * int(waited // AGING_INTERVAL_S)

    def weighted_share(self, tenant: str) -> Fraction:
        return Fraction(self.usage.get(tenant, 0), TOTAL_MILLI) / WEIGHTS.get(tenant, 1)

    def one_pass(self, now_s: float, act: Callable[[Waiting], None]) -> list[str]:
        """The tasks queued when the pass begins, in order; ``act`` is the caller."""
        offered = list(self.waiting)
        out: list[str] = []
        while True:
            first_in_line: dict[tuple[str, int], Waiting] = {}
            for w in offered:
                first_in_line.setdefault((w.tenant, w.priority), w)
            if not first_in_line:
                return out
            best = min(first_in_line.values(), key=lambda w: (
                -self.level(w, now_s), self.weighted_share(w.tenant), w.seq))
            offered.remove(best)
            out.append(best.task)
            act(best)


def caller(start: Callable[[Waiting], None], stop: Callable[[Waiting], None],
           moves: list[int], started: list[Waiting], victims: list[Waiting]
           ) -> Callable[[Waiting], None]:
    """Per offered task: 0 leave it queued, 1 start it, 2 start it and preempt the task
    started longest ago (its share is freed now; it queues again after the pass)."""
    step = iter(moves)

    def act(w: Waiting) -> None:
        move = next(step, 0)
        if move >= 1:
            start(w)
            started.append(w)
        if move == 2 and len(started) > 1:
            victim = started.pop(0)
            stop(victim)
            victims.append(victim)

    return act


def oracle_passes(tasks: list[Waiting], usage_b: int, passes: list[list[int]],
                  now_s: float) -> list[list[str]]:
    model = DocumentedQueue()
    for w in tasks:
        model.push(w)
    model.usage["b"] = usage_b
    started: list[Waiting] = []

    def start(w: Waiting) -> None:
        model.waiting.remove(w)
        model.usage[w.tenant] = model.usage.get(w.tenant, 0) + w.milli

    def stop(w: Waiting) -> None:
        model.usage[w.tenant] -= w.milli

    out = []
    for moves in passes:
        victims: list[Waiting] = []
        out.append(model.one_pass(now_s, caller(start, stop, moves, started, victims)))
        for v in victims:
            model.push(Waiting(v.task, v.tenant, v.priority, v.seq, v.milli, REQUEUED_AT_S))
    return out


def queue_passes(tasks: list[Waiting], usage_b: int, passes: list[list[int]],
                 now_s: float) -> list[list[str]]:
    q = FairQueue(QueueConfig(tenant_weights={t: float(w) for t, w in WEIGHTS.items()},
                              aging_interval_s=AGING_INTERVAL_S, aging_step=AGING_STEP,
                              starvation_s=STARVATION_S))
    q.total_milli = TOTAL_MILLI
    for w in tasks:
        q.push(w.task, w.seq, TaskMeta(w.tenant, w.priority), w.milli, w.since_s)
    q.on_start("b", usage_b)
    started: list[Waiting] = []

    def start(w: Waiting) -> None:
        q.remove(w.task)
        q.on_start(w.tenant, w.milli)

    def stop(w: Waiting) -> None:
        q.on_stop(w.tenant, w.milli)

    out = []
    for moves in passes:
        victims: list[Waiting] = []
        act = caller(start, stop, moves, started, victims)
        got: list[str] = []
        for entry in q.ordered(now_s):
            got.append(entry.task)
            act(Waiting(entry.task, entry.meta.tenant, entry.meta.priority, entry.seq,
                        entry.demand_milli, entry.enqueued_s))
        out.append(got)
        for v in victims:
            q.push(v.task, v.seq, TaskMeta(v.tenant, v.priority), v.milli, REQUEUED_AT_S)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 400),
                          st.sampled_from([250, 1000, 2000])), min_size=1, max_size=40),
       st.lists(st.lists(st.integers(0, 2), max_size=40), min_size=1, max_size=3),
       st.integers(0, 3), st.sampled_from([400.0, 600.0, 5000.0]))
def test_the_queue_yields_the_documented_order(tasks, passes, usage_b, now_s):
    """Tasks enter in ``since_s`` order (the queue's clock only moves forward)."""
    arrivals = sorted(tasks, key=lambda t: t[2])
    waiting = [Waiting(f"t{n}", TENANTS[tenant], prio * 100, n, milli, float(since))
               for n, (tenant, prio, since, milli) in enumerate(arrivals)]
    want = oracle_passes(waiting, 1000 * usage_b, passes, now_s)
    assert queue_passes(waiting, 1000 * usage_b, passes, now_s) == want


def test_the_oracle_follows_the_documented_examples():
    """The oracle itself, on cases worked by hand from the rule."""
    def order(tasks: list[Waiting], now_s: float, usage: dict[str, int]) -> list[str]:
        model = DocumentedQueue()
        for w in tasks:
            model.push(w)
        model.usage.update(usage)
        return model.one_pass(now_s, lambda w: None)

    # aging: priority 0 that waited 3 minutes (150) passes priority 100 that just came
    assert order([Waiting("old", "a", 0, 0, 1000, 0.0), Waiting("new", "b", 100, 1, 1000, 180.0)],
                 180.0, {}) == ["old", "new"]
    # fair share: b holds 2 GPUs, a (weight 2) holds 3: shares 2/16 against 3/16/2
    assert order([Waiting("b1", "b", 0, 0, 1000, 0.0), Waiting("a1", "a", 0, 1, 1000, 0.0)],
                 0.0, {"a": 3000, "b": 2000}) == ["a1", "b1"]
    # within one tenant and priority: the order they entered, whatever the sequence
    assert order([Waiting("x", "c", 0, 9, 1000, 0.0), Waiting("y", "c", 0, 1, 1000, 0.0)],
                 0.0, {}) == ["x", "y"]
