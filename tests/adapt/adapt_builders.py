"""Envelopes for the adaptation tests: nodes, tasks, heartbeats, telemetry, usage, ticks.

Times are seconds after a fixed ``T0`` (never the wall clock); ids derive from
seed strings, so two builds of one scenario are byte-identical.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.events import (
    Envelope,
    Event,
    GpuFailed,
    GpuSpec,
    GpuTelemetry,
    GpuUsage,
    NodeDraining,
    NodeFailed,
    NodeHeartbeat,
    NodeRegistered,
    TaskFailed,
    TaskFinished,
    TaskSubmitted,
    TaskUsage,
    Tick,
    make_event,
)
from streams.adapter import apply
from streams.core.adapt.config import AdaptConfig, ElasticConfig
from streams.core.cell import Cell
from streams.profiles.service import service_scheduler

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SCHED = service_scheduler("hetsched")
_seq = itertools.count()
FIGURES = {"A100": (81920, 19.5, 312.0, 2039.0, 400.0), "T4": (15360, 8.1, 65.0, 320.0, 70.0),
           "V100M32": (32768, 15.7, 125.0, 900.0, 300.0)}


def at(t: float) -> datetime:
    return T0 + timedelta(seconds=t)


def _ev(payload: Event, t: float, seed: str) -> Envelope[Event]:
    return make_event(payload, source="test", occurred_at=at(t), cell="cell-0",
                      id_seed=f"{seed}/{t}/{next(_seq)}")


def config(**kw: Any) -> AdaptConfig:
    """Short windows for tests: resize after 30 s sustained, 60 s cooldown."""
    e = ElasticConfig(window_s=30.0, cooldown_s=60.0)
    base: dict[str, Any] = {"heartbeat_timeout_s": 10.0, "probe_s": 0.0,
                            "elastic": (("burstable", e), ("guaranteed", e), ("best_effort", e))}
    base.update(kw)
    return AdaptConfig(**base)


def cell(**kw: Any) -> Cell:
    return Cell("cell-0", SCHED, adapt=config(**kw))


def node(node_id: str, model: str = "A100", gpus: int = 4, t: float = 0.0) -> Envelope[Event]:
    mem, fp32, fp16, bw, pw = FIGURES[model]
    return _ev(NodeRegistered(
        node_id=node_id, cpu_milli=64000, memory_mib=262144,
        gpus=[GpuSpec(index=i, uuid=f"GPU-{node_id}-{i}", model=model, memory_mib=mem,
                      fp32_tflops=fp32, fp16_tflops=fp16, mem_bandwidth_gbps=bw,
                      power_limit_w=pw) for i in range(gpus)]), t, f"node/{node_id}")


def task(task_id: str, gpus: int = 1, share: int = 1000, t: float = 1.0, *,
         elastic: tuple[int, int] | None = None, duration_s: float | None = 3600.0,
         profile: str | None = "compute", models: tuple[str, ...] = (),
         argv: tuple[str, ...] = ("train.py",), tenant: str = "team-a",
         memory_mib: int = 4096) -> Envelope[Event]:
    raw: dict[str, Any] = {
        "task_id": task_id, "tenant": tenant,
        "resources": {"gpu_count": gpus, "gpu_share_milli": share, "cpu_milli": 1000,
                      "memory_mib": memory_mib, "gpu_models": list(models)},
        "features": {"profile": profile, "expected_duration_s": duration_s},
        "executor": {"kind": "process", "argv": list(argv)},
    }
    if elastic:
        raw["elastic"] = {"min_gpus": elastic[0], "max_gpus": elastic[1]}
    return _ev(TaskSubmitted.model_validate(raw), t, f"task/{task_id}")


def heartbeat(node_id: str, t: float, running: tuple[str, ...] = ()) -> Envelope[Event]:
    return _ev(NodeHeartbeat(node_id=node_id, seq=int(t), running_task_ids=list(running)), t,
               f"hb/{node_id}")


def tick(seq: int, t: float) -> Envelope[Event]:
    return _ev(Tick(seq=seq, interval_s=1.0), t, "tick")


def usage(task_id: str, node_id: str, t: float, util: float, gpus: tuple[int, ...] = (0,),
          mem_mib: int = 1024) -> Envelope[Event]:
    return _ev(TaskUsage(task_id=task_id, node_id=node_id, window_s=5.0,
                         gpus=[GpuUsage(gpu_index=g, gpu_util_pct=util, mem_used_mib=mem_mib)
                               for g in gpus]), t, f"usage/{task_id}")


def telemetry(node_id: str, gpu: int, t: float, *, temp: float = 50.0, mem_mib: int = 0,
              throttle: tuple[str, ...] = (), xids: tuple[int, ...] = (),
              mem_util: float | None = None) -> Envelope[Event]:
    return _ev(GpuTelemetry(node_id=node_id, gpu_index=gpu, gpu_uuid=f"GPU-{node_id}-{gpu}",
                            gpu_util_pct=50.0, mem_used_mib=mem_mib, temperature_c=temp,
                            power_w=200.0, throttle_reasons=list(throttle),  # type: ignore[arg-type]
                            xid_errors=list(xids), mem_util_pct=mem_util), t, f"tel/{node_id}")


def node_failed(node_id: str, t: float) -> Envelope[Event]:
    return _ev(NodeFailed(node_id=node_id, reason="operator"), t, f"nf/{node_id}")


def draining(node_id: str, t: float) -> Envelope[Event]:
    return _ev(NodeDraining(node_id=node_id, reason="maintenance"), t, f"dr/{node_id}")


def gpu_failed(node_id: str, gpu: int, t: float) -> Envelope[Event]:
    return _ev(GpuFailed(node_id=node_id, gpu_index=gpu, gpu_uuid=f"GPU-{node_id}-{gpu}",
                         reason="xid", xid=79), t, f"gf/{node_id}")


def finished(task_id: str, node_id: str, decision_id: str, t: float,
             runtime_s: float = 10.0) -> Envelope[Event]:
    return _ev(TaskFinished(task_id=task_id, node_id=node_id, decision_id=decision_id,
                            runtime_s=runtime_s), t, f"fin/{task_id}")


def killed(task_id: str, node_id: str, decision_id: str, t: float) -> Envelope[Event]:
    return _ev(TaskFailed(task_id=task_id, node_id=node_id, decision_id=decision_id,
                          reason="killed"), t, f"kill/{task_id}")


def run(c: Cell, *events: Envelope[Event]) -> list[Any]:
    """Decision payloads for ``events`` in order."""
    return [d.payload for e in events for d in apply(c, e)]


def run_envs(c: Cell, *events: Envelope[Event]) -> list[Envelope[Any]]:
    return [d for e in events for d in apply(c, e)]


def kinds(payloads: list[Any]) -> list[str]:
    return [type(p).__name__ for p in payloads]
