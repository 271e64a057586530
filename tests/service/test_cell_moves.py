"""A running task moves to an idle GPU of a faster model when the move saves more than it
costs (issue 35, "scheduling by speed"; ``Cell._move_to_faster``).

The cell below has a T4 node (2 GPUs) and a V100 node (4 GPUs), and its speed book has
measured class 'resnet50' at 10 units/s on the T4 and 40 on the V100: a move from the T4
saves ``1 - 10/40 = 0.75`` of what is left. Nothing is predicted, so what is left is
taken to be as long as the task ran, and the move pays once ``0.75 x ran`` reaches two
restarts (``SIZE_PREEMPT_GAIN x RESTART_S`` = 120 s): after 160 s of running.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from service_builders import at, finished, node, task, tick, with_cell

from schemas.codec import encode
from schemas.events import (
    Envelope,
    TaskPlaced,
    TaskPreempted,
    TaskProgress,
    TaskSubmittedV3,
    TaskUsageV2,
    make_event,
)
from schemas.topics import DECISIONS, INPUT_LOG
from streams.adapter import apply
from streams.audit.explain import render, timeline
from streams.audit.records import Record
from streams.core import cell as cell_module
from streams.core.cell import Cell
from streams.profiles.service import service_scheduler

SCHED = service_scheduler("hetsched")
CELL = "cell-0"
X_STARTS = 61.0
PAYS_AT = X_STARTS + 160.0  # 0.75 x 160 s = 120 s = SIZE_PREEMPT_GAIN x RESTART_S


LOGS: dict[int, list[Record]] = {}
"""The input and decision records of the cells a test asked to log (by ``id``)."""


def feed(cell: Cell, env: Envelope[Any]) -> list[Envelope[Any]]:
    """``apply``, also logging the input and its decisions as the topics hold them when
    the test keeps a log of this cell (what ``hetsched explain`` reads)."""
    out = apply(cell, env)
    log = LOGS.get(id(cell))
    if log is not None:
        log.append(Record(INPUT_LOG, 0, len(log), None, CELL.encode(), encode(env)))
        log.extend(Record(DECISIONS, 0, len(log), None, CELL.encode(), encode(d))
                   for d in out)
    return out


def submitted(task_id: str, name: str, gpus: int, t: float, qos: str = "burstable",
              cpu: int = 1000, models: tuple[str, ...] = ()) -> Envelope[Any]:
    payload = TaskSubmittedV3.model_validate({
        "task_id": task_id, "tenant": "team-a", "job_name": name, "qos": qos,
        "resources": {"gpu_count": gpus, "gpu_share_milli": 1000, "cpu_milli": cpu,
                      "memory_mib": 1024, "gpu_models": list(models)},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 600.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}},
    })
    return with_cell(make_event(payload, source="cli/test", occurred_at=at(t),
                                id_seed=f"task/{task_id}"), CELL)


def placed(cell: Cell, env: Envelope[Any]) -> TaskPlaced:
    (decision,) = feed(cell, env)
    assert isinstance(decision.payload, TaskPlaced), decision.payload
    return decision.payload


def end(cell: Cell, p: TaskPlaced, t: float) -> None:
    feed(cell, with_cell(finished(p.task_id, p.node_id, p.decision_id, t=t), CELL))


def teach(cell: Cell, name: str, t4_rate: float, v100_rate: float, t: float) -> None:
    """One 2-GPU run of class ``name`` on each model, reporting these rates (the first
    goes to the T4, which it fills exactly, while nothing is known of the class)."""
    on_t4 = placed(cell, submitted(f"{name}-1", name, 2, t))
    on_v100 = placed(cell, submitted(f"{name}-2", name, 2, t + 1))
    assert (on_t4.node_id, on_v100.node_id) == ("node-t4", "node-v100")
    for p, rate in ((on_t4, t4_rate), (on_v100, v100_rate)):
        usage = TaskUsageV2(task_id=p.task_id, node_id=p.node_id, window_s=30.0, gpus=[],
                            progress=TaskProgress(units=100.0, rate_per_s=rate))
        feed(cell, with_cell(make_event(usage, source=f"executor/{p.node_id}",
                                         occurred_at=at(t + 2), id_seed=f"u/{p.task_id}"),
                              CELL))
        end(cell, p, t + 3)


def taught_cell(log: list[Record] | None = None) -> Cell:
    """T4 x2 and V100M32 x4; 'resnet50' measured at 10/s on the T4 and 40 on the V100;
    every input and decision goes to ``log`` when one is given."""
    cell = Cell(CELL, SCHED)
    if log is not None:
        LOGS[id(cell)] = log
    feed(cell, with_cell(node("node-t4", "T4", 2), CELL))
    feed(cell, with_cell(node("node-v100", "V100M32", 4, t=1.0), CELL))
    teach(cell, "resnet50", 10.0, 40.0, 10.0)
    return cell


def x_on_the_t4_while_the_v100_frees(qos: str = "burstable", log: list[Record] | None = None
                                     ) -> tuple[Cell, TaskPlaced]:
    """The taught cell; 'x' (resnet50, 2 GPUs) started on the T4 at 61 s because a 4-GPU
    task of a class nothing is known of held the V100, which ended at 100 s."""
    cell = taught_cell(log)
    big = placed(cell, submitted("big", "other", 4, 60.0))
    x = placed(cell, submitted("x", "resnet50", 2, X_STARTS, qos))
    assert (big.node_id, x.node_id) == ("node-v100", "node-t4")
    end(cell, big, 100.0)
    return cell, x


def test_a_task_moves_to_the_faster_model_once_the_move_saves_two_restarts() -> None:
    cell, _ = x_on_the_t4_while_the_v100_frees()
    assert feed(cell, with_cell(tick(1, PAYS_AT - 0.5), CELL)) == []  # saves 119.6 s
    stop, start = (d.payload for d in feed(cell, with_cell(tick(2, PAYS_AT), CELL)))
    assert isinstance(stop, TaskPreempted) and isinstance(start, TaskPlaced)
    assert (stop.task_id, stop.node_id, stop.by_task_id, stop.requeue) == (
        "x", "node-t4", "x", True)
    assert stop.reason.message == ("moved from T4 to the faster V100M32; queued again after "
                                   "160 s of progress")
    assert (start.task_id, start.node_id) == ("x", "node-v100")
    assert "4x as fast on V100M32 as on T4 for 'resnet50'" in start.reason.message
    rec = cell.tasks["x"]
    assert (rec.moves, rec.preemptions, rec.progress_s) == (1, 1, 160.0)
    assert feed(cell, with_cell(tick(3, PAYS_AT + 600), CELL)) == []  # on the fastest


def test_no_move_while_a_task_waits() -> None:
    """The idle V100 is the queue's first: here a task that may only run on a T4 waits
    (it cannot use the V100), and 'x' stays where it is."""
    cell, _ = x_on_the_t4_while_the_v100_frees()
    (refused,) = feed(cell, with_cell(task("t4-only", 2, models=("T4",), t=150.0), CELL))
    assert refused.type == "TaskUnschedulable"
    assert feed(cell, with_cell(tick(1, PAYS_AT + 3600), CELL)) == []
    assert cell.tasks["x"].moves == 0


@pytest.mark.parametrize(("ran_s", "moves"), [(1199.0, False), (1200.0, True)])
def test_a_task_that_changed_model_changes_again_only_after_twenty_minutes(
        ran_s: float, moves: bool) -> None:
    """The bound on model changes (``CHANGE_GUARD_S``): 'x', as if it had changed model
    when it started on the T4, may move again once it ran 20 min there."""
    cell, _ = x_on_the_t4_while_the_v100_frees()
    assert cell_module.CHANGE_GUARD_S == 1200.0
    cell.tasks["x"].moves = 1
    out = feed(cell, with_cell(tick(1, X_STARTS + ran_s), CELL))
    assert [d.type for d in out] == (["TaskPreempted", "TaskPlaced"] if moves else [])


def test_a_guarded_task_is_looked_at_again_when_its_guard_ends() -> None:
    """A pass that found only a guarded task remembers when the guard ends, not never."""
    cell, _ = x_on_the_t4_while_the_v100_frees()
    cell.tasks["x"].moves = 1
    assert feed(cell, with_cell(tick(1, X_STARTS + 600.0), CELL)) == []
    assert [d.type for d in feed(cell, with_cell(tick(2, X_STARTS + 1200.0), CELL))] == [
        "TaskPreempted", "TaskPlaced"]


def test_a_guaranteed_task_is_never_moved() -> None:
    cell, _ = x_on_the_t4_while_the_v100_frees(qos="guaranteed")
    assert feed(cell, with_cell(tick(1, PAYS_AT + 3600), CELL)) == []


def test_a_class_without_speeds_is_never_moved() -> None:
    """Nothing learned of 'other': its run on the slower model is left alone."""
    cell = Cell(CELL, SCHED)
    feed(cell, with_cell(node("node-t4", "T4", 2), CELL))
    feed(cell, with_cell(node("node-v100", "V100M32", 4, t=1.0), CELL))
    fill = placed(cell, submitted("fill", "other", 4, 5.0))
    on_t4 = placed(cell, submitted("o", "other", 2, 6.0))
    assert on_t4.node_id == "node-t4"
    end(cell, fill, 7.0)
    assert feed(cell, with_cell(tick(1, 36_000.0), CELL)) == []


def test_a_move_survives_a_restore_and_the_restored_cell_decides_alike() -> None:
    live, _ = x_on_the_t4_while_the_v100_frees()
    assert feed(live, with_cell(tick(1, PAYS_AT - 0.5), CELL)) == []  # remembers when
    records = orjson.loads(orjson.dumps([
        {n: live.node_record(n) for n in live.nodes},
        {t: live.task_record(t) for t in live.tasks}, live.meta_record()]))
    nodes, tasks, meta = records
    back = Cell.restore(CELL, SCHED, meta, nodes.items(), tasks.items())
    move = with_cell(tick(2, PAYS_AT), CELL)
    assert feed(back, move) == feed(live, move)
    assert back.task_record("x") == live.task_record("x")
    assert live.task_record("x")["moves"] == 1


@pytest.mark.parametrize(("declared_s", "moves"), [(209.0, False), (210.0, True)])
def test_with_a_declared_runtime_what_is_left_is_the_declared_rest(declared_s: float,
                                                                   moves: bool) -> None:
    """At 111 s 'x' ran 50 s (a move would save 37.5 s by what it ran): declared 210 s,
    160 s are left, and 0.75 x 160 = 120 s pays; declared 209 s, 119.25 s does not."""
    cell, _ = x_on_the_t4_while_the_v100_frees()
    rec = cell.tasks["x"]
    rec.meta = dataclasses.replace(rec.meta, expected_s=declared_s)
    out = feed(cell, with_cell(tick(1, X_STARTS + 50.0), CELL))
    assert [d.type for d in out] == (["TaskPreempted", "TaskPlaced"] if moves else [])


# ---- least attained service on the fastest models (Cell._swap_for_least_attained) ------
#
# 'flat' is measured at 10/s on the T4 and 11 on the V100 (it keeps 0.91 of its speed
# on the T4), 'resnet50' at 10 and 40 (0.25), 'steep' at 4 and 40 (0.1). 'o' takes two
# V100 GPUs at 70 s, a task pinned to the V100 the other two, and 'x' (resnet50) the
# T4 at 1,000 s. Both run 2 GPUs, so a swap needs o's GPU-seconds, 2 (t - 70), to be
# at least twice x's plus a restart, 2 x (2 (t - 1000) + 120): until t = 1,810 s.
# These tests check that rule alone: the work-rate swaps (below) are turned off.


@pytest.fixture
def no_work_rate_swaps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Cell, "_swap_for_work_rate", lambda self, cause: [])


def young_x_on_the_t4_and_old_o_on_the_v100(o_class: str = "flat",
                                            o_cpu: int = 1000) -> Cell:
    cell = taught_cell()
    teach(cell, "flat", 10.0, 11.0, 20.0)
    teach(cell, "steep", 4.0, 40.0, 30.0)
    o = placed(cell, submitted("o", o_class, 2, 70.0, cpu=o_cpu))
    pinned = placed(cell, submitted("pinned", "other", 2, 71.0, models=("V100M32",)))
    x = placed(cell, submitted("x", "resnet50", 2, 1000.0))
    assert (o.node_id, pinned.node_id, x.node_id) == ("node-v100", "node-v100", "node-t4")
    return cell


def swap_tick(cell: Cell, t: float) -> list[Any]:
    """The decisions of the swap pass's tick at ``t``."""
    return [d.payload for d in feed(cell, with_cell(tick(cell_module.SWAP_EVERY_TICKS, t),
                                                    CELL))]


def assert_x_and_o_swapped(out: list[Any]) -> None:
    """'x' left the T4 for the V100 and 'o' the V100 for the T4, both stopped first."""
    assert [(type(d).__name__, d.task_id, d.node_id) for d in out] == [
        ("TaskPreempted", "x", "node-t4"), ("TaskPreempted", "o", "node-v100"),
        ("TaskPlaced", "x", "node-v100"), ("TaskPlaced", "o", "node-t4")]


@pytest.mark.usefixtures("no_work_rate_swaps")
@pytest.mark.parametrize(("t", "swaps"), [(1810.0, True), (1811.0, False)])
def test_the_younger_task_takes_the_faster_model_from_a_much_older_one(
        t: float, swaps: bool) -> None:
    cell = young_x_on_the_t4_and_old_o_on_the_v100()
    out = swap_tick(cell, t)
    if not swaps:
        assert out == []
        return
    assert_x_and_o_swapped(out)
    assert out[0].reason.message.startswith(
        "swapped with o: from T4 to V100M32, as it has had less service; queued again "
        "after 810 s")
    assert out[1].reason.message.startswith(
        "swapped with x: from V100M32 to T4, as it has had more service")
    assert (cell.tasks["x"].moves, cell.tasks["o"].moves) == (1, 1)


def test_no_swap_when_the_older_task_would_lose_a_larger_share_than_the_younger_gains(
) -> None:
    """'o' of class 'steep' keeps 0.1 of its speed on the T4, 'x' gains from 0.25: the
    cluster would do less work for the age order (and the work-rate swap agrees)."""
    cell = young_x_on_the_t4_and_old_o_on_the_v100(o_class="steep")
    assert feed(cell, with_cell(tick(cell_module.SWAP_EVERY_TICKS, 1100.0), CELL)) == []


@pytest.mark.usefixtures("no_work_rate_swaps")
def test_swaps_are_looked_for_every_swap_every_ticks_ticks_only() -> None:
    cell = young_x_on_the_t4_and_old_o_on_the_v100()
    every = cell_module.SWAP_EVERY_TICKS
    assert feed(cell, with_cell(tick(every + 1, 1100.0), CELL)) == []
    assert len(feed(cell, with_cell(tick(2 * every, 1101.0), CELL))) == 4


@pytest.mark.usefixtures("no_work_rate_swaps")
def test_a_task_that_changed_model_lately_is_not_swapped() -> None:
    cell = young_x_on_the_t4_and_old_o_on_the_v100()
    cell.tasks["o"].moves = 1  # as if it had moved to the V100 when it started at 70 s
    every = cell_module.SWAP_EVERY_TICKS
    assert feed(cell, with_cell(tick(every, 1269.0), CELL)) == []  # o ran 1,199 s there
    assert len(feed(cell, with_cell(tick(2 * every, 1270.0), CELL))) == 4


def test_a_swap_one_side_of_which_finds_no_place_stops_nothing() -> None:
    """'o' needs more CPU than the T4 node has: x cannot get its V100 GPUs by a swap."""
    cell = young_x_on_the_t4_and_old_o_on_the_v100(o_cpu=100_000)
    assert feed(cell, with_cell(tick(cell_module.SWAP_EVERY_TICKS, 1100.0), CELL)) == []
    assert (cell.tasks["x"].node, cell.tasks["o"].node) == ("node-t4", "node-v100")
    assert cell.tasks["x"].preemptions == cell.tasks["o"].preemptions == 0


# ---- the cluster's work rate (Cell._swap_for_work_rate) ---------------------------------
#
# Now 'x' (resnet50, 0.25 of its speed on the T4) is the older task: it took the T4 at
# 70 s while two pinned tasks held the V100, and 'o' (flat, 0.91 on the T4) waited and
# took the V100 when the first pinned task ended, at 1,000 s. Least attained service
# keeps them where they are; the cluster's work rate rises by (1 - 0.25) - (1 - 10/11)
# = 0.659 of a GPU if they swap, and the swap pays once 0.659 times the time both are
# likely to run still (as long as the younger 'o' ran) reaches two restarts, twice
# (``SIZE_PREEMPT_GAIN x 2 x RESTART_S`` = 240 s): at 1,000 + 364.14 s.
RATE_GAIN = 0.75 - (1.0 - 10.0 / 11.0)
RATE_PAYS_AT = 1000.0 + 240.0 / RATE_GAIN


def old_x_on_the_t4_and_young_o_on_the_v100(o_class: str = "flat",
                                            x_models: tuple[str, ...] = (),
                                            o_models: tuple[str, ...] = ()) -> Cell:
    cell = taught_cell()
    teach(cell, "flat", 10.0, 11.0, 20.0)
    teach(cell, "steep", 4.0, 40.0, 30.0)
    first = placed(cell, submitted("pinned-1", "other", 2, 60.0, models=("V100M32",)))
    placed(cell, submitted("pinned-2", "other", 2, 61.0, models=("V100M32",)))
    assert placed(cell, submitted("x", "resnet50", 2, 70.0,
                                  models=x_models)).node_id == "node-t4"
    (waits,) = feed(cell, submitted("o", o_class, 2, 500.0, models=o_models))
    assert waits.type == "TaskUnschedulable"
    out = feed(cell, with_cell(finished(first.task_id, first.node_id, first.decision_id,
                                        t=1000.0), CELL))
    assert [(d.type, d.payload.task_id, d.payload.node_id) for d in out] == [
        ("TaskPlaced", "o", "node-v100")]
    return cell


@pytest.mark.parametrize(("t", "swaps"), [(RATE_PAYS_AT + 0.05, True),
                                          (RATE_PAYS_AT - 0.05, False)])
def test_two_tasks_swap_models_when_the_work_rate_gained_pays_both_restarts(
        t: float, swaps: bool) -> None:
    cell = old_x_on_the_t4_and_young_o_on_the_v100()
    out = swap_tick(cell, t)
    if not swaps:
        assert out == []
        return
    assert_x_and_o_swapped(out)
    assert out[0].reason.message.startswith(
        "swapped with o: from T4 to V100M32, as the swap raises the cluster's work rate "
        "(+0.66 of a GPU's work); queued again after")
    assert (cell.tasks["x"].moves, cell.tasks["o"].moves) == (1, 1)


@pytest.mark.parametrize(("x_models", "o_models"), [(("T4",), ()), ((), ("V100M32",))])
def test_a_swap_never_takes_a_task_to_a_model_it_did_not_ask_for(
        x_models: tuple[str, ...], o_models: tuple[str, ...]) -> None:
    """The book fills a speed for every model of the cell, but a task that named its
    models runs on those only: pinned to the model it holds, it is not swapped (the
    swap above pays long before 36,000 s)."""
    cell = old_x_on_the_t4_and_young_o_on_the_v100(x_models=x_models, o_models=o_models)
    assert swap_tick(cell, 36_000.0) == []
    assert (cell.tasks["x"].node, cell.tasks["o"].node) == ("node-t4", "node-v100")


def test_a_work_rate_swap_is_not_undone() -> None:
    """Swapped back, the two would lose what the swap gained; least attained service
    does not swap them back either ('x' on the V100 is older, and 'o' would gain less
    on the V100 than 'x' would lose on the T4)."""
    cell = old_x_on_the_t4_and_young_o_on_the_v100()
    every = cell_module.SWAP_EVERY_TICKS
    assert len(feed(cell, with_cell(tick(every, RATE_PAYS_AT + 1.0), CELL))) == 4
    for k, t in enumerate((RATE_PAYS_AT + 1300.0, RATE_PAYS_AT + 36_000.0), start=2):
        assert feed(cell, with_cell(tick(k * every, t), CELL)) == []
    assert (cell.tasks["x"].node, cell.tasks["o"].node) == ("node-v100", "node-t4")


def test_no_work_rate_swap_when_the_cluster_would_do_less_work() -> None:
    """'o' of class 'steep' keeps 0.1 of its speed on the T4: it would lose 0.9 of a GPU
    where 'x' gains 0.75, however long both run."""
    cell = old_x_on_the_t4_and_young_o_on_the_v100(o_class="steep")
    assert feed(cell, with_cell(tick(cell_module.SWAP_EVERY_TICKS, 36_000.0), CELL)) == []


@pytest.mark.parametrize(("declared_s", "swaps"), [(560.0, False), (570.0, True)])
def test_a_declared_runtime_bounds_the_time_a_work_rate_swap_pays_over(
        declared_s: float, swaps: bool) -> None:
    """At 1,200 s 'o' ran 200 s: as long as that, the swap would not pay (132 s of work),
    but declared 570 s, 370 s are left, and 0.659 x 370 = 244 s pays; 560 s (360 left,
    237 s) does not."""
    cell = old_x_on_the_t4_and_young_o_on_the_v100()
    rec = cell.tasks["o"]
    rec.meta = dataclasses.replace(rec.meta, expected_s=declared_s)
    out = feed(cell, with_cell(tick(cell_module.SWAP_EVERY_TICKS, 1200.0), CELL))
    assert len(out) == (4 if swaps else 0)


def test_explain_tells_the_move_and_why_the_new_model() -> None:
    """What an operator reads: ``hetsched explain x`` on the topics of the run above."""
    log: list[Record] = []
    cell, _ = x_on_the_t4_while_the_v100_frees(log=log)
    try:
        assert "moved from" not in render("x", timeline(log, "x"))
        feed(cell, with_cell(tick(1, PAYS_AT), CELL))
        text = render("x", timeline(log, "x"))
    finally:
        del LOGS[id(cell)]
    assert "preempted  on node-t4 to move, back to the queue" in text
    assert "moved from T4 to the faster V100M32; queued again after 160 s of progress" in text
    assert "4x as fast on V100M32 as on T4 for 'resnet50'" in text
