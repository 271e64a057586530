"""Trigger-engine outputs -> the schemas' node events (no wire format of our own).

The engine speaks in samples and crossings; the scheduler reads
``GpuTelemetry``, ``GpuFailed`` and ``NodeHeartbeat``. Values reported are the
ones the engine judged (smoothed where configured), so an event's numbers and
its ``triggers`` agree. Counters a GPU does not have are sent as 0.
"""

from __future__ import annotations

from typing import get_args

from agents.triggers import Trigger, TriggerKind
from schemas.events import GpuFailed, GpuTelemetry, NodeHeartbeat, ThresholdCrossing
from schemas.events.node import ThrottleReason

# The schema's own list, so a reason added there is reported here without an edit.
_KNOWN_THROTTLE = frozenset(get_args(ThrottleReason))


def _pct(value: float) -> float:
    return min(100.0, max(0.0, round(value, 3)))


def gpu_telemetry(node_id: str, gpu_uuid: str, trigger: Trigger) -> GpuTelemetry:
    """A ``SNAPSHOT`` or ``TELEMETRY`` trigger as a ``GpuTelemetry`` event."""
    if trigger.kind not in (TriggerKind.SNAPSHOT, TriggerKind.TELEMETRY) or trigger.state is None:
        raise ValueError(f"not a telemetry trigger: {trigger.kind}")
    state = trigger.state
    s = state.sample
    return GpuTelemetry(
        node_id=node_id,
        gpu_index=s.index,
        gpu_uuid=gpu_uuid,
        gpu_util_pct=_pct(state.util_pct),
        mem_used_mib=max(0, round(s.mem_used_mib)),
        mem_util_pct=_pct(s.mem_util_pct) if s.mem_util_pct is not None else None,
        temperature_c=round(state.temperature_c or 0.0, 2),
        power_w=max(0.0, round(state.power_w or 0.0, 2)),
        throttle_reasons=sorted(r for r in s.throttle_reasons if r in _KNOWN_THROTTLE),  # type: ignore[misc]
        ecc_sbe_total=s.ecc_sbe_total or 0,
        ecc_dbe_total=s.ecc_dbe_total or 0,
        xid_errors=list(s.xids),
        foreign_mem_mib=max(0, round(s.foreign_mem_mib)) if s.foreign_mem_mib is not None else None,
        triggers=[
            ThresholdCrossing(
                metric=c.metric,  # type: ignore[arg-type]
                direction=c.direction,
                threshold=round(c.threshold, 3),
                value=round(c.value, 3),
            )
            for c in trigger.crossings
        ],
    )


def gpu_failed(node_id: str, gpu_uuid: str, trigger: Trigger) -> GpuFailed:
    """A ``FAILED`` trigger as a ``GpuFailed`` event."""
    if trigger.kind is not TriggerKind.FAILED or trigger.gpu_index is None:
        raise ValueError(f"not a failure trigger: {trigger.kind}")
    return GpuFailed(
        node_id=node_id,
        gpu_index=trigger.gpu_index,
        gpu_uuid=gpu_uuid,
        reason=trigger.fail_reason or "unknown",
        xid=trigger.xid,
        detail="; ".join(trigger.errors)[:1000],
    )


def heartbeat(node_id: str, seq: int, running_task_ids: list[str]) -> NodeHeartbeat:
    return NodeHeartbeat(node_id=node_id, seq=seq, running_task_ids=sorted(running_task_ids))
