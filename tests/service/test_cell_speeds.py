"""The cell learns how fast a class of task runs on a GPU model from its runs' progress
(``TaskUsage`` v2), one measurement per run, and keeps it across a restore (issue 35)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from service_builders import at, finished, node, tick, with_cell

from schemas import encode
from schemas.events import (
    Envelope,
    NodeFailed,
    TaskPlaced,
    TaskPreempted,
    TaskProgress,
    TaskSubmittedV3,
    TaskUsage,
    TaskUsageV2,
    make_event,
)
from streams.adapter import apply
from streams.core.cell import Cell
from streams.profiles.service import service_scheduler

SCHED = service_scheduler("hetsched")
CELL = "cell-0"


def submitted(task_id: str, name: str | None, gpus: int = 1, share: int = 1000,
              t: float = 10.0) -> Envelope[Any]:
    payload = TaskSubmittedV3.model_validate({
        "task_id": task_id, "tenant": "team-a", "job_name": name,
        "resources": {"gpu_count": gpus, "gpu_share_milli": share, "cpu_milli": 1000,
                      "memory_mib": 1024},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 600.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}},
    })
    return with_cell(make_event(payload, source="cli/test", occurred_at=at(t),
                                id_seed=f"task/{task_id}"), CELL)


def usage(task_id: str, node_id: str, rate: float | None, t: float,
          units: float = 100.0) -> Envelope[Any]:
    payload: TaskUsage = TaskUsageV2(
        task_id=task_id, node_id=node_id, window_s=30.0, gpus=[],
        progress=TaskProgress(units=units, rate_per_s=rate))
    return with_cell(make_event(payload, source=f"executor/{node_id}", occurred_at=at(t),
                                id_seed=f"usage/{task_id}/{t}"), CELL)


def cell_with_one_v100() -> Cell:
    cell = Cell(CELL, SCHED)
    apply(cell, with_cell(node("node-v100", "V100M32", 4), CELL))
    return cell


def place(cell: Cell, env: Envelope[Any]) -> TaskPlaced:
    (decision,) = apply(cell, env)
    assert isinstance(decision.payload, TaskPlaced)
    return decision.payload


def test_a_finished_run_teaches_its_last_rate_on_its_model() -> None:
    cell = cell_with_one_v100()
    p = place(cell, submitted("r1", "resnet50"))
    for t, rate in ((40.0, 3.0), (70.0, 9.0), (100.0, 10.0)):  # warm-up, then steady
        assert apply(cell, usage("r1", p.node_id, rate, t)) == []
    assert cell.speeds.measured("resnet50", 1, "V100M32") is None  # the run goes on
    apply(cell, with_cell(finished("r1", p.node_id, p.decision_id, t=130.0), CELL))
    got = cell.speeds.measured("resnet50", 1, "V100M32")
    assert got is not None and (got.rate, got.observations) == (10.0, 1)
    assert cell.tasks["r1"].speed_runs == ((0, "resnet50", 1, "V100M32", 10.0),)


def test_what_teaches_nothing() -> None:
    cell = cell_with_one_v100()
    anon = place(cell, submitted("anon", None))
    frac = place(cell, submitted("frac", "bert", share=500, t=11.0))
    other = place(cell, submitted("other", "gpt", t=12.0))
    apply(cell, usage("anon", anon.node_id, 5.0, 40.0))  # no name, no class
    apply(cell, usage("frac", frac.node_id, 5.0, 41.0))  # a share's rate
    apply(cell, usage("other", "node-elsewhere", 5.0, 42.0))  # not where it runs
    apply(cell, usage("ghost", anon.node_id, 5.0, 43.0))  # no such task
    apply(cell, usage("other", other.node_id, None, 44.0))  # a count without a rate
    for task, p in (("anon", anon), ("frac", frac), ("other", other)):
        apply(cell, with_cell(finished(task, p.node_id, p.decision_id, t=90.0), CELL))
    assert cell.speed_seq == 0
    assert all(not rec.speed_runs for rec in cell.tasks.values())


def test_a_run_stopped_by_its_nodes_failure_teaches_too() -> None:
    cell = cell_with_one_v100()
    p = place(cell, submitted("r1", "resnet50"))
    apply(cell, usage("r1", p.node_id, 7.0, 40.0))
    failed = make_event(NodeFailed(node_id=p.node_id, reason="operator"),
                        source="agent/x", occurred_at=at(50.0), id_seed="fail")
    apply(cell, with_cell(failed, CELL))
    got = cell.speeds.measured("resnet50", 1, "V100M32")
    assert got is not None and got.rate == 7.0


def _records(cell: Cell) -> tuple[Any, Any, Any]:
    nodes = {n: cell.node_record(n) for n in cell.nodes}
    tasks = {t: cell.task_record(t) for t in cell.tasks}
    return orjson.loads(orjson.dumps([nodes, tasks, cell.meta_record()]))


def test_what_was_learned_and_a_running_tasks_last_rate_survive_a_restore() -> None:
    live = cell_with_one_v100()
    p1 = place(live, submitted("r1", "resnet50"))
    apply(live, usage("r1", p1.node_id, 10.0, 40.0))
    apply(live, with_cell(finished("r1", p1.node_id, p1.decision_id, t=60.0), CELL))
    p2 = place(live, submitted("r2", "resnet50", t=61.0))
    apply(live, usage("r2", p2.node_id, 12.0, 90.0))

    nodes, tasks, meta = _records(live)
    back = Cell.restore(CELL, SCHED, meta, reversed(list(nodes.items())),
                        reversed(list(tasks.items())))
    assert back.speed_seq == live.speed_seq == 1
    assert back.tasks["r2"].run_rate == live.tasks["r2"].run_rate == ("V100M32", 1, 12.0)
    end = with_cell(finished("r2", p2.node_id, p2.decision_id, t=120.0), CELL)
    assert apply(back, end) == apply(live, end)
    for cell in (live, back):
        got = cell.speeds.measured("resnet50", 1, "V100M32")
        assert got is not None and (got.rate, got.observations) == (11.0, 2)
    assert back.task_record("r2") == live.task_record("r2")
    assert back.task_record("r1") == live.task_record("r1")


# ---- replay: random streams of progress reports and finishes -----------------------------

Op = tuple[str, int, float]
"""(what, which, a rate): 'submit' a new task (of class ``which % 2``), a 'usage'
report or the 'finish' of the ``which``-th running task (modulo their number), or a
clock 'tick' (when running tasks may move to a faster model, ``Cell._move_to_faster``).
Operations are a minute apart, so a task that ran a few of them may move."""


def _play(cell: Cell, ops: list[Op], start: int, placed: dict[str, TaskPlaced]) -> list[bytes]:
    out: list[bytes] = []
    for i, (what, which, rate) in enumerate(ops, start):
        running = sorted(placed)
        t = 10.0 + 60.0 * i
        if what == "submit":
            env = submitted(f"t{i}", ("resnet50", "bert")[which % 2], gpus=1 + which % 2,
                            t=t)
        elif what == "tick":
            env = with_cell(tick(i + 1, t), CELL)
        elif not running:
            continue
        elif what == "usage":
            task = running[which % len(running)]
            env = usage(task, placed[task].node_id, rate, t)
        else:
            p = placed.pop(running[which % len(running)])
            env = with_cell(finished(p.task_id, p.node_id, p.decision_id, t=t,
                                     seed=f"{i}/"), CELL)
        for d in apply(cell, env):
            if isinstance(d.payload, TaskPlaced):
                placed[d.payload.task_id] = d.payload
            elif isinstance(d.payload, TaskPreempted):
                placed.pop(d.payload.task_id, None)
            out.append(encode(d))
    return out


def _estimates(cell: Cell) -> list[Any]:
    return [(c, n, m, e.rate if (e := cell.speeds.estimate(c, n, m)) else None)
            for c in ("resnet50", "bert") for n in (1, 2) for m in ("V100M32", "T4")]


ops_strategy = st.lists(
    st.tuples(st.sampled_from(["submit", "usage", "usage", "finish", "tick"]),
              st.integers(0, 7),
              st.floats(min_value=0.01, max_value=1e3, allow_nan=False)),
    max_size=30)


MOVING: list[Op] = [
    ("finish", 4, 10.0), ("tick", 5, 40.0), ("tick", 2, 1.0), ("usage", 4, 40.0),
    ("usage", 2, 1.0), ("usage", 6, 40.0), ("tick", 0, 1.0), ("tick", 4, 40.0),
    ("submit", 3, 10.0), ("submit", 1, 1.0), ("usage", 2, 40.0), ("finish", 0, 40.0),
    ("usage", 7, 40.0), ("usage", 3, 1.0), ("tick", 7, 1.0), ("finish", 7, 40.0)]
"""A stream in which a task moves to the faster model (at its 15th operation, a tick):
random streams rarely line up a learned class, a slower GPU taken, a faster one freed and
minutes of running, so the property is also checked on this one, cut before the move."""


def _cluster() -> Cell:
    cell = Cell(CELL, SCHED)
    apply(cell, with_cell(node("node-v100", "V100M32", 2), CELL))
    apply(cell, with_cell(node("node-t4", "T4", 2, t=1.0), CELL))
    return cell


def test_the_moving_stream_moves_a_task() -> None:
    decisions = [orjson.loads(d) for d in _play(_cluster(), MOVING, 0, {})]
    moves = [d["payload"] for d in decisions if d["type"] == "TaskPreempted"]
    assert [m["reason"]["message"].split(";")[0] for m in moves] == [
        "moved from T4 to the faster V100M32"]


@settings(max_examples=100, deadline=None)
@given(ops_strategy, st.integers(0, 30))
@example(MOVING, 12)
def test_a_cell_restored_anywhere_learns_and_decides_like_one_never_restarted(
    ops: list[Op], cut: int
) -> None:
    cluster = _cluster
    live, placed_live = cluster(), {}
    reference = _play(live, ops, 0, placed_live)

    first, placed = cluster(), {}
    got = _play(first, ops[:cut], 0, placed)
    nodes, tasks, meta = _records(first)
    second = Cell.restore(CELL, SCHED, meta, nodes.items(), tasks.items())
    assert _estimates(second) == _estimates(first)
    got += _play(second, ops[cut:], cut, placed)
    assert got == reference
    assert _estimates(second) == _estimates(live)
    learned = {(c, n) for c, n, _, rate in _estimates(live) if rate is not None}
    taught = {(r[1], r[2]) for rec in live.tasks.values() for r in rec.speed_runs}
    assert learned == taught  # no estimate for a class and count no run taught


def test_the_dashboard_and_state_show_what_was_learned_against_the_fastest_model() -> None:
    from schemas.gpu_catalog import get_model
    from streams.web import cell_view

    cell = cell_with_one_v100()
    apply(cell, with_cell(node("node-t4", "T4", 2, t=1.0), CELL))
    assert cell_view(cell)["speeds"] == []
    p = place(cell, submitted("r1", "resnet50", gpus=2))
    apply(cell, usage("r1", p.node_id, 10.0, 40.0))
    apply(cell, with_cell(finished("r1", p.node_id, p.decision_id, t=60.0), CELL))
    (row,) = cell_view(cell)["speeds"]
    t4, v100 = get_model("T4"), get_model("V100M32")
    catalog_ratio = ((t4.fp16_tflops * t4.mem_bandwidth_gbps)
                     / (v100.fp16_tflops * v100.mem_bandwidth_gbps)) ** 0.5
    assert p.node_id == "node-t4"  # packing: the 2-GPU node fills exactly
    assert row["class"] == "resnet50" and row["gpus"] == 2
    assert row["models"]["T4"] == {"speed": round(catalog_ratio, 4), "rate": 10.0, "runs": 1,
                                   "basis": "p50 of 1 measurement"}
    v100_row = row["models"]["V100M32"]
    assert (v100_row["speed"], v100_row["runs"]) == (1.0, 0)
    assert v100_row["rate"] == pytest.approx(10.0 / catalog_ratio)
    assert v100_row["basis"] == "filled from the catalog's figures for V100M32"


def test_the_next_task_of_a_class_goes_to_the_model_it_is_known_to_run_faster_on() -> None:
    cell = cell_with_one_v100()
    apply(cell, with_cell(node("node-t4", "T4", 2, t=1.0), CELL))
    first = place(cell, submitted("r1", "resnet50", gpus=2))
    assert first.node_id == "node-t4"  # nothing known: packing fills the 2-GPU node
    assert "speed" not in first.reason.message
    apply(cell, usage("r1", first.node_id, 10.0, 40.0))
    apply(cell, with_cell(finished("r1", first.node_id, first.decision_id, t=60.0), CELL))

    unknown = place(cell, submitted("b1", "bert", gpus=2, t=61.0))
    assert unknown.node_id == "node-t4"  # another class: still nothing known
    second = place(cell, submitted("r2", "resnet50", gpus=2, t=62.0))
    assert second.node_id == "node-v100"  # the T4 is busy: the reason is what is tested
    assert second.reason.message.endswith(
        "speed: 2.3x as fast on V100M32 as on T4 for 'resnet50' (V100M32: filled from the "
        "catalog's figures for V100M32; T4: p50 of 1 measurement)")
    assert second.reason.metrics["speed_vs_fastest"] == 1.0


def test_with_both_models_free_a_learned_class_takes_the_faster_one() -> None:
    cell = cell_with_one_v100()
    apply(cell, with_cell(node("node-t4", "T4", 2, t=1.0), CELL))
    first = place(cell, submitted("r1", "resnet50", gpus=2))
    apply(cell, usage("r1", first.node_id, 10.0, 40.0))
    apply(cell, with_cell(finished("r1", first.node_id, first.decision_id, t=60.0), CELL))
    again = place(cell, submitted("r2", "resnet50", gpus=2, t=61.0))
    assert again.node_id == "node-v100"  # packing alone would take the T4 again


def test_a_class_measured_faster_on_the_smaller_gpu_stays_there() -> None:
    """Measurements beat the catalog: a class measured at 10/s on the T4 and 4/s on the
    V100 goes back to the T4 (the V100's catalog figure says 2.3x the other way)."""
    cell = cell_with_one_v100()
    apply(cell, with_cell(node("node-t4", "T4", 2, t=1.0), CELL))
    t4 = place(cell, submitted("r1", "odd", gpus=2))
    v100 = place(cell, submitted("r2", "odd", gpus=2, t=11.0))
    assert (t4.node_id, v100.node_id) == ("node-t4", "node-v100")
    for p, rate, t in ((t4, 10.0, 40.0), (v100, 4.0, 41.0)):
        apply(cell, usage(p.task_id, p.node_id, rate, t))
        apply(cell, with_cell(finished(p.task_id, p.node_id, p.decision_id, t=t + 10), CELL))
    third = place(cell, submitted("r3", "odd", gpus=2, t=70.0))
    assert third.node_id == "node-t4"
    assert "2.5x as fast on T4 as on V100M32" in third.reason.message
