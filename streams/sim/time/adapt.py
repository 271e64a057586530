"""Issue 8's layer on the time simulator: node failures, repairs, and what they cost.

Pluggable, as the engine intends: ``attach_failures(sim, ...)`` adds the
``node_fail`` and ``node_back`` handlers and schedules a seeded failure plan;
the cell's adaptation engine (``streams.core.adapt.engine``) decides, exactly
as in the service: the failed node's tasks are evicted, re-queued and placed
again. The layer keeps the simulator's books straight (the evicted run's
finish no longer holds, its progress is lost) and counts:

* ``evictions``: runs stopped by a failure; ``work_lost_gpu_h``: GPU-hours
  of progress those runs lost (no checkpoint is assumed: the worst case);
* ``failures`` and ``repairs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streams.core.adapt import engine
from streams.core.adapt.outcomes import Evicted
from streams.core.events import NodeAdded
from streams.core.request import MILLI_PER_GPU
from streams.sim.time.engine import Simulator


@dataclass
class FaultLog:
    failures: int = 0
    repairs: int = 0
    evictions: int = 0
    work_lost_gpu_h: float = 0.0
    failed_nodes: list[str] = field(default_factory=list)


def attach_failures(sim: Simulator, fraction: float, seed: int, repair_s: float = 3600.0,
                    horizon_s: float | None = None) -> FaultLog:
    """Fail ``fraction`` of the nodes at seeded times within the horizon; repair each later."""
    log = FaultLog()
    names = list(sim.cell.nodes)
    rng = np.random.default_rng(seed)
    count = round(fraction * len(names))
    horizon = horizon_s if horizon_s is not None else sim.horizon_s
    chosen = sorted(rng.choice(len(names), size=count, replace=False).tolist()) if count else []
    times = rng.uniform(0.1 * horizon, 0.9 * horizon, size=len(chosen))
    for i, t in zip(chosen, times, strict=True):
        sim.push(float(t), "node_fail", names[i])
        sim.push(float(t) + repair_s, "node_back", names[i])

    def fail(s: Simulator, t: float, node: str) -> None:
        log.failures += 1
        log.failed_nodes.append(node)
        outs = engine.on_node_down(s.cell, f"nf/{node}/{t}", node, "node_failed")
        _evicted(s, t, outs, log)
        s._apply(outs)

    def back(s: Simulator, t: float, node: str) -> None:
        log.repairs += 1
        added = s.cell.nodes[node].added
        outs = s.cell.add_node(NodeAdded(f"nb/{node}/{t}", node, added.cpu_milli,
                                         added.memory_mib, added.gpu_count, added.gpu_model),
                               now_s=t)
        engine.on_registered(s.cell, node, t, by_agent=False)
        s._apply(outs)

    sim.handlers["node_fail"] = fail
    sim.handlers["node_back"] = back
    return log


def _evicted(sim: Simulator, t: float, outs: list[Any], log: FaultLog) -> None:
    """Stop the books of each evicted run: its finish is void, its progress lost."""
    for o in outs:
        if not isinstance(o, Evicted):
            continue
        log.evictions += 1
        sim._gen[o.task] = sim._gen.get(o.task, 0) + 1
        st = sim.recorder.jobs.get(o.task)
        if st is None:
            continue
        gpus = st.job.request.gpu_total_milli / MILLI_PER_GPU
        log.work_lost_gpu_h += gpus * max(t - st.run_since_s, 0.0) / 3600.0
        sim.recorder._stop(st, t)
        st.status = "queued"
