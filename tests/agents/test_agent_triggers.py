"""The threshold-trigger engine: crossings, hysteresis, intervals, heartbeats, errors.

Recorded curves come from the GenAI trace (``../shared/traces/genai``); the
expected events are computed here independently of the engine, from the
definition of a Schmitt trigger, so the test checks the engine, not itself.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from agents.telemetry.base import GpuFault, GpuSample
from agents.telemetry.traces import GenaiCurves, load_genai
from agents.triggers import BandSpec, TriggerConfig, TriggerEngine, TriggerKind

UTIL_ONLY: dict[str, Any] = dict(
    mem_used_pct=BandSpec(edges=(), hysteresis=0),
    temperature_c=BandSpec(edges=(), hysteresis=0),
    power_pct_of_limit=BandSpec(edges=(), hysteresis=0),
    heartbeat_s=1e9,
)


def _util(index: int, util: float, **kw: Any) -> GpuSample:
    return GpuSample(index=index, util_pct=util, mem_used_mib=0.0, mem_total_mib=1000.0, **kw)


def _run(engine: TriggerEngine, times: np.ndarray, values: np.ndarray) -> list[float]:
    """Times at which the engine emitted a GPU event (snapshot excluded)."""
    fired = []
    for t, v in zip(times, values, strict=True):
        for trig in engine.observe(float(t), [_util(0, float(v))]):
            if trig.kind is TriggerKind.TELEMETRY:
                fired.append(float(t))
    return fired


def _reference_crossings(
    times: np.ndarray, values: np.ndarray, edges: tuple[float, ...], hyst: float, tau: float
) -> list[float]:
    """Sample times where the (EWMA-smoothed) value changes Schmitt band."""

    def raw_band(v: float) -> int:
        return sum(v >= e for e in edges)

    out: list[float] = []
    smooth = float(values[0])
    band = raw_band(smooth)
    for i in range(1, len(times)):
        if tau > 0:
            alpha = 1 - math.exp(-(times[i] - times[i - 1]) / tau)
            smooth += alpha * (float(values[i]) - smooth)
        else:
            smooth = float(values[i])
        new = band
        if raw_band(smooth) > band:
            new = raw_band(smooth)
        else:
            while new > 0 and smooth < edges[new - 1] - hyst:
                new -= 1
        if new != band:
            out.append(float(times[i]))
            band = new
    return out


@pytest.fixture(scope="module")
def genai() -> GenaiCurves:
    try:
        return load_genai()
    except FileNotFoundError as exc:
        pytest.skip(f"GenAI traces not available: {exc}")


@pytest.mark.parametrize(
    ("band", "value", "expected"),
    [
        pytest.param(0, 29.9, 0, id="below the edge stays in the low band"),
        pytest.param(0, 80.0, 2, id="reaching an edge enters the band above at once"),
        pytest.param(2, 75.1, 2, id="dipping less than the hysteresis below an edge stays"),
        pytest.param(2, 74.9, 1, id="falling more than the hysteresis below leaves the band"),
        pytest.param(2, 10.0, 0, id="a big fall drops several bands at once"),
        pytest.param(1, 95.0, 2, id="a rise from the middle band crosses the upper edge"),
    ],
)
def test_schmitt_bands(band: int, value: float, expected: int) -> None:
    spec = BandSpec(edges=(30.0, 80.0), hysteresis=5.0)
    assert spec.next_band(band, value) == expected


def test_edges_must_ascend() -> None:
    with pytest.raises(ValidationError):
        BandSpec(edges=(80.0, 30.0), hysteresis=5.0)


@pytest.mark.parametrize("tau", [0.0, 300.0], ids=["raw samples", "five-minute EWMA"])
def test_events_fire_exactly_at_the_crossings_of_recorded_curves(
    genai: GenaiCurves, tau: float
) -> None:
    spec = BandSpec(edges=(30.0, 80.0), hysteresis=10.0, smoothing_s=tau)
    config = TriggerConfig(gpu_util_pct=spec, min_interval_s=0, **UTIL_ONLY)
    checked = 0
    for container in genai.containers()[:40]:
        curve = genai.util_pct[container]
        expected = _reference_crossings(curve.t_s, curve.values, spec.edges, 10.0, tau)
        assert _run(TriggerEngine(config), curve.t_s, curve.values) == expected
        checked += len(expected)
    assert checked > 50  # the curves really do cross


def test_hysteresis_suppresses_flapping_at_a_threshold() -> None:
    times = np.arange(0, 200, 1.0)
    values = np.where(np.arange(200) % 2 == 0, 79.0, 81.0)  # hovering at the 80 % edge
    spec = BandSpec(edges=(30.0, 80.0), hysteresis=5.0)
    no_hyst = BandSpec(edges=(30.0, 80.0), hysteresis=0.0)
    with_h = TriggerConfig(gpu_util_pct=spec, min_interval_s=0, **UTIL_ONLY)
    without = TriggerConfig(gpu_util_pct=no_hyst, min_interval_s=0, **UTIL_ONLY)
    assert len(_run(TriggerEngine(with_h), times, values)) == 1
    assert len(_run(TriggerEngine(without), times, values)) == 199


def test_min_interval_holds_back_changes_and_drops_ones_that_revert() -> None:
    spec = BandSpec(edges=(50.0,), hysteresis=0.0)
    config = TriggerConfig(gpu_util_pct=spec, min_interval_s=10, **UTIL_ONLY)
    engine = TriggerEngine(config)
    engine.observe(0.0, [_util(0, 10)])  # snapshot at t=0
    assert engine.observe(1.0, [_util(0, 90)]) == []  # too soon: held back
    assert engine.observe(2.0, [_util(0, 10)]) == []  # reverted: nothing to say
    assert engine.observe(5.0, [_util(0, 90)]) == []
    (late,) = engine.observe(10.0, [_util(0, 95)])  # still high once the interval allows
    assert late.kind is TriggerKind.TELEMETRY and late.at_s == 10.0
    (crossing,) = late.crossings
    assert (crossing.metric, crossing.direction, crossing.threshold, crossing.value) == (
        "gpu_util_pct",
        "rising",
        50.0,
        95.0,
    )


def test_falling_crossing_reports_the_threshold_after_hysteresis() -> None:
    config = TriggerConfig(
        gpu_util_pct=BandSpec(edges=(80.0,), hysteresis=10.0), min_interval_s=0, **UTIL_ONLY
    )
    engine = TriggerEngine(config)
    engine.observe(0.0, [_util(0, 90)])
    assert engine.observe(1.0, [_util(0, 75)]) == []
    (event,) = engine.observe(2.0, [_util(0, 60)])
    assert event.crossings[0].direction == "falling" and event.crossings[0].threshold == 70.0


def test_heartbeats_keep_coming_when_nothing_changes() -> None:
    engine = TriggerEngine(TriggerConfig(heartbeat_s=30))
    kinds = [t.kind for s in range(0, 301) for t in engine.observe(float(s), [_util(0, 5)])]
    assert kinds.count(TriggerKind.SNAPSHOT) == 1
    assert kinds.count(TriggerKind.HEARTBEAT) == 10
    assert kinds.count(TriggerKind.TELEMETRY) == 0
    assert engine.tick(330.0)[0].kind is TriggerKind.HEARTBEAT


def test_the_event_count_is_a_small_fraction_of_the_samples(genai: GenaiCurves) -> None:
    engine_events = samples = 0
    for container in genai.containers():
        util, mem = genai.util_pct[container], genai.mem_mib[container]
        engine = TriggerEngine(TriggerConfig())
        for t, v in zip(util.t_s, util.values, strict=True):
            sample = GpuSample(0, float(v), mem.at(float(t)), 81920.0)
            engine.observe(float(t), [sample])
        engine_events += engine.stats.events
        samples += engine.stats.samples
    assert samples > 100_000
    assert engine_events / samples < 0.02


def test_errors_skip_the_min_interval() -> None:
    engine = TriggerEngine(TriggerConfig(min_interval_s=1000))
    engine.observe(0.0, [_util(0, 5, ecc_dbe_total=0)])
    (event,) = engine.observe(1.0, [_util(0, 5, ecc_dbe_total=2)])
    assert event.kind is TriggerKind.TELEMETRY and event.errors == ("ecc_dbe:+2",)


def test_a_few_timeouts_are_tolerated_but_a_run_of_them_fails_the_gpu() -> None:
    engine = TriggerEngine(TriggerConfig(fault_tolerance=3))
    engine.observe(0.0, [_util(0, 5), _util(1, 5)])
    timeout = GpuFault(0, "nvml: Timeout", fatal=False)
    assert engine.observe(1.0, [timeout]) == []
    assert engine.observe(2.0, [timeout]) == []
    assert engine.observe(3.0, [_util(0, 5)]) == []  # answered again: count restarts
    assert engine.observe(4.0, [timeout]) == engine.observe(5.0, [timeout]) == []
    (failed,) = engine.observe(6.0, [timeout])
    assert failed.kind is TriggerKind.FAILED and failed.fail_reason == "unknown"
    assert engine.observe(7.0, [timeout, _util(0, 99)]) == []  # failed once, then silent


def test_throttling_on_and_off_is_reported() -> None:
    engine = TriggerEngine(TriggerConfig(min_interval_s=0))
    engine.observe(0.0, [_util(0, 50)])
    hot = _util(0, 50, temperature_c=60.0)
    (on,) = engine.observe(1.0, [replace(hot, throttle_reasons=frozenset({"sw_thermal_slowdown"}))])
    assert [(c.metric, c.direction) for c in on.crossings] == [("throttle", "rising")]
    (off,) = engine.observe(2.0, [hot])
    assert [(c.metric, c.direction) for c in off.crossings] == [("throttle", "falling")]


def test_power_is_judged_against_the_limit_and_reported_in_watts() -> None:
    config = TriggerConfig(
        power_pct_of_limit=BandSpec(edges=(95.0,), hysteresis=10.0), min_interval_s=0
    )
    engine = TriggerEngine(config)
    engine.observe(0.0, [_util(0, 50, power_w=100.0, power_limit_w=300.0)])
    (event,) = engine.observe(1.0, [_util(0, 50, power_w=290.0, power_limit_w=300.0)])
    (crossing,) = event.crossings
    assert crossing.metric == "power_w"
    assert crossing.threshold == pytest.approx(285.0) and crossing.value == pytest.approx(290.0)


def test_same_input_gives_the_same_events() -> None:
    rng = np.random.default_rng(7)
    times = np.arange(0, 3000, 5.0)
    values = np.clip(np.cumsum(rng.normal(0, 8, len(times))) + 50, 0, 100)
    runs = [_run(TriggerEngine(TriggerConfig(min_interval_s=20)), times, values) for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 0


def test_resync_makes_the_next_sample_a_snapshot() -> None:
    engine = TriggerEngine()
    engine.observe(0.0, [_util(0, 5)])
    engine.resync()
    (event,) = engine.observe(1.0, [_util(0, 5)])
    assert event.kind is TriggerKind.SNAPSHOT
