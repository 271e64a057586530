"""Predicted run times in the service (issue 31): job names on the wire, the worker's
setting, what a placement says, and audit replay under the same setting.

A submission names its job with ``job_name`` (``TaskSubmitted`` version 3); the
worker's cell learns each finished run's time by tenant and job name, and with
``HETSCHED_PREDICT_RUNTIMES=1`` a task that declares no runtime gets a reservation
from its peers' runs, which its placement's reason states with its basis, the line
``hetsched explain`` prints. The setting is part of the decisions, so replay must be
given the same: the same log replays exactly with it and differs without it. The
worker's default predicts (hetsched's queue, issue 31), and each placement's reason carries
``PREDICTING_MARK`` when it does, so ``hetsched replay`` takes the setting from the log:
an older log, recorded without prediction and without the mark, replays as it ran.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.codec import encode
from schemas.events import (
    Envelope,
    Event,
    GpuSpec,
    NodeRegistered,
    TaskFinished,
    TaskPlaced,
    TaskSubmitted,
    TaskSubmittedV3,
    make_event,
)
from streams.adapter import apply, task_meta
from streams.audit.records import Record
from streams.commands.replay_run import _queue_config
from streams.core.cell import Cell
from streams.core.queue import PREDICTING_MARK, QueueConfig
from streams.profiles.service import service_scheduler
from streams.replay import replay
from streams.settings import WorkerSettings, flag

SCHED = service_scheduler("hetsched")
T0 = datetime(2026, 11, 29, tzinfo=UTC)
CELL = "cell-0"


def _env(payload: Event, t: float, seed: str) -> Envelope[Event]:
    return make_event(payload, source="test", occurred_at=T0 + timedelta(seconds=t), cell=CELL,
                      id_seed=seed)


def _node(name: str, gpus: int) -> Envelope[Event]:
    return _env(NodeRegistered(node_id=name, cpu_milli=64000, memory_mib=262144, gpus=[
        GpuSpec(index=i, uuid=f"GPU-{name}-{i}", model="A100", memory_mib=40960,
                fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=1555.0,
                power_limit_w=400.0) for i in range(gpus)]), 0.0, f"node/{name}")


def _submit(task: str, t: float, **extra: Any) -> Envelope[Event]:
    payload = TaskSubmittedV3.model_validate({
        "task_id": task, "tenant": "vision",
        "resources": {"gpu_count": 1, "cpu_milli": 1000, "memory_mib": 1024},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}},
        **extra})
    return _env(payload, t, f"submit/{task}")


def _log() -> list[Envelope[Event]]:
    """Three runs of vision's 'resnet50' (20, 30 and 40 minutes) end one after the other,
    then a fourth, declaring no runtime, is submitted."""
    log: list[Envelope[Event]] = [_node("n1", 2)]
    t = 1.0
    for i, minutes in enumerate((20, 30, 40)):
        log.append(_submit(f"r{i}", t, job_name="resnet50"))
        t += minutes * 60
        log.append(("finish", f"r{i}", t))  # type: ignore[arg-type]
        t += 1
    log.append(_submit("r3", t, job_name="resnet50"))
    return log


def _run(cell: Cell, log: list[Any]) -> tuple[list[Envelope[Event]], list[Envelope[Event]]]:
    """Feed ``log`` (a ("finish", task, t) entry is the node's report of the task's run):
    the inputs as the input log holds them, and the decisions."""
    inputs: list[Envelope[Event]] = []
    out: list[Envelope[Event]] = []
    runs: dict[str, TaskPlaced] = {}
    for item in log:
        if isinstance(item, tuple):
            _, task, t = item
            placed = runs[task]
            item = _env(TaskFinished(task_id=task, node_id=placed.node_id,
                                     decision_id=placed.decision_id, runtime_s=1.0),
                        t, f"finished/{task}")
        inputs.append(item)
        for d in apply(cell, item):
            out.append(d)
            if isinstance(d.payload, TaskPlaced):
                runs[d.payload.task_id] = d.payload
    return inputs, out


def test_a_named_submission_reaches_the_cell_with_its_job_name():
    env = _submit("r0", 1.0, job_name="resnet50")
    assert env.version == 3 and task_meta(env.payload).name == "resnet50"
    plain = TaskSubmitted.model_validate({
        "task_id": "r0", "tenant": "vision", "resources": {"gpu_count": 1},
        "executor": {"kind": "process", "argv": ["train"]}})
    assert task_meta(plain).name == ""  # versions 1 and 2: no name, the class level answers


def test_with_predicted_runtimes_the_placement_says_what_was_predicted_and_from_what():
    cell = Cell(CELL, SCHED, QueueConfig(predict_runtimes=True))
    _, decisions = _run(cell, _log())
    last = decisions[-1].payload
    assert isinstance(last, TaskPlaced) and last.task_id == "r3"
    assert "predicted 30 min (p50 of 3 past runs of tenant vision's 'resnet50')" in \
        last.reason.message


def test_without_the_setting_the_same_log_places_without_a_prediction():
    _, decisions = _run(Cell(CELL, SCHED), _log())
    last = decisions[-1].payload
    assert isinstance(last, TaskPlaced) and "predicted" not in last.reason.message


def test_replay_reproduces_a_predicting_worker_only_with_the_same_setting():
    config = QueueConfig(predict_runtimes=True)
    log, decided = _run(Cell(CELL, SCHED, config), _log())
    inputs = [Record("hetsched.input-log", 0, i, None, CELL.encode(), encode(e))
              for i, e in enumerate(log)]
    decisions = [Record("hetsched.decisions", 0, i, None, CELL.encode(), encode(d))
                 for i, d in enumerate(decided)]

    assert replay(inputs, decisions, SCHED, config=config).ok
    without = replay(inputs, decisions, SCHED)
    assert not without.ok and without.mismatches >= 1


@pytest.mark.parametrize(("raw", "value"), [("", True), ("1", True), ("TRUE", True),
                                             ("on", True), ("0", False), ("no", False)])
def test_the_worker_setting_reads_yes_and_no(monkeypatch, raw, value):
    monkeypatch.setenv("HETSCHED_PREDICT_RUNTIMES", raw)
    assert WorkerSettings.from_env().predict_runtimes is value


def test_a_bad_setting_stops_with_the_variable_and_the_value_named(monkeypatch):
    monkeypatch.setenv("HETSCHED_PREDICT_RUNTIMES", "maybe")
    with pytest.raises(SystemExit, match="HETSCHED_PREDICT_RUNTIMES='maybe': expected"):
        flag("HETSCHED_PREDICT_RUNTIMES")


def _decision_records(predict: bool) -> list[Record]:
    _, decided = _run(Cell(CELL, SCHED, QueueConfig(predict_runtimes=predict)), _log())
    return [Record("hetsched.decisions", 0, i, None, CELL.encode(), encode(d))
            for i, d in enumerate(decided)]


def test_every_placement_of_a_predicting_queue_carries_the_mark_and_no_other_does():
    for predict in (True, False):
        _, decided = _run(Cell(CELL, SCHED, QueueConfig(predict_runtimes=predict)), _log())
        placed = [d.payload for d in decided if isinstance(d.payload, TaskPlaced)]
        assert len(placed) == 4
        assert {PREDICTING_MARK in p.reason.metrics for p in placed} == {predict}


@pytest.mark.parametrize("predict", [True, False])
def test_replay_takes_the_queue_setting_from_the_log(monkeypatch, predict):
    monkeypatch.delenv("HETSCHED_PREDICT_RUNTIMES", raising=False)
    assert _queue_config(_decision_records(predict)).predict_runtimes is predict


def test_the_setting_given_to_replay_overrides_the_log(monkeypatch):
    monkeypatch.setenv("HETSCHED_PREDICT_RUNTIMES", "0")
    assert _queue_config(_decision_records(True)).predict_runtimes is False
    monkeypatch.setenv("HETSCHED_PREDICT_RUNTIMES", "1")
    assert _queue_config(_decision_records(False)).predict_runtimes is True


def test_a_log_without_placements_replays_with_the_worker_default(monkeypatch):
    monkeypatch.delenv("HETSCHED_PREDICT_RUNTIMES", raising=False)
    assert _queue_config([]).predict_runtimes is WorkerSettings.predict_runtimes is True
