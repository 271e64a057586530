"""The pure cell step: schema envelopes in, decision envelopes out, restartable from records."""

from __future__ import annotations

from typing import Any

import pytest
from service_builders import CLUSTER, TASK_MIX, at, finished, node, task, tick, with_cell

from schemas import encode
from schemas.events import (
    Envelope,
    NodeFailed,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskSubmitted,
    TaskUnschedulable,
    make_event,
)
from streams.adapter import _note_runs, apply
from streams.core.adapt.engine import is_kill_report, is_stale
from streams.core.cell import Cell, Preempted
from streams.core.decisions import Placement
from streams.profiles.service import service_scheduler

SCHED = service_scheduler("hetsched")


def _log() -> list[Envelope[Any]]:
    events = [node(n, m, g, t=i) for i, (n, m, g) in enumerate(CLUSTER)]
    events += [task(t, g, s, mdl, t=10 + i) for i, (t, g, s, mdl) in enumerate(TASK_MIX)]
    return [with_cell(e, "cell-0") for e in events]


def _run(cell: Cell, log: list[Envelope[Any]]) -> list[Envelope[Any]]:
    return [d for env in log for d in apply(cell, env)]


def test_a_mixed_workload_gets_one_decision_per_task_with_constraints_honoured():
    decisions = _run(Cell("cell-0", SCHED), _log())
    by_task = {d.payload.task_id: d.payload for d in decisions}
    assert len(decisions) == len(TASK_MIX) == len(by_task)
    placed = {t: p for t, p in by_task.items() if isinstance(p, TaskPlaced)}
    assert placed["t4-only"].node_id.startswith("node-t4")
    v100 = by_task["v100-2"]
    if isinstance(v100, TaskPlaced):
        assert v100.node_id == "node-v100-0" and len(v100.gpus) == 2
    else:
        assert v100.resolvable, "the V100 node exists, its GPUs are busy"
    assert placed["frac-1"].gpus[0].share_milli == 250
    assert len(placed["multi-4"].gpus) == 4
    h100 = by_task["h100-only"]
    assert isinstance(h100, TaskUnschedulable) and not h100.resolvable
    queued = [t for t, p in by_task.items() if isinstance(p, TaskUnschedulable) and p.resolvable]
    assert queued, "with 16 GPUs, two 8-GPU jobs after the others cannot both run"
    for env in decisions:
        assert env.cell == "cell-0" and env.payload.decision_id == env.event_id


def test_no_gpu_is_over_committed():
    decisions = _run(Cell("cell-0", SCHED), _log())
    used: dict[tuple[str, int], int] = {}
    for d in decisions:
        if isinstance(d.payload, TaskPlaced):
            for g in d.payload.gpus:
                key = (d.payload.node_id, g.index)
                used[key] = used.get(key, 0) + g.share_milli
    assert used and max(used.values()) <= 1000


def test_finishing_a_task_frees_capacity_and_places_the_queued_one():
    cell = Cell("cell-0", SCHED)
    decisions = _run(cell, _log())
    queued = next(d.payload.task_id for d in decisions
                  if isinstance(d.payload, TaskUnschedulable) and d.payload.resolvable)
    running = [d.payload for d in decisions if isinstance(d.payload, TaskPlaced)]
    after: list[Envelope[Any]] = []
    for i, p in enumerate(running):
        after += apply(cell, with_cell(finished(p.task_id, p.node_id, p.decision_id, t=100 + i),
                                       "cell-0"))
    assert queued in {d.payload.task_id for d in after if isinstance(d.payload, TaskPlaced)}


def test_a_tick_retries_the_queue_and_repeated_ticks_are_ignored():
    cell = Cell("cell-0", SCHED)
    _run(cell, _log())
    assert cell.queue
    assert apply(cell, tick(1, 200)) == []  # still does not fit
    assert apply(cell, tick(1, 201)) == [] and cell.tick_seq == 1


def test_a_repeated_submission_is_decided_once():
    cell = Cell("cell-0", SCHED)
    log = _log()
    first = _run(cell, log)
    assert _run(cell, log) == [] and first


def test_cancelling_a_running_task_stops_it_on_its_node():
    from schemas.events import TaskCancelled, make_event
    cell = Cell("cell-0", SCHED)
    decisions = _run(cell, _log())
    placed = next(d.payload for d in decisions if isinstance(d.payload, TaskPlaced))
    cancel = make_event(TaskCancelled(task_id=placed.task_id, reason="user"), source="cli",
                        occurred_at=decisions[0].occurred_at, cell="cell-0", id_seed="c")
    out = apply(cell, cancel)
    assert isinstance(out[0].payload, TaskPreempted) and out[0].payload.node_id == placed.node_id
    assert cell.state.allocation(placed.task_id) is None


def test_the_same_log_gives_the_same_bytes():
    a = [encode(d) for d in _run(Cell("cell-0", SCHED), _log())]
    b = [encode(d) for d in _run(Cell("cell-0", SCHED), _log())]
    assert a == b


def _save(cell: Cell, nodes: dict, tasks: dict) -> dict:
    for n in sorted(cell.dirty_nodes):
        nodes[n] = cell.node_record(n)
    for t in sorted(cell.dirty_tasks):
        tasks[t] = cell.task_record(t)
    cell.dirty_nodes.clear()
    cell.dirty_tasks.clear()
    return cell.meta_record()


@pytest.mark.parametrize("cut", [2, 5, 8, 11])
def test_a_cell_restored_from_its_records_decides_like_one_that_never_restarted(cut):
    log = _log()
    cell = Cell("cell-0", SCHED)
    reference = _run(cell, log)
    running = [d.payload for d in reference if isinstance(d.payload, TaskPlaced)]
    tail = [with_cell(finished(p.task_id, p.node_id, p.decision_id, t=100 + i), "cell-0")
            for i, p in enumerate(running)]
    reference += _run(cell, tail)

    nodes: dict = {}
    tasks: dict = {}
    first = Cell("cell-0", SCHED)
    got = _run(first, log[:cut])
    meta = _save(first, nodes, tasks)
    import orjson  # records go through JSON in the tables
    nodes, tasks, meta = orjson.loads(orjson.dumps([nodes, tasks, meta]))
    second = Cell.restore("cell-0", SCHED, meta, nodes.items(), tasks.items())
    got += _run(second, log[cut:] + tail)
    assert [encode(d) for d in got] == [encode(d) for d in reference]


def test_a_restored_cell_keeps_tasks_queued_again_behind_those_queued_before_them():
    """A failed node's tasks go back to the queue behind the tasks already waiting
    (queue order is push order within a tenant and priority), though their submission
    numbers are lower. A cell restored from its records put them back by submission, so
    after a restart it served them first where the running cell served them last
    (the short chaos run's export then replayed up to 42 decisions differently)."""
    log = [with_cell(e, "cell-0") for e in (
        node("n1", "A100", 2, t=0), *(task(f"t{i}", 1, t=1 + i) for i in range(4)))]
    failed = with_cell(make_event(NodeFailed(node_id="n1", reason="operator"),
                                  source="operator/test", occurred_at=at(10),
                                  id_seed="failed/n1"), "cell-0")
    joined = with_cell(node("n2", "A100", 1, t=20), "cell-0")

    cell = Cell("cell-0", SCHED)
    reference = _run(cell, [*log, failed, joined])
    placed = [d.payload.task_id for d in reference if isinstance(d.payload, TaskPlaced)]
    assert placed == ["t0", "t1", "t2"]  # t0, t1 queued again behind t2 and t3

    nodes: dict = {}
    tasks: dict = {}
    first = Cell("cell-0", SCHED)
    got = _run(first, [*log, failed])
    meta = _save(first, nodes, tasks)
    import orjson  # records go through JSON in the tables
    nodes, tasks, meta = orjson.loads(orjson.dumps([nodes, tasks, meta]))
    second = Cell.restore("cell-0", SCHED, meta, nodes.items(), tasks.items())
    assert [e.task for e in second.queue.ordered(second.now_s)] == [
        e.task for e in first.queue.ordered(first.now_s)] == ["t2", "t3", "t0", "t1"]
    got += _run(second, [joined])
    assert [encode(d) for d in got] == [encode(d) for d in reference]


def _preempt_scenario() -> tuple[Cell, Any, Any, Any]:
    """One T4 node, two best-effort tasks on it, a guaranteed task preempts one of them."""
    def sub(task_id: str, qos: str, t: float) -> Envelope[Any]:
        payload = TaskSubmitted.model_validate({
            "task_id": task_id, "tenant": "team-a", "qos": qos,
            "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024},
            "executor": {"kind": "simulated", "simulated": {
                "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}}})
        return make_event(payload, source="cli/test", occurred_at=at(t), cell="cell-0",
                          id_seed=f"kill/{task_id}")

    cell = Cell("cell-0", SCHED)
    apply(cell, with_cell(node("node-t4-0", "T4", 2), "cell-0"))
    first = [d.payload for t, s in (("be-1", 1.0), ("be-2", 2.0))
             for d in apply(cell, sub(t, "best_effort", s))]
    out = [d.payload for d in apply(cell, sub("urgent", "guaranteed", 3.0))]
    preempted, placed = out
    assert isinstance(preempted, TaskPreempted) and isinstance(placed, TaskPlaced)
    return cell, preempted, placed, {p.task_id: p for p in first}


def _status(payload: Any, t: float, seed: str) -> Envelope[Any]:
    return make_event(payload, source="executor/node-t4-0", occurred_at=at(t), cell="cell-0",
                      id_seed=seed)


def test_a_preempted_tasks_kill_report_is_absorbed_and_a_later_kill_of_its_rerun_ends_it():
    """The executor answers a preemption with TaskFailed(killed) under the preemption's
    id: that only confirms the stop (the task is queued again). A later kill of the
    task's next run is a real failure: it must free the run's GPU, not be taken for
    the preemption's confirmation."""
    cell, preempted, placed, _ = _preempt_scenario()
    victim = preempted.task_id
    ack = TaskFailed(task_id=victim, node_id=preempted.node_id,
                     decision_id=preempted.decision_id, reason="killed", exit_code=137)
    assert apply(cell, _status(ack, 4.0, "ack")) == []
    assert cell.tasks[victim].status == "queued"
    done = TaskFinished(task_id="urgent", node_id=placed.node_id,
                        decision_id=placed.decision_id, runtime_s=1.0)
    rerun = [d.payload for d in apply(cell, _status(done, 5.0, "done"))]
    assert [(type(p), p.task_id) for p in rerun] == [(TaskPlaced, victim)]
    killed = TaskFailed(task_id=victim, node_id=rerun[0].node_id,
                        decision_id=rerun[0].decision_id, reason="killed", exit_code=137)
    apply(cell, _status(killed, 6.0, "killed"))
    assert cell.tasks[victim].status == "done" and not cell.tasks[victim].ok
    assert cell.state.allocation(victim) is None


def test_a_preempted_runs_late_finish_is_stale_and_the_task_runs_again():
    """The run finished just before the executor got the preemption: its report is
    about a run the cell already stopped; the task stays queued for its next run."""
    cell, preempted, _, first = _preempt_scenario()
    victim = preempted.task_id
    late = TaskFinished(task_id=victim, node_id=preempted.node_id,
                        decision_id=first[victim].decision_id, runtime_s=1.0)
    assert apply(cell, _status(late, 4.0, "late")) == []
    assert cell.tasks[victim].status == "queued" and victim in cell.queue



def test_a_task_preempted_and_placed_again_by_one_input_keeps_its_new_run_current():
    """One input may preempt a task and place it again at once on another node (it was
    queued again and a node it fits is free: the mixed workload does it with shorter-
    first preemption). The run started last is the current one, so its finish must
    end the task. Noting the new run before the preemption marked it stale, and its
    finish was dropped: the task stayed running and its GPU booked for good (the
    end-to-end case: tests/timesched/test_service_sim_same.py)."""
    cell, preempted, _, _ = _preempt_scenario()
    victim = cell.tasks[preempted.task_id]
    again = Placement("run-2", "cause", victim.task, "node-t4-0", (1,), 1000, 1000, 1024,
                      False, None)
    stop = Preempted(victim.task, "node-t4-0", "other", 0.0)
    _note_runs(cell, [stop, again], ["kill-1", "run-2"], [None, victim.task])
    assert victim.spec["run"] == "run-2"
    assert "run-2" not in victim.spec.get("stale_runs", [])
    assert victim.spec["kills"][-1] == "kill-1"
    assert not is_stale(cell, victim.task, "run-2") and is_kill_report(cell, victim.task,
                                                                       "kill-1")
