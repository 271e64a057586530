"""Simulated GPUs: load follows tasks, shaped by real curves; faults; config parsing."""

from __future__ import annotations

import math

import pytest

from agents.telemetry.base import GpuFault, GpuSample
from agents.telemetry.faults import parse_fault
from agents.telemetry.simulated import SimulatedNode, parse_simulate
from agents.telemetry.traces import GenaiCurves, load_genai
from agents.triggers import TriggerEngine, TriggerKind


def _node(**kw: object) -> SimulatedNode:
    return SimulatedNode("A100", 2, hostname="sim-1", start_s=0.0, **kw)  # type: ignore[arg-type]


def _gpu(node: SimulatedNode, now: float, index: int = 0) -> GpuSample:
    reading = node.sample(now)[index]
    assert isinstance(reading, GpuSample)
    return reading


@pytest.fixture(scope="module")
def genai() -> GenaiCurves:
    try:
        return load_genai()
    except FileNotFoundError as exc:
        pytest.skip(f"GenAI traces not available: {exc}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("A100x8", ("A100", 8)), ("T4", ("T4", 1)), ("V100M32x2", ("V100M32", 2))],
)
def test_simulate_flag_parses_model_and_count(text: str, expected: tuple[str, int]) -> None:
    assert parse_simulate(text) == expected


def test_an_unknown_model_lists_the_catalog() -> None:
    with pytest.raises(KeyError, match="known"):
        parse_simulate("Z9000x2")


@pytest.mark.parametrize(
    ("text", "kind", "gpu", "at", "dur", "xid"),
    [
        ("gpu-fail:1@30", "gpu-fail", 1, 30.0, math.inf, None),
        ("throttle:0@10+60", "throttle", 0, 10.0, 60.0, None),
        ("xid:2:79@5.5", "xid", 2, 5.5, math.inf, 79),
        ("node-loss@120", "node-loss", None, 120.0, math.inf, None),
    ],
)
def test_fault_tokens_parse(
    text: str, kind: str, gpu: int | None, at: float, dur: float, xid: int | None
) -> None:
    f = parse_fault(text)
    assert (f.kind, f.gpu, f.at_s, f.duration_s, f.xid) == (kind, gpu, at, dur, xid)


@pytest.mark.parametrize(
    "text", ["gpu-fail@3", "node-loss:1@3", "xid:0@3", "explode:0@1", "gpu-fail:0@1+5"]
)
def test_bad_fault_tokens_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bad fault"):
        parse_fault(text)


def test_an_idle_gpu_reports_its_catalog_model_and_little_load() -> None:
    node = _node()
    inv = node.inventory()
    assert [g.model for g in inv.gpus] == ["A100", "A100"]
    assert inv.gpus[0].memory_mib == 81920 and inv.gpus[0].uuid != inv.gpus[1].uuid
    s = _gpu(node, 0.0)
    assert s.util_pct == 0 and s.mem_used_mib == 0 and s.power_w == pytest.approx(80.0)
    assert not s.thermal_throttled


def test_load_follows_the_tasks_placed_without_traces() -> None:
    node = _node()
    node.add_load(0, "t1", share=0.5, util_pct=80, mem_mib=10_000, now_s=0.0)
    node.add_load(0, "t2", share=0.25, util_pct=40, mem_mib=2_000, now_s=0.0)
    s = _gpu(node, 1.0)
    assert s.util_pct == pytest.approx(50.0) and s.mem_used_mib == pytest.approx(12_000)
    assert node.task_usage("t1", 1.0) == {0: (40.0, 10_000)}
    node.remove_load(0, "t1")
    assert _gpu(node, 2.0).util_pct == pytest.approx(10.0)
    assert _gpu(node, 2.0, 1).util_pct == 0


def test_with_traces_a_task_follows_a_real_curve_around_its_nominal_level(
    genai: GenaiCurves,
) -> None:
    node = _node(curves=genai, time_scale=60.0)
    node.add_load(0, "serve-1", share=1.0, util_pct=30, mem_mib=20_000, now_s=0.0)
    utils = [_gpu(node, float(t)).util_pct for t in range(0, 1200)]
    assert len({round(u) for u in utils}) > 10  # shaped, not flat
    assert 10 < sum(utils) / len(utils) < 60  # around the nominal 30 %
    assert all(0 <= u <= 100 for u in utils)
    again = _node(curves=genai, time_scale=60.0)
    again.add_load(0, "serve-1", share=1.0, util_pct=30, mem_mib=20_000, now_s=0.0)
    assert [_gpu(again, float(t)).util_pct for t in range(0, 1200)] == utils  # reproducible


def test_an_injected_gpu_failure_becomes_one_gpu_failed_event() -> None:
    node = _node(faults=[parse_fault("gpu-fail:1@5")])
    engine = TriggerEngine()
    kinds = []
    for t in range(0, 20):
        kinds += [(e.kind, e.gpu_index) for e in engine.observe(float(t), node.sample(float(t)))]
    assert kinds.count((TriggerKind.FAILED, 1)) == 1
    assert isinstance(node.sample(30.0)[1], GpuFault)
    assert node.gpu_speed(1, 30.0) == 0.0 and node.gpu_speed(0, 30.0) == 1.0


def test_an_injected_cooling_failure_throttles_the_gpu_and_slows_it_down() -> None:
    node = _node(faults=[parse_fault("throttle:0@10+100")], time_scale=5.0)
    assert not _gpu(node, 5.0).thermal_throttled
    hot = _gpu(node, 60.0)
    assert hot.thermal_throttled and (hot.temperature_c or 0) >= 85
    assert node.gpu_speed(0, 60.0) < 1.0
    assert not _gpu(node, 200.0).thermal_throttled  # cooled down after the fault


def test_xid_faults_fire_once_and_node_loss_silences_the_node() -> None:
    node = _node(faults=[parse_fault("xid:0:13@2"), parse_fault("node-loss@50")])
    assert _gpu(node, 1.0).xids == ()
    assert _gpu(node, 3.0).xids == (13,)
    assert _gpu(node, 4.0).xids == ()
    assert not node.is_lost(49.0) and node.is_lost(50.0)
