"""Invariants under any sequence of submissions, ends and ticks (hypothesis): no task is
lost, capacity is never over-committed, the unfinished tasks are known in order (also
after a restore), and the same inputs give the same decisions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core.cell import DONE, QUEUED, RUNNING, WAITING, Cell
from streams.core.queue import QueueConfig
from tests.timesched.helpers import cell, end, submit

QOS = ("guaranteed", "burstable", "best_effort")
op = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, 4), st.sampled_from([250, 500, 1000]),
              st.integers(0, 3), st.integers(0, 900), st.sampled_from(QOS),
              st.integers(-1, 30), st.booleans()),
    st.tuples(st.just("end"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("tick")),
)


def _run(ops: list[tuple], c: Cell | None = None, start: int = 0,
         predict: bool = False) -> tuple[list[str], Cell]:
    """Apply ``ops`` to a new cell (or to ``c``, which has seen the first ``start`` ops:
    times, task and tick numbers go on from there). With ``predict`` the queue predicts
    run times, and every fourth task declares none (two job names share the history)."""
    c = c or cell(nodes=3, gpus=4, config=QueueConfig(
        preemptions_per_tick=2, max_attempts=8, predict_runtimes=predict))
    log: list[str] = []
    t = 7.0 * start
    k = len(c.tasks)
    tick = max(c.tick_seq, 0)
    for o in ops:
        t += 7.0
        if o[0] == "submit":
            _, gpus, milli, tenant, prio, qos, dep, elastic = o
            gpus = max(gpus, 1) if milli < 1000 else gpus
            deps = (f"t{dep}",) if 0 <= dep < k else ()
            out = submit(c, f"t{k}", gpus=1 if milli < 1000 else gpus, milli=milli, t=t,
                         tenant=f"ten{tenant}", priority=prio, qos=qos, depends_on=deps,
                         expected_s=(0.0 if c.config.predict_runtimes and k % 4 == 3
                                     else 60.0 + 200.0 * (k % 3)),
                         name=f"job{k % 2}",
                         elastic=(1, min(gpus + 1, 4)) if elastic and gpus and milli == 1000
                         else ())
            k += 1
        elif o[0] == "end":
            out = end(c, f"t{o[1]}", t, failed=o[2])
        else:
            tick += 1
            out = c.tick(f"tick{tick}", tick, now_s=t)
        log.extend(repr(x) for x in out)
        s = c.state
        assert (s.gpu_free[: s.n] >= 0).all() and (s.cpu_free[: s.n] >= 0).all()
        assert (s.mem_free[: s.n] >= 0).all()
        for task in (f"t{i}" for i in range(k)):
            rec = c.tasks[task]
            assert rec.status in (WAITING, QUEUED, RUNNING, DONE)
            assert (rec.status == QUEUED) == (task in c.queue)
            assert (rec.status == RUNNING) == (task in s.task_slot)
        # The ticks' scans read ``unfinished``: exactly the tasks not done, in submission order.
        assert list(c.unfinished) == [t for t, r in c.tasks.items() if r.status != DONE]
    used = np.zeros_like(c.state.gpu_free[: c.state.n])
    for rec in c.tasks.values():
        if rec.status == RUNNING:
            for g in rec.gpus:
                used[c.state.node_index[rec.node], g] += rec.request.gpu_milli
    assert (used + c.state.gpu_free[: c.state.n] == 1000 * (
        np.arange(c.state.max_gpus) < c.state.gpu_count[: c.state.n, None])).all()
    return log, c


@pytest.mark.parametrize("predict", [False, True])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60))
def test_no_task_is_lost_capacity_holds_and_runs_are_deterministic(predict, ops):
    first, c = _run(ops, predict=predict)
    second, _ = _run(ops, predict=predict)
    assert first == second
    back = Cell.restore(c.name, c.scheduler, c.meta_record(),
                        [(n, c.node_record(n)) for n in c.nodes],
                        [(t, c.task_record(t)) for t in c.tasks], c.config)
    assert list(back.unfinished) == list(c.unfinished)


@pytest.mark.parametrize("predict", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60), st.lists(op, min_size=1, max_size=40))
def test_a_restored_cell_decides_as_the_one_it_was_restored_from(predict, before, after):
    """Elastic sizing and moves keep derived state (``_grows_due``, ``_moves_due``), and
    the head's reservation is state: a cell rebuilt from its records must take the same
    decisions from then on, with run times declared or predicted."""
    _, c = _run(before, predict=predict)
    back = Cell.restore(c.name, c.scheduler, c.meta_record(),
                        [(n, c.node_record(n)) for n in c.nodes],
                        [(t, c.task_record(t)) for t in c.tasks], c.config)
    back.explain = c.explain  # the records do not say whether decisions list candidates
    assert _run(after, back, len(before))[0] == _run(after, c, len(before))[0]
