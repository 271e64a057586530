"""A recorded placement run without Kafka: for the replay benchmark and the audit tests.

``record_run`` plays the worker: it appends each input envelope to a cell's
input log, steps the cell with ``streams.adapter.apply`` and appends the
decisions to the decisions topic, as records with topic, partition and offset
(each input in its own transaction, so offsets skip one for the commit marker,
as on the real topics). Finishes are generated from the placements, so tasks
come and go and the queue is exercised.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.codec import encode
from schemas.events import (
    Envelope,
    Event,
    GpuSpec,
    NodeRegistered,
    TaskFinished,
    TaskPlaced,
    TaskSubmitted,
    Tick,
    make_event,
)
from schemas.gpu_catalog import load_catalog
from schemas.topics import DECISIONS, INPUT_LOG
from streams.adapter import apply
from streams.audit.records import Record
from streams.core.cell import Cell
from streams.core.request import TaskRequest
from streams.core.scheduler import Scheduler

T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)


@dataclass
class Recording:
    """The two topics of a run, as records; ``inputs`` also as envelopes."""

    inputs: list[Record] = field(default_factory=list)
    decisions: list[Record] = field(default_factory=list)
    envelopes: list[Envelope[Any]] = field(default_factory=list)
    prefix: str = ""

    @property
    def records(self) -> list[Record]:
        return self.inputs + self.decisions


def node_event(name: str, cpu_milli: int, memory_mib: int, gpus: int, model: str | None,
               at: datetime) -> Envelope[Event]:
    spec = load_catalog().get(model or "")
    gpu_list = [GpuSpec(index=i, uuid=f"GPU-{name}-{i}", model=model or "unknown",
                        memory_mib=spec.memory_mib if spec else 16384,
                        fp32_tflops=spec.fp32_tflops if spec else 10.0,
                        fp16_tflops=spec.fp16_tflops if spec else 20.0,
                        mem_bandwidth_gbps=spec.mem_bandwidth_gbps if spec else 500.0,
                        power_limit_w=spec.tdp_w if spec else 250.0) for i in range(gpus)]
    payload = NodeRegistered(node_id=name, cpu_milli=cpu_milli, memory_mib=memory_mib,
                             pool="default", gpus=gpu_list)
    return make_event(payload, source=f"agent/{name}", occurred_at=at, id_seed=f"node/{name}")


def task_event(req: TaskRequest, at: datetime, tenant: str = "team-a") -> Envelope[Event]:
    payload = TaskSubmitted.model_validate({
        "task_id": req.task, "tenant": tenant,
        "resources": {"gpu_count": req.num_gpu,
                      "gpu_share_milli": req.gpu_milli if req.num_gpu else 1000,
                      "cpu_milli": req.cpu_milli, "memory_mib": req.memory_mib,
                      "gpu_models": list(req.gpu_models)},
        "executor": {"kind": "simulated", "simulated": {"duration_s": 60.0,
                                                        "gpu_util_pct": 50.0,
                                                        "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/bench", occurred_at=at, id_seed=f"task/{req.task}")


def finish_event(placed: TaskPlaced, at: datetime) -> Envelope[Event]:
    payload = TaskFinished(task_id=placed.task_id, node_id=placed.node_id,
                           decision_id=placed.decision_id, runtime_s=60.0)
    return make_event(payload, source=f"executor/{placed.node_id}", occurred_at=at,
                      id_seed=f"finished/{placed.task_id}")


def record_run(nodes: Iterable[tuple[str, int, int, int, str | None]],
               tasks: Sequence[TaskRequest], scheduler: Scheduler, *, cell: str = "cell-0",
               running_limit: int = 200, tick_every: int = 50,
               prefix: str = "", partition: int = 0) -> Recording:
    """Record a run: all nodes, then tasks; keep at most ``running_limit`` tasks running.

    ``partition``: the input-log and decisions partition the cell's records are on
    (several cells of one recording need their own, and distinct node and task names).
    """
    run = _Recorder(Cell(cell, scheduler), prefix, partition)
    at = T0
    for name, cpu, mem, gpus, model in nodes:
        run.feed(node_event(name, cpu, mem, gpus, model, at))
    running: list[TaskPlaced] = []
    for i, req in enumerate(tasks):
        at += timedelta(seconds=1)
        running += run.feed(task_event(req, at))
        while len(running) > running_limit:
            running += run.feed(finish_event(running.pop(0), at))
        if tick_every and i % tick_every == tick_every - 1:
            tick = make_event(Tick(seq=i, interval_s=5.0), source=f"ticker/{cell}",
                              occurred_at=at, cell=cell, id_seed=f"tick/{cell}/{i}")
            running += run.feed(tick)
    return run.recording


class _Recorder:
    def __init__(self, cell: Cell, prefix: str, partition: int = 0) -> None:
        self.cell = cell
        self.partition = partition
        self.recording = Recording(prefix=prefix)
        self.offsets = {INPUT_LOG: 0, DECISIONS: 0}

    def _append(self, topic: str, env: Envelope[Any]) -> Record:
        rec = Record(self.recording.prefix + topic, self.partition, self.offsets[topic],
                     int(env.occurred_at.timestamp() * 1000), self.cell.name.encode(),
                     encode(env))
        self.offsets[topic] += 1
        return rec

    def feed(self, env: Envelope[Any]) -> list[TaskPlaced]:
        """Append ``env`` to the input log, decide, append the decisions; return placements."""
        routed = env.model_copy(update={"cell": self.cell.name})
        self.recording.inputs.append(self._append(INPUT_LOG, routed))
        self.recording.envelopes.append(routed)
        decisions = apply(self.cell, routed)
        self.recording.decisions += [self._append(DECISIONS, d) for d in decisions]
        self.offsets[INPUT_LOG] += 1  # the transaction's commit marker
        if decisions:
            self.offsets[DECISIONS] += 1
        return [d.payload for d in decisions if isinstance(d.payload, TaskPlaced)]
