"""Preemption: which best-effort tasks to stop so an urgent task fits, at least cost. Pure.

Rules (Kubernetes-style, checked by tests/timesched):

* Only a *preemptor* may preempt: QoS ``guaranteed``, or a latency-sensitive
  task (priority at or above ``QueueConfig.preempt_priority``).
* Only ``best_effort`` tasks of strictly lower priority are victims. A
  best-effort task is never a preemptor, so preemption cannot form a cycle
  (A stops B, B stops A): the relation goes strictly down the QoS classes.
* Victims are chosen per node, cheapest first, until the task's shape fits;
  the node whose victim set costs least wins (ties: fewer victims, then the
  node's tie-break rank). Cost = GPU milli held x seconds run since the
  victim last started (the work a task without checkpoints would redo) plus
  ``VICTIM_OVERHEAD`` per victim (every stop costs a restart).
* The caller enforces the per-tick budget and re-queues victims with their
  progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streams.core.queue import QueueConfig, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.state import ClusterState

VICTIM_OVERHEAD = 60_000.0  # milli-GPU-seconds: one minute of a whole GPU per stopped task


@dataclass(frozen=True, slots=True)
class Victim:
    """A running task that may be stopped: where it runs, what it holds, what stopping costs."""

    task: str
    node: int
    gpus: tuple[int, ...]
    share_milli: int
    cpu_milli: int
    memory_mib: int
    cost: float


def is_preemptor(meta: TaskMeta, config: QueueConfig) -> bool:
    return meta.qos == "guaranteed" or (meta.qos != "best_effort"
                                        and meta.priority >= config.preempt_priority)


def may_preempt(preemptor: TaskMeta, victim: TaskMeta, config: QueueConfig) -> bool:
    return (is_preemptor(preemptor, config) and victim.qos == "best_effort"
            and victim.priority < preemptor.priority + (preemptor.qos == "guaranteed"))


def fits_after(state: ClusterState, node: int, req: TaskRequest,
               freed: Sequence[Victim]) -> bool:
    """Would ``req`` fit on ``node`` once ``freed`` released their resources?"""
    if not state.healthy[node]:
        return False
    cpu = int(state.cpu_free[node]) + sum(v.cpu_milli for v in freed)
    mem = int(state.mem_free[node]) + sum(v.memory_mib for v in freed)
    if cpu < req.cpu_milli or mem < req.memory_mib:
        return False
    if not req.num_gpu:
        return True
    if req.gpu_models:
        m = int(state.model[node])
        if m < 0 or state.model_names[m] not in req.gpu_models:
            return False
    count = int(state.gpu_count[node])
    free = state.gpu_free[node, :count].copy()
    for v in freed:
        if v.gpus:
            free[list(v.gpus)] += v.share_milli
    if req.fractional:
        return bool((free >= req.gpu_milli).any())
    return int((free == MILLI_PER_GPU).sum()) >= req.num_gpu


def choose_victims(state: ClusterState, req: TaskRequest,
                   victims: Sequence[Victim]) -> tuple[int, tuple[Victim, ...]] | None:
    """The cheapest (node, victims) that makes ``req`` fit, or None (see module docstring)."""
    by_node: dict[int, list[Victim]] = {}
    for v in victims:
        by_node.setdefault(v.node, []).append(v)
    best: tuple[float, int, int, int, tuple[Victim, ...]] | None = None
    for node in sorted(by_node):
        chosen: list[Victim] = []
        for v in sorted(by_node[node], key=lambda v: (v.cost, v.task)):
            chosen.append(v)
            if fits_after(state, node, req, chosen):
                break
        else:
            continue
        # Drop victims the fit does not need (a cheap one taken first may be superfluous).
        for v in list(chosen):
            rest = [c for c in chosen if c is not v]
            if fits_after(state, node, req, rest):
                chosen = rest
        cost = sum(v.cost for v in chosen)
        key = (cost, len(chosen), int(state.rank[node]), node, tuple(chosen))
        if best is None or key[:3] < best[:3]:
            best = key
    if best is None:
        return None
    return best[3], best[4]


def victim_cost(share_milli: int, gpus: int, ran_s: float) -> float:
    held = share_milli * max(gpus, 1) if gpus else MILLI_PER_GPU // 10
    return float(held) * max(ran_s, 0.0) + VICTIM_OVERHEAD


def empty_fit_mask(state: ClusterState, req: TaskRequest) -> np.ndarray:
    """Nodes that could host ``req`` when empty and healthy."""
    n = state.n
    ok = (state.cpu_cap[:n] >= req.cpu_milli) & (state.mem_cap[:n] >= req.memory_mib)
    ok &= state.healthy[:n]
    if req.num_gpu:
        ok &= state.gpu_count[:n] >= req.num_gpu
        if req.gpu_models:
            ids = [state.model_ids[m] for m in req.gpu_models if m in state.model_ids]
            ok &= np.isin(state.model[:n], np.array(ids, np.int64))
    return ok
