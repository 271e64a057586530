"""Envelopes for service tests: a small heterogeneous cluster and a task mix.

Times are fixed (not the wall clock) where determinism matters; ids are derived
from a seed string so two builds of the same scenario give the same bytes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.events import (
    Envelope,
    Event,
    GpuSpec,
    NodeRegistered,
    TaskFinished,
    TaskSubmitted,
    Tick,
    make_event,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

MODEL_FIGURES = {  # memory_mib, fp32, fp16, bandwidth, power
    "V100M32": (32768, 15.7, 125.0, 900.0, 300.0),
    "A100": (81920, 19.5, 312.0, 2039.0, 400.0),
    "T4": (15360, 8.1, 65.0, 320.0, 70.0),
}

CLUSTER = (  # node, model, gpus
    ("node-a100-0", "A100", 8),
    ("node-v100-0", "V100M32", 4),
    ("node-t4-0", "T4", 2),
    ("node-t4-1", "T4", 2),
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(node_id: str, model: str, gpus: int, t: float = 0.0, cell: str | None = None,
         seed: str = "") -> Envelope[Event]:
    mem, fp32, fp16, bw, pw = MODEL_FIGURES.get(model, MODEL_FIGURES["T4"])
    payload = NodeRegistered(
        node_id=node_id, cell=cell, cpu_milli=64000 * max(gpus, 1) // 2,
        memory_mib=262144, pool="training",
        gpus=[GpuSpec(index=i, uuid=f"GPU-{node_id}-{i}", model=model, memory_mib=mem,
                      fp32_tflops=fp32, fp16_tflops=fp16, mem_bandwidth_gbps=bw,
                      power_limit_w=pw) for i in range(gpus)],
    )
    return make_event(payload, source=f"agent/{node_id}", occurred_at=at(t),
                      id_seed=f"{seed}node/{node_id}")


def task(task_id: str, gpus: int, share: int = 1000, models: tuple[str, ...] = (),
         cpu: int = 2000, t: float = 1.0, seed: str = "") -> Envelope[Event]:
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "team-a",
        "resources": {"gpu_count": gpus, "gpu_share_milli": share, "cpu_milli": cpu,
                      "memory_mib": 4096, "gpu_models": list(models)},
        "executor": {"kind": "simulated", "simulated": {
            "duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 1024}},
    })
    return make_event(payload, source="cli/test", occurred_at=at(t),
                      id_seed=f"{seed}task/{task_id}")


def finished(task_id: str, node_id: str, decision_id: str, t: float = 2.0,
             seed: str = "") -> Envelope[Event]:
    payload = TaskFinished(task_id=task_id, node_id=node_id, decision_id=decision_id,
                           runtime_s=1.0)
    return make_event(payload, source=f"executor/{node_id}", occurred_at=at(t),
                      id_seed=f"{seed}finished/{task_id}")


def tick(seq: int, t: float, cell: str = "cell-0") -> Envelope[Event]:
    return make_event(Tick(seq=seq, interval_s=5.0), source=f"ticker/{cell}",
                      occurred_at=at(t), cell=cell, id_seed=f"tick/{cell}/{seq}")


def with_cell(env: Envelope[Any], cell: str) -> Envelope[Event]:
    return env.model_copy(update={"cell": cell})


TASK_MIX = (  # task, gpus, share, models
    ("frac-1", 1, 250, ()),
    ("frac-2", 1, 500, ()),
    ("whole-1", 1, 1000, ()),
    ("multi-4", 4, 1000, ()),
    ("t4-only", 1, 1000, ("T4",)),
    ("v100-2", 2, 1000, ("V100M32",)),
    ("h100-only", 1, 1000, ("H100",)),
    ("huge-8", 8, 1000, ()),
    ("huge-8b", 8, 1000, ()),
)
