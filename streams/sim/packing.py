"""Packing mode of ``hetsched simulate``: the FGD/openb protocol (docs/packing-benchmark.md).

One run = one node list, one task list, one policy profile, one seed: tasks
arrive one by one on an empty cluster and are placed once or dropped, by the
same ``streams.core.scheduler.place`` the service runs. A task larger than
any node of its models is a gang (``streams.core.gang``): placed whole over
several nodes by the same ``gang.plan`` the cell runs, or dropped (openb has
none; other task lists may). After each arrival we record the arrived GPU
demand, the allocated milli-GPU and the cluster fragmentation, then bucket
them into the allocation-ratio curve (§5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from streams.core import gang
from streams.core.profile import get_profile
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import place
from streams.core.state import ClusterState
from streams.policies.fragmentation import TypicalTasks, frag_cache
from streams.profiles.compile import compile_profile
from streams.sim.traces import NodeSpec
from streams.sim.workload import build_workload


@dataclass(frozen=True, slots=True)
class CurvePoint:
    arrived_pct: int
    alloc_pct: float
    frag_ratio_pct: float


@dataclass
class RunResult:
    policy: str
    seed: int
    arrivals: int
    placed: int
    curve: list[CurvePoint]
    decisions: list[dict] | None = None
    latency_s: np.ndarray | None = field(default=None, repr=False)

    def at(self, pct: int) -> CurvePoint | None:
        return next((p for p in self.curve if p.arrived_pct == pct), None)


def new_state(nodes: Sequence[NodeSpec], ranks: Sequence[int] | None = None) -> ClusterState:
    """An empty cluster of ``nodes`` (name order), with the given tie-break ranks."""
    state = ClusterState(capacity=len(nodes), max_gpus=max(n.gpu_count for n in nodes) or 1)
    for i, n in enumerate(nodes):
        rank = None if ranks is None else ranks[i]
        state.add_node(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model or None, rank)
    return state


def _place_gang(state: ClusterState, task: TaskRequest,
                task_id: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Bind the whole gang where ``gang.plan`` puts it (its members, rank order), or
    nothing: no node's GPUs are held for a gang that does not fit all at once."""
    found = gang.plan(state, task)
    if found is None:
        return ()
    state.allocate_gang(task_id, task.cpu_milli, task.memory_mib, found.members)
    return found.members


def bucket_curve(arrived: np.ndarray, alloc: np.ndarray, frag: np.ndarray,
                 max_pct: int) -> list[CurvePoint]:
    """Mean per integer arrival percentage (neighbours within 1 if empty), rounded to 2."""
    out = []
    for x in range(max_pct + 1):
        sel = arrived == x
        if not sel.any():
            sel = np.abs(arrived - x) <= 1
        if not sel.any():
            continue
        out.append(CurvePoint(x, round(float(alloc[sel].mean()), 2),
                              round(float(frag[sel].mean()), 2)))
    return out


def run_packing(
    nodes: Sequence[NodeSpec],
    base: Sequence[TaskRequest],
    policy: str,
    seed: int,
    tune: float = 1.3,
    record_decisions: bool = False,
    record_latency: bool = False,
    typical: TypicalTasks | None = None,
    on_arrival: Callable[[int], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> RunResult:
    """Run the protocol once; see the module docstring.

    ``record_latency`` times each placement with ``clock`` (default
    ``time.perf_counter``; ``time.thread_time`` measures CPU time, which is what
    to compare on a shared machine).
    """
    import time

    clock = clock or time.perf_counter
    total_gpus = sum(n.gpu_count for n in nodes)
    workload = build_workload(base, len(nodes), total_gpus, tune, seed)
    typical = typical or TypicalTasks.from_tasks(base)
    state = new_state(nodes, workload.ranks)
    sched = compile_profile(get_profile(policy), {"typical": typical, "seed": seed})
    frags = frag_cache(state, typical)
    frags.refresh(state)
    n = state.n
    count = len(workload.arrivals)
    demand = np.zeros(count, np.int64)
    used = np.zeros(count, np.int64)
    frag_amount = np.zeros(count)
    latency = np.zeros(count) if record_latency else None
    decisions: list[dict] | None = [] if record_decisions else None
    a = u = placed = 0
    names = state.node_names
    for i, task in enumerate(workload.arrivals):
        state.arrivals = i
        t0 = clock() if latency is not None else 0.0
        res = place(state, sched, task, explain=False)
        if latency is not None:
            latency[i] = clock() - t0
        a += task.gpu_total_milli
        members: tuple[tuple[int, tuple[int, ...]], ...] = ()
        if res.node >= 0:
            state.allocate(task, res.node, res.gpus, task_id=f"{i}:{task.task}")
            placed += 1
            u += task.num_gpu * task.gpu_milli if res.gpus else 0
            frags.refresh(state, np.array([res.node]))
        elif task.num_gpu > 1 and gang.is_gang(state, task):
            members = _place_gang(state, task, f"{i}:{task.task}")
            if members:
                placed += 1
                u += task.gpu_total_milli
                frags.refresh(state, np.array([node for node, _ in members]))
        demand[i] = a
        used[i] = u
        frag_amount[i] = frags.frag(n).sum()
        if decisions is not None:
            decisions.append({
                "index": i,
                "task": task.task,
                "node": names[res.node] if res.node >= 0 else None,
                "gpus": [{"gpu": g, "milli": task.gpu_milli} for g in res.gpus],
            })
            if members:
                decisions[-1]["members"] = [
                    {"rank": r, "node": names[node], "gpus": list(gpus)}
                    for r, (node, gpus) in enumerate(members)]
                decisions[-1]["node"] = names[members[0][0]]
        if on_arrival is not None:
            on_arrival(i)
    capacity_milli = total_gpus * MILLI_PER_GPU
    arrived_pct = np.rint(demand / total_gpus / 10).astype(np.int64)
    alloc_pct = np.round(used / total_gpus / 10, 2)
    idle = capacity_milli - used
    frag_ratio = np.where(idle > 0, 100 * frag_amount / np.maximum(idle, 1), 0.0)
    curve = bucket_curve(arrived_pct, alloc_pct, frag_ratio, round(tune * 100))
    return RunResult(policy, seed, count, placed, curve, decisions, latency)
