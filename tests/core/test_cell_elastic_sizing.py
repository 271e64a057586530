"""Elastic tasks start on fewer GPUs rather than wait, and grow into idle GPUs when their
learned scaling pays for the restart (issue 35; ``Cell._place_smaller``,
``Cell._grow_elastic``, ``streams.core.elastic_sizing``).

The cell has one V100 node of 4 GPUs. 'fixed' (3 GPUs) holds three of them; 'e' asks
for 4 GPUs within an elastic range of 1-4, so it starts on the one GPU left. When
'fixed' ends, 'e' may grow to 4: with nothing learned of its class on 4 GPUs it is taken
to scale linearly (4x), so the growth saves ``1 - 1/4 = 0.75`` of what is left, which is
taken to be as long as it ran (nothing is declared): it pays once ``0.75 x ran`` reaches
two restarts (``SIZE_PREEMPT_GAIN x RESTART_S`` = 120 s), after 160 s of running.
"""

from __future__ import annotations

import pytest

from streams.core import cell as cell_module
from streams.core.cell import (
    CHANGE_GUARD_S,
    RESTART_S,
    SIZE_PREEMPT_GAIN,
    Cell,
    Preempted,
    Refused,
)
from streams.core.decisions import Placement
from streams.core.elastic_sizing import LINEAR, saving_s, scaling, smaller_counts
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.queue import TaskMeta
from streams.core.request import TaskRequest
from streams.core.speed_book import SpeedBook
from streams.profiles.service import service_scheduler

SCHED = service_scheduler("hetsched")
E_STARTS = 10.0
NEED_S = SIZE_PREEMPT_GAIN * RESTART_S  # 120 s
PAYS_AT = E_STARTS + NEED_S / 0.75  # linear prior, 1 -> 4 GPUs


def meta(elastic: tuple[int, ...] = (), name: str = "resnet",
         qos: str = "burstable") -> TaskMeta:
    return TaskMeta("team", qos=qos, name=name, elastic=elastic)


def submit(cell: Cell, task: str, gpus: int, t: float, elastic: tuple[int, ...] = (),
           name: str = "resnet", qos: str = "burstable") -> list[object]:
    return cell.submit(TaskArrived(f"a/{task}", TaskRequest(task, 1000, 1024, gpus, 1000)),
                       None, meta(elastic, name, qos), now_s=t)


def queued(out: list[object]) -> bool:
    """The submission's answer says it waits (a resolvable refusal)."""
    (o,) = out
    return isinstance(o, Refused) and o.resolvable


def e_on_one_gpu(elastic: tuple[int, ...] = (1, 4), qos: str = "burstable") -> Cell:
    """'fixed' holds 3 of the V100's 4 GPUs; 'e' (4 GPUs, range ``elastic``) started on
    the last one at ``E_STARTS``; 'fixed' ended at once."""
    cell = Cell("c", SCHED)
    cell.add_node(NodeAdded("n", "v100", 32000, 131072, 4, "V100M16"), now_s=0.0)
    (fixed,) = submit(cell, "fixed", 3, 1.0, name="other")
    assert isinstance(fixed, Placement)
    (e,) = submit(cell, "e", 4, E_STARTS, elastic, qos=qos)
    assert isinstance(e, Placement) and len(e.gpus) == 1, e
    assert cell.tasks["e"].request.num_gpu == 1
    cell.end(TaskEnded("f/fixed", "fixed"), now_s=E_STARTS)
    return cell


def test_an_elastic_task_starts_on_the_gpus_that_fit_and_a_fixed_one_waits() -> None:
    cell = Cell("c", SCHED)
    cell.add_node(NodeAdded("n", "v100", 32000, 131072, 4, "V100M16"), now_s=0.0)
    submit(cell, "fixed", 2, 1.0, name="other")
    (e,) = submit(cell, "e", 4, 2.0, (1, 4))
    assert isinstance(e, Placement) and len(e.gpus) == 2  # the most that fit, not 1
    assert queued(submit(cell, "waits", 4, 3.0))  # a fixed 4-GPU task queues
    assert queued(submit(cell, "too-small-range", 4, 4.0, (3, 4)))  # 3 at least: none fit


def test_it_grows_into_the_idle_gpus_once_the_growth_pays_for_the_restart() -> None:
    cell = e_on_one_gpu()
    assert cell.tick("t1", 1, now_s=PAYS_AT - 1.0) == []
    out = cell.tick("t2", 2, now_s=PAYS_AT + 1.0)
    stop, start = out
    assert isinstance(stop, Preempted) and stop.task == "e"
    assert "resized from 1 to 4 GPUs on v100" in stop.why
    assert LINEAR.format(k2=4) in stop.why
    assert isinstance(start, Placement) and start.node == "v100" and len(start.gpus) == 4
    rec = cell.tasks["e"]
    assert rec.request.num_gpu == 4 and rec.preemptions == 1 and rec.moves == 1


def test_learned_scaling_decides_and_a_class_that_does_not_scale_waits_longer() -> None:
    """Taught 1.05x from 1 to 4 GPUs, 'e' saves only ``1 - 1/1.05`` of what is left:
    it grows after ``120 / (0.05/1.05)`` = 2,520 s of running, not 160 s."""
    cell = e_on_one_gpu()
    for k, rate in ((1, 10.0), (4, 10.5)):
        assert cell.speeds.observe("resnet", k, "V100M16", rate)
    cell.speed_seq += 2
    gain = 1.0 - 10.0 / 10.5
    pays = E_STARTS + NEED_S / gain
    assert cell.tick("t1", 1, now_s=PAYS_AT + 1.0) == []
    assert cell.tick("t2", 2, now_s=pays - 1.0) == []
    stop, _ = cell.tick("t3", 3, now_s=pays + 1.0)
    assert isinstance(stop, Preempted) and "1.05x as fast on 4 as on 1" in stop.why
    assert "learned: p50 of 1 measurement on 4 GPUs" in stop.why


def test_it_does_not_grow_while_a_task_waits_nor_past_its_maximum() -> None:
    cell = e_on_one_gpu(elastic=(1, 2))
    assert queued(submit(cell, "queued", 4, E_STARTS + 1.0, name="other"))
    assert cell.tick("t1", 1, now_s=PAYS_AT + 100.0) == []  # 'queued' waits for 4
    cell.end(TaskEnded("c/queued", "queued"), now_s=PAYS_AT + 150.0)  # cancelled
    assert "queued" not in cell.queue
    _, start = cell.tick("t2", 2, now_s=PAYS_AT + 200.0)
    assert isinstance(start, Placement) and len(start.gpus) == 2  # its maximum, not 4


def test_a_guaranteed_task_starts_smaller_but_is_never_stopped_to_grow() -> None:
    cell = e_on_one_gpu(qos="guaranteed")
    assert cell.tick("t1", 1, now_s=PAYS_AT + 3600.0) == []
    assert cell.tasks["e"].request.num_gpu == 1


def test_a_task_that_changed_lately_waits_for_the_change_guard() -> None:
    cell = e_on_one_gpu(elastic=(1, 4))
    cell.tasks["e"].moves = 1  # it changed model when it started
    assert cell.tick("t1", 1, now_s=E_STARTS + CHANGE_GUARD_S - 1.0) == []
    assert len(cell.tick("t2", 2, now_s=E_STARTS + CHANGE_GUARD_S + 1.0)) == 2


def test_a_restored_cell_grows_the_same_task_at_the_same_tick() -> None:
    cell = e_on_one_gpu()
    assert cell.tick("t1", 1, now_s=PAYS_AT - 1.0) == []
    nodes = [(n, cell.node_record(n)) for n in cell.nodes]
    tasks = [(t, cell.task_record(t)) for t in cell.tasks]
    assert cell.task_record("e")["elastic"] == [1, 4]
    again = Cell.restore("c", SCHED, cell.meta_record(), nodes, tasks)
    assert again.tasks["e"].meta.elastic == (1, 4)
    ours, theirs = (c.tick("t2", 2, now_s=PAYS_AT + 1.0) for c in (cell, again))
    assert ours == theirs and len(ours) == 2


def test_the_skipped_passes_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_grows_due`` is derived: a cell that looks at every tick grows at the same one."""
    def every_tick(self: Cell, cause: str) -> list[object]:
        self._grows_due = None
        return grow(self, cause)

    grow = Cell._grow_elastic
    memo, fresh = e_on_one_gpu(), e_on_one_gpu()
    monkeypatch.setattr(cell_module.Cell, "_grow_elastic", grow)
    times = [E_STARTS + 30.0 * k for k in range(1, 12)]
    got_memo = [memo.tick(f"t{k}", k, now_s=t) for k, t in enumerate(times, 1)]
    monkeypatch.setattr(cell_module.Cell, "_grow_elastic", every_tick)
    got_fresh = [fresh.tick(f"t{k}", k, now_s=t) for k, t in enumerate(times, 1)]
    assert got_memo == got_fresh
    assert [bool(o) for o in got_memo].index(True) == next(
        k for k, t in enumerate(times) if t > PAYS_AT)


def test_the_pure_rules() -> None:
    assert list(smaller_counts(4, (1, 4))) == [3, 2, 1]
    assert list(smaller_counts(8, (2, 4))) == [4, 3, 2]  # never above the maximum
    assert list(smaller_counts(4, ())) == []
    assert saving_s(100.0, 4.0) == 75.0 and saving_s(100.0, 1.0) == 0.0
    assert saving_s(100.0, 0.5) == 0.0
    book = SpeedBook({"V100M16": 1.0, "K80": 0.2})
    assert scaling(book, "c", "V100M16", 2, 4) == (2.0, LINEAR.format(k2=4))
    book.observe("c", 2, "V100M16", 6.0)
    assert scaling(book, "c", "V100M16", 2, 4)[0] == 2.0  # 4 GPUs never seen
    book.observe("c", 4, "V100M16", 9.0)
    factor, basis = scaling(book, "c", "V100M16", 2, 4)
    assert factor == 1.5 and basis.startswith("learned")


def test_a_meta_refuses_an_empty_or_upside_down_range() -> None:
    with pytest.raises(ValueError, match="elastic range"):
        TaskMeta(elastic=(3, 2))
    with pytest.raises(ValueError, match="elastic range"):
        TaskMeta(elastic=(0, 2))


# ---- shrinking when others wait (Cell._shrink_for) -------------------------------------
#
# 'e' (elastic 1-4, no declared runtime) runs on all 4 GPUs of the V100 from E_STARTS;
# 'w', a fixed 2-GPU task, arrives ``ran`` seconds later. Its reservation is e's expected
# end, ``default_duration_s`` (3,600 s) after e started: it waits ``3600 - ran``. Shrinking
# e to 2 GPUs costs e, at the linear prior (2x as fast on 4 as on 2), the rest of its run
# once more (taken as long as it ran, ``ran``) plus a restart: ``ran + 60``. The shrink
# pays when ``3600 - ran >= 2 (ran + 60)``, that is up to ``ran`` = 1,160 s.
SHRINK_UP_TO = (3600.0 - SIZE_PREEMPT_GAIN * RESTART_S) / (1.0 + SIZE_PREEMPT_GAIN)


def e_on_four_gpus(elastic: tuple[int, ...] = (1, 4), qos: str = "burstable",
                   priority: int = 0) -> Cell:
    cell = Cell("c", SCHED)
    cell.add_node(NodeAdded("n", "v100", 32000, 131072, 4, "V100M16"), now_s=0.0)
    (e,) = cell.submit(TaskArrived("a/e", TaskRequest("e", 1000, 1024, 4, 1000)), None,
                       TaskMeta("team", qos=qos, name="resnet", elastic=elastic,
                                priority=priority), now_s=E_STARTS)
    assert isinstance(e, Placement) and len(e.gpus) == 4
    return cell


def test_a_waiting_task_takes_gpus_an_elastic_task_gives_back_when_that_pays() -> None:
    assert SHRINK_UP_TO == 1160.0
    cell = e_on_four_gpus()
    stop, resized, placed = submit(cell, "w", 2, E_STARTS + SHRINK_UP_TO, name="other")
    assert isinstance(stop, Preempted) and stop.task == "e"
    assert stop.why == ("resized from 4 to 2 GPUs on v100 for task w, which waits 41 min "
                        "otherwise: 2.00x as fast on 4 as on 2 GPUs of V100M16 ("
                        + LINEAR.format(k2=4) + "); costs 20 min")
    assert stop.by_task == "w"
    assert isinstance(resized, Placement) and resized.task == "e"
    assert resized.node == "v100" and resized.gpus == (0, 1)
    assert isinstance(placed, Placement) and placed.task == "w" and placed.gpus == (2, 3)
    rec = cell.tasks["e"]
    assert rec.request.num_gpu == 2 and rec.preemptions == 1 and rec.moves == 1


def test_past_the_boundary_the_waiting_task_waits() -> None:
    cell = e_on_four_gpus()
    assert queued(submit(cell, "w", 2, E_STARTS + SHRINK_UP_TO + 1.0, name="other"))
    assert cell.tasks["e"].request.num_gpu == 4


def test_learned_scaling_makes_a_badly_scaling_class_give_its_gpus_cheaply() -> None:
    """Taught that the class runs only 1.2x as fast on 4 GPUs as on 2, e's shrink costs
    ``0.2 ran + 60``: at ``ran`` = 2,000 s (1,600 s of waiting against 2 x 460 s) it
    pays, where the linear prior (2 x 2,060 s) would not."""
    for learned in (False, True):
        cell = e_on_four_gpus()
        if learned:
            for k, rate in ((2, 10.0), (4, 12.0)):
                assert cell.speeds.observe("resnet", k, "V100M16", rate)
            cell.speed_seq += 2
        out = submit(cell, "w", 2, E_STARTS + 2000.0, name="other")
        if learned:
            assert isinstance(out[0], Preempted)
            assert "1.20x as fast on 4 as on 2 GPUs of V100M16 (learned" in out[0].why
            assert "costs 8 min" in out[0].why  # 460 s
            assert isinstance(out[-1], Placement) and out[-1].task == "w"
        else:
            assert queued(out)


@pytest.mark.parametrize(("kind", "elastic", "qos", "priority"), [
    ("its minimum", (3, 4), "burstable", 0),
    ("guaranteed", (1, 4), "guaranteed", 0),
    ("of a higher priority", (1, 4), "burstable", 1),
])
def test_no_shrink_below_the_minimum_of_a_guaranteed_task_or_a_higher_priority(
        kind: str, elastic: tuple[int, ...], qos: str, priority: int) -> None:
    cell = e_on_four_gpus(elastic, qos, priority)
    assert queued(submit(cell, "w", 2, E_STARTS + 100.0, name="other")), kind
    assert cell.tasks["e"].request.num_gpu == 4


def test_a_shrunk_task_is_not_changed_again_within_the_guard() -> None:
    cell = e_on_four_gpus()
    assert len(submit(cell, "w", 2, E_STARTS + 100.0, name="other")) == 3
    assert queued(submit(cell, "w2", 1, E_STARTS + 200.0, name="other"))  # e keeps 2
    assert cell.tasks["e"].request.num_gpu == 2
