"""One scheduling cell: cluster state, the tasks it knows, and its pending queue. Pure.

The service runs one ``Cell`` per cell of the input log. A cell wraps the
core's ``ClusterState`` and ``step`` with what a long-running scheduler needs
and the bare core does not keep:

* **Task records**: every task submitted to the cell, with an opaque ``spec``
  (whatever the caller needs to emit full decisions, e.g. the submission's
  executor) and its status (``queued``, ``running``, ``done``). Knowing done
  tasks makes a re-delivered submission a no-op instead of a second placement.
* **Pending queue**: a task that does not fit now but could fit later waits,
  in submission order, and is retried when capacity may have appeared (a task
  ended, a node was added or became healthy, a tick). A new submission is
  tried at once (backfill), so small tasks do not wait behind a big one. Issue
  7 replaces this FIFO by fair share with priorities; it lives here alone.
* **Records for persistence**: ``node_record``/``task_record``/``meta_record``
  are small JSON-able dicts with sequence numbers, and ``Cell.restore``
  rebuilds an identical cell from them (same node order, so the same
  tie-breaks and the same decisions as a cell that never restarted).
  ``dirty_nodes``/``dirty_tasks`` say which records changed since the caller
  last saved them.

No I/O, no clock, no unordered iteration: replaying the same inputs gives the
same outcomes, which audit replay relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.core.decisions import Placement, Unschedulable
from streams.core.events import NodeAdded, NodeHealthChanged, TaskArrived, TaskEnded
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import Scheduler, place
from streams.core.state import ClusterState
from streams.core.step import MAX_GPUS_PER_NODE, evolve, step

QUEUED, RUNNING, DONE = "queued", "running", "done"


@dataclass(frozen=True, slots=True)
class Refused:
    """The task cannot be placed now; ``resolvable`` False: never in this cell."""

    unschedulable: Unschedulable
    resolvable: bool


@dataclass(frozen=True, slots=True)
class Stopped:
    """A running task was cancelled: the executor must stop it; its resources are free."""

    task: str
    node: str
    reason: str


Outcome = Placement | Refused | Stopped
"""What a cell input led to, in order; the adapter turns each into one decision event."""


@dataclass(slots=True)
class TaskRecord:
    task: str
    seq: int
    request: TaskRequest
    spec: Any
    status: str
    node: str | None = None
    gpus: tuple[int, ...] = ()
    place_seq: int = -1


@dataclass(slots=True)
class NodeRecord:
    seq: int
    added: NodeAdded
    healthy: bool
    extra: Any


class Cell:
    """See the module docstring. Mutable: each method changes the cell in place."""

    def __init__(self, name: str, scheduler: Scheduler) -> None:
        self.name = name
        self.scheduler = scheduler
        self.state = ClusterState()
        self.nodes: dict[str, NodeRecord] = {}
        self.tasks: dict[str, TaskRecord] = {}
        self.queue: dict[str, None] = {}  # insertion-ordered set: FIFO of queued task ids
        self.task_seq = 0
        self.place_seq = 0
        self.tick_seq = -1
        self.dirty_nodes: set[str] = set()
        self.dirty_tasks: set[str] = set()

    # ---- inputs --------------------------------------------------------------------

    def add_node(self, event: NodeAdded, extra: Any = None) -> list[Outcome]:
        """A node registered. Re-registration of a known node marks it healthy again."""
        known = self.nodes.get(event.node)
        if known is not None:
            return self.set_health(NodeHealthChanged(event.event_id, event.node, True))
        problems = _node_problems(event)
        if problems:
            return []  # invalid inventory: nothing to decide (the adapter logs it)
        self.state, _ = step(self.state, event, self.scheduler)
        self.nodes[event.node] = NodeRecord(len(self.nodes), event, True, extra)
        self.dirty_nodes.add(event.node)
        return self._drain(event.event_id)

    def set_health(self, event: NodeHealthChanged) -> list[Outcome]:
        """A node became unhealthy (drained, failed, left) or healthy again."""
        rec = self.nodes.get(event.node)
        if rec is None or rec.healthy == event.healthy:
            return []
        self.state, _ = step(self.state, event, self.scheduler)
        rec.healthy = event.healthy
        self.dirty_nodes.add(event.node)
        return self._drain(event.event_id) if event.healthy else []

    def submit(self, event: TaskArrived, spec: Any) -> list[Outcome]:
        """A task was submitted: place it now, queue it, or refuse it for good."""
        req = event.request
        if req.task in self.tasks:
            return []  # re-delivered or repeated submission: already decided
        rec = TaskRecord(req.task, self.task_seq, req, spec, QUEUED)
        self.task_seq += 1
        self.tasks[req.task] = rec
        self.dirty_tasks.add(req.task)
        self.state, decisions = step(self.state, event, self.scheduler)
        decision = decisions[0]
        if isinstance(decision, Placement):
            self._mark_running(rec, decision)
            return [decision]
        assert isinstance(decision, Unschedulable)
        resolvable = self._could_ever_fit(req)
        if resolvable:
            self.queue[req.task] = None
        else:
            rec.status = DONE
        return [Refused(decision, resolvable)]

    def end(self, event: TaskEnded, reason: str = "") -> list[Outcome]:
        """A task finished, failed or was cancelled: free it, then retry the queue."""
        rec = self.tasks.get(event.task)
        if rec is None or rec.status == DONE:
            return []
        out: list[Outcome] = []
        if rec.status == QUEUED:
            del self.queue[event.task]
        else:
            node = rec.node or ""
            self.state, _ = step(self.state, event, self.scheduler)
            if event.cancelled:
                out.append(Stopped(event.task, node, reason or "cancelled"))
        rec.status, rec.node, rec.gpus = DONE, None, ()
        self.dirty_tasks.add(event.task)
        return out + self._drain(event.event_id)

    def tick(self, event_id: str, seq: int) -> list[Outcome]:
        """A clock tick: retry the queue. Ticks at or below the last seq are repeats."""
        if seq <= self.tick_seq:
            return []
        self.tick_seq = seq
        return self._drain(event_id)

    # ---- queue ---------------------------------------------------------------------

    def _drain(self, cause: str) -> list[Outcome]:
        """Place queued tasks in FIFO order; a shape that failed is not retried this pass."""
        out: list[Outcome] = []
        failed: set[tuple[Any, ...]] = set()
        for task in list(self.queue):
            rec = self.tasks[task]
            key = rec.request.key
            if key in failed:
                continue
            res = place(self.state, self.scheduler, rec.request)
            if res.node < 0:
                failed.add(key)
                continue
            req = rec.request
            decision = Placement(
                decision_id=f"{cause}/{task}", cause_id=cause, task=task,
                node=self.state.node_names[res.node], gpus=res.gpus,
                share_milli=req.gpu_milli if res.gpus else 0, cpu_milli=req.cpu_milli,
                memory_mib=req.memory_mib, fractional=req.fractional, reason=res.reason,
            )
            self.state = evolve(self.state, decision)
            del self.queue[task]
            self._mark_running(rec, decision)
            out.append(decision)
        return out

    def _mark_running(self, rec: TaskRecord, decision: Placement) -> None:
        rec.status, rec.node, rec.gpus = RUNNING, decision.node, decision.gpus
        rec.place_seq = self.place_seq
        self.place_seq += 1
        self.dirty_tasks.add(rec.task)

    def _could_ever_fit(self, req: TaskRequest) -> bool:
        """True if some node of the cell could host ``req`` when empty and healthy."""
        s, n = self.state, self.state.n
        ok = (s.cpu_cap[:n] >= req.cpu_milli) & (s.mem_cap[:n] >= req.memory_mib)
        if req.num_gpu:
            ok &= s.gpu_count[:n] >= req.num_gpu
            if req.gpu_models:
                ids = [s.model_ids[m] for m in req.gpu_models if m in s.model_ids]
                ok &= np.isin(s.model[:n], np.array(ids, np.int64))
        return bool(ok.any())

    # ---- views ---------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """What a router needs to pick this cell: models, free whole GPUs, queue length."""
        s, n = self.state, self.state.n
        models: dict[str, dict[str, int]] = {}
        for i in range(n):
            count = int(s.gpu_count[i])
            if not count or s.model[i] < 0:
                continue
            entry = models.setdefault(s.model_names[int(s.model[i])], {"gpus": 0, "free": 0,
                                                                      "max_per_node": 0})
            entry["gpus"] += count
            entry["max_per_node"] = max(entry["max_per_node"], count)
            if s.healthy[i]:
                entry["free"] += int((s.gpu_free[i, :count] == MILLI_PER_GPU).sum())
        return {"nodes": n, "models": dict(sorted(models.items())), "queued": len(self.queue)}

    # ---- persistence ---------------------------------------------------------------

    def node_record(self, node: str) -> dict[str, Any]:
        rec = self.nodes[node]
        a = rec.added
        return {"seq": rec.seq, "event_id": a.event_id, "cpu_milli": a.cpu_milli,
                "memory_mib": a.memory_mib, "gpu_count": a.gpu_count, "gpu_model": a.gpu_model,
                "healthy": rec.healthy, "extra": rec.extra}

    def task_record(self, task: str) -> dict[str, Any]:
        rec = self.tasks[task]
        r = rec.request
        out: dict[str, Any] = {"seq": rec.seq, "status": rec.status}
        if rec.status != DONE:
            out["request"] = [r.cpu_milli, r.memory_mib, r.num_gpu, r.gpu_milli,
                              list(r.gpu_models), r.input_node]
            out["spec"] = rec.spec
        if rec.status == RUNNING:
            out.update(node=rec.node, gpus=list(rec.gpus), place_seq=rec.place_seq)
        return out

    def meta_record(self) -> dict[str, Any]:
        return {"task_seq": self.task_seq, "place_seq": self.place_seq,
                "tick_seq": self.tick_seq, "arrivals": self.state.arrivals}

    @classmethod
    def restore(cls, name: str, scheduler: Scheduler, meta: Mapping[str, Any] | None,
                nodes: Iterable[tuple[str, Mapping[str, Any]]],
                tasks: Iterable[tuple[str, Mapping[str, Any]]]) -> Cell:
        """Rebuild a cell from its records (any order in; sequence order applied)."""
        cell = cls(name, scheduler)
        for node, r in sorted(nodes, key=lambda kv: kv[1]["seq"]):
            added = NodeAdded(r["event_id"], node, r["cpu_milli"], r["memory_mib"],
                              r["gpu_count"], r["gpu_model"])
            cell.state = evolve(cell.state, added)
            if not r["healthy"]:
                cell.state.set_health(cell.state.node_index[node], False)
            cell.nodes[node] = NodeRecord(r["seq"], added, r["healthy"], r["extra"])
        records = sorted(tasks, key=lambda kv: kv[1]["seq"])
        for task, r in records:
            if r["status"] == DONE:
                req = TaskRequest(task, 0, 0)
                cell.tasks[task] = TaskRecord(task, r["seq"], req, None, DONE)
                continue
            cpu, mem, num_gpu, milli, models, input_node = r["request"]
            req = TaskRequest(task, cpu, mem, num_gpu, milli, tuple(models), input_node)
            rec = TaskRecord(task, r["seq"], req, r["spec"], r["status"])
            cell.tasks[task] = rec
            if r["status"] == QUEUED:
                cell.queue[task] = None
        running = [(t, r) for t, r in records if r["status"] == RUNNING]
        for task, r in sorted(running, key=lambda kv: kv[1]["place_seq"]):
            rec = cell.tasks[task]
            rec.status, rec.node, rec.gpus = RUNNING, r["node"], tuple(r["gpus"])
            rec.place_seq = r["place_seq"]
            cell.state.allocate(rec.request, cell.state.node_index[r["node"]], rec.gpus)
        if meta:
            cell.task_seq = meta["task_seq"]
            cell.place_seq = meta["place_seq"]
            cell.tick_seq = meta["tick_seq"]
            cell.state.arrivals = meta["arrivals"]
        return cell


def _node_problems(event: NodeAdded) -> list[str]:
    problems = []
    if min(event.cpu_milli, event.memory_mib, event.gpu_count) < 0:
        problems.append("negative capacity")
    if event.gpu_count > MAX_GPUS_PER_NODE:
        problems.append(f"more than {MAX_GPUS_PER_NODE} GPUs")
    if event.gpu_count and not event.gpu_model:
        problems.append("GPUs without a model")
    return problems
