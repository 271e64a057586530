"""Counters advanced once per transaction (streams.metrics.CountsByType)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from streams.metrics import CountsByType


def test_counts_reach_the_counter_only_on_flush_and_only_once() -> None:
    registry = CollectorRegistry()
    counter = Counter("t_events_total", "test", ["type"], registry=registry)
    counts = CountsByType(counter)
    for kind in ["GpuTelemetry", "GpuTelemetry", "TaskSubmitted"]:
        counts.add(kind)
    assert registry.get_sample_value("t_events_total", {"type": "GpuTelemetry"}) is None
    counts.flush()
    counts.flush()  # nothing new: no double count
    assert registry.get_sample_value("t_events_total", {"type": "GpuTelemetry"}) == 2
    assert registry.get_sample_value("t_events_total", {"type": "TaskSubmitted"}) == 1
    counts.add("GpuTelemetry")
    counts.flush()
    assert registry.get_sample_value("t_events_total", {"type": "GpuTelemetry"}) == 3
