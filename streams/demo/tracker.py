"""What the demo has seen: events read back from Kafka and the worker's state, folded.

The live view and the report read only this object. Event-time measurements
(queueing delay, completion time) use the envelopes' ``occurred_at`` of both
ends, so they are what the scheduler's log says, not when the demo happened to
read them. Cluster-wide gauges (allocation, fragmentation, queue) come from the
worker's ``/state`` polled once a second.

Two utilisations, on purpose. *Sampled* utilisation is what the simulated GPUs
run at (the GenAI curves of their tasks), scraped once a second from the
nodes' Prometheus endpoint: the ground truth. *Reported* utilisation is the
scheduler's view: the last ``GpuTelemetry`` of each GPU, which agents send
only on threshold crossings (ARCHITECTURE.md, event flow 1), so it is banded
and lags; the gap between the two is part of what the demo shows.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.topics import STATUS_EVENTS

MILLI = 1000


@dataclass
class Recent:
    """One line of the recent-decisions feed."""

    at: float
    kind: str
    task: str
    where: str
    reason: str


@dataclass
class Sample:
    """A once-a-second picture of the cluster (wall seconds since the replay began)."""

    t_s: float
    allocation: float
    utilisation: float
    reported_utilisation: float
    queue: int
    running: int
    fragmentation: float


def reason_of(payload: Any) -> str:
    """A short human reason for a decision: the code and the winner's top score terms."""
    kind = type(payload).__name__
    if kind == "TaskUnschedulable":
        why = "; ".join(r for v in payload.verdicts for r in v.reasons) or payload.message
        return ("queued: " if payload.resolvable else "refused: ") + why[:90]
    reason = getattr(payload, "reason", None)
    if reason is None:
        return ""
    text = reason.code
    if reason.candidates:
        terms = sorted(reason.candidates[0].terms.items(), key=lambda kv: -abs(kv[1]))[:2]
        text += " " + " ".join(f"{k}={v:.2f}" for k, v in terms)
    elif reason.message:
        text += f" {reason.message}"
    return text[:100]


def where_of(payload: Any) -> str:
    node = getattr(payload, "node_id", None) or getattr(payload, "to_node_id", None)
    gpus = getattr(payload, "gpus", None) or getattr(payload, "to_gpus", None) or []
    if not node:
        return "-"
    idx = ",".join(str(g.index) + (f"@{g.share_milli}m" if g.share_milli < MILLI else "")
                   for g in gpus)
    return f"{node}[{idx}]"


def _mean_pct(values: Iterable[float]) -> float:
    """Mean of percentages as a ratio 0..1 (0 when empty)."""
    vals = list(values)
    return sum(vals) / (100 * len(vals)) if vals else 0.0


@dataclass
class Tracker:
    started: float = field(default_factory=time.monotonic)
    submitted_at: dict[str, datetime] = field(default_factory=dict)
    placed_at: dict[str, datetime] = field(default_factory=dict)
    finished_at: dict[str, datetime] = field(default_factory=dict)
    decisions: Counter[str] = field(default_factory=Counter)
    tenants: dict[str, str] = field(default_factory=dict)
    recent: deque[Recent] = field(default_factory=lambda: deque(maxlen=12))
    telemetry: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)
    """(node, GPU) -> (utilisation %, temperature C) of its last ``GpuTelemetry``."""
    sampled: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)
    """(node, GPU) -> (utilisation %, temperature C) last scraped from the nodes."""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    queue: list[str] = field(default_factory=list)
    running: int = 0
    samples: list[Sample] = field(default_factory=list)
    stamps: dict[str, deque[float]] = field(default_factory=dict)

    # -- folding ----------------------------------------------------------------

    def note_submitted(self, task: str, tenant: str, at: datetime) -> None:
        self.submitted_at[task] = at
        self.tenants[task] = tenant
        self._stamp("submitted")

    def note_event(self, envelope: Any) -> None:
        """Fold one decoded envelope of the decisions, task-status or telemetry topic."""
        p, kind = envelope.payload, envelope.type
        if kind == "GpuTelemetry":
            self.telemetry[(p.node_id, p.gpu_index)] = (p.gpu_util_pct, p.temperature_c)
            return
        task = getattr(p, "task_id", "")
        if kind == "TaskFinished":
            self.finished_at.setdefault(task, envelope.occurred_at)
            self._stamp("finished")
        elif kind in STATUS_EVENTS:
            return  # an executor's report, not a decision (how a task ended: accounting)
        elif hasattr(p, "decision_id"):
            self.decisions[kind] += 1
            self._stamp("decisions")
            if kind in ("TaskPlaced", "TaskProbe"):
                self.placed_at.setdefault(task, envelope.occurred_at)
            self.recent.appendleft(Recent(time.monotonic(), kind, task, where_of(p),
                                          reason_of(p)))

    def note_state(self, state: dict[str, Any]) -> None:
        """Take the worker's ``/state``: nodes, queue and running tasks of its cells."""
        nodes, queue, running = [], [], 0
        for cell in state.get("cells", {}).values():
            nodes += cell.get("nodes", [])
            queue += cell.get("queue", [])
            running += len(cell.get("running", []))
        self.nodes, self.queue, self.running = nodes, queue, running
        self.samples.append(Sample(time.monotonic() - self.started, self.allocation(),
                                   self.utilisation(), self.reported_utilisation(),
                                   len(queue), running, self.fragmentation()))

    def note_gpus(self, sampled: dict[tuple[str, int], tuple[float, float]]) -> None:
        """Take one scrape of the nodes' GPUs: (node, GPU) -> (utilisation %, temperature C)."""
        if sampled:
            self.sampled = sampled

    def _stamp(self, what: str) -> None:
        self.stamps.setdefault(what, deque(maxlen=5000)).append(time.monotonic())

    # -- gauges -----------------------------------------------------------------

    def rate(self, what: str, window_s: float = 10.0) -> float:
        """Events per second over the last ``window_s`` wall seconds."""
        now = time.monotonic()
        stamps = self.stamps.get(what, ())
        return sum(1 for s in stamps if now - s <= window_s) / window_s

    def gpu_milli(self) -> list[int]:
        return [u for n in self.nodes for u in n["gpus_used_milli"]]

    def allocation(self) -> float:
        used = self.gpu_milli()
        return sum(used) / (MILLI * len(used)) if used else 0.0

    def utilisation(self) -> float:
        """Mean sampled GPU utilisation (0..1) over the cluster's GPUs.

        Falls back to the reported one until the first scrape has come in.
        """
        if not self.sampled:
            return self.reported_utilisation()
        return _mean_pct(u for u, _ in self.sampled.values())

    def reported_utilisation(self) -> float:
        """Mean utilisation (0..1) of the GPUs' last ``GpuTelemetry`` (the scheduler's view)."""
        return _mean_pct(u for u, _ in self.telemetry.values())

    def utilisation_by_model(self) -> dict[str, float]:
        """model -> mean sampled utilisation (0..1) of its GPUs."""
        model_of = {n["node"]: n["model"] for n in self.nodes}
        per: dict[str, list[float]] = {}
        for (node, _), (util, _) in self.sampled.items():
            per.setdefault(model_of.get(node, "?"), []).append(util)
        return {m: _mean_pct(v) for m, v in sorted(per.items())}

    def fragmentation(self) -> float:
        """Share of free GPU capacity stranded on partly used GPUs (0..1).

        Free milli on a GPU that already runs a fraction cannot take a
        whole-GPU task; the higher this share, the more fragmented the cluster.
        """
        used = self.gpu_milli()
        free = sum(MILLI - u for u in used)
        stranded = sum(MILLI - u for u in used if 0 < u < MILLI)
        return stranded / free if free else 0.0

    def by_model(self) -> dict[str, tuple[int, int, float]]:
        """model -> (nodes, GPUs, allocated share 0..1)."""
        out: dict[str, list[int]] = {}
        for n in self.nodes:
            row = out.setdefault(n["model"], [0, 0, 0])
            row[0] += 1
            row[1] += len(n["gpus_used_milli"])
            row[2] += sum(n["gpus_used_milli"])
        return {m: (r[0], r[1], r[2] / (MILLI * r[1]) if r[1] else 0.0)
                for m, r in sorted(out.items())}

    def queue_delays_s(self) -> list[float]:
        return [(self.placed_at[t] - s).total_seconds()
                for t, s in self.submitted_at.items() if t in self.placed_at]

    def completion_s(self) -> list[float]:
        return [(self.finished_at[t] - s).total_seconds()
                for t, s in self.submitted_at.items() if t in self.finished_at]
