"""The NVML adapter against a fake ``pynvml``: readings, inventory, every way a GPU fails."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from types import ModuleType

import fake_pynvml
import pytest

from agents.telemetry.base import GpuFault, GpuSample, SourceUnavailable
from agents.telemetry.nvml import NvmlSource
from agents.triggers import TriggerConfig, TriggerEngine, TriggerKind

GIB = 1024**3


def _sample(source: NvmlSource, index: int = 0) -> GpuSample:
    reading = source.sample(0.0)[index]
    assert isinstance(reading, GpuSample), reading
    return reading


def test_a_healthy_gpu_reads_every_counter_in_our_units(fake_nvml: ModuleType) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.util_gpu, gpu.util_memory, gpu.memory_used = 73, 41, 20 * GIB
    gpu.temperature, gpu.power_mw, gpu.sm_clock = 71, 250_500, 1200
    gpu.throttle = fake_pynvml.nvmlClocksThrottleReasonSwPowerCap
    gpu.ecc_sbe, gpu.ecc_dbe = 3, 1
    s = _sample(NvmlSource(fake_nvml, hostname="n1"))
    assert (s.util_pct, s.mem_util_pct, s.mem_used_mib, s.mem_total_mib) == (73, 41, 20480, 81920)
    assert (s.temperature_c, s.power_w, s.power_limit_w, s.sm_clock_mhz) == (71, 250.5, 400, 1200)
    assert s.throttle_reasons == {"sw_power_cap"}
    assert s.power_throttled and not s.thermal_throttled
    assert (s.ecc_sbe_total, s.ecc_dbe_total, s.xids) == (3, 1, ())


def test_thermal_throttle_reasons_are_decoded(fake_nvml: ModuleType) -> None:
    fake_pynvml._gpus[1].throttle = (
        fake_pynvml.nvmlClocksThrottleReasonSwThermalSlowdown
        | fake_pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
        | fake_pynvml.nvmlClocksThrottleReasonGpuIdle
    )
    s = _sample(NvmlSource(fake_nvml), 1)
    assert s.throttle_reasons == {"sw_thermal_slowdown", "hw_thermal_slowdown", "gpu_idle"}
    assert s.thermal_throttled


def test_inventory_has_identity_memory_numa_and_topology(fake_nvml: ModuleType) -> None:
    fake_pynvml._gpus[1].numa_node = 1
    inv = NvmlSource(fake_nvml, hostname="n1").inventory()
    assert inv.hostname == "n1" and inv.driver_version == "550.54.15"
    a, b = inv.gpus
    assert (a.index, a.uuid, a.model, a.memory_mib) == (0, "GPU-a", "NVIDIA A100-SXM4-80GB", 81920)
    assert (a.pcie_bus_id, a.numa_node, b.numa_node) == ("0000:07:00.0", 0, 1)
    assert a.power_limit_w == 400
    assert a.nvlink_peers == (1,) and b.nvlink_peers == (0,)
    assert a.topology == {1: "single"} and b.topology == {0: "single"}
    assert a.pcie_bandwidth_gbps == pytest.approx(31.51, abs=0.01)  # gen 4 x16
    assert a.nvlink_bandwidth_gbps == 25.0  # one NVLink 3 link


def test_gpus_behind_an_nvswitch_are_all_peers(fake_nvml: ModuleType) -> None:
    fake_pynvml.reset(
        [
            fake_pynvml.FakeGpu(
                uuid=f"GPU-{i}", bus_id=f"00000000:0{i}:00.0", nvlinks=["switch"] * 4
            )
            for i in range(4)
        ]
    )
    inv = NvmlSource(fake_nvml).inventory()
    assert [g.nvlink_peers for g in inv.gpus] == [(1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2)]


def test_unsupported_counters_read_as_none_and_are_not_asked_again(fake_nvml: ModuleType) -> None:
    gpu = fake_pynvml._gpus[0]
    gpu.unsupported = {
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetNvLinkState",
    }
    source = NvmlSource(fake_nvml)
    inv = source.inventory()
    assert inv.gpus[0].nvlink_peers == ()
    s = _sample(source)
    assert s.power_w is None and s.ecc_dbe_total is None and s.ecc_sbe_total is None
    fake_pynvml.calls.clear()
    source.sample(1.0)
    power_calls = [c for c in fake_pynvml.calls if c == "nvmlDeviceGetPowerUsage"]
    assert power_calls == ["nvmlDeviceGetPowerUsage"]  # only GPU 1 is still asked


def test_a_timeout_is_a_non_fatal_fault_for_that_gpu_only(fake_nvml: ModuleType) -> None:
    source = NvmlSource(fake_nvml)
    fake_pynvml._gpus[0].fail_next["nvmlDeviceGetTemperature"] = fake_pynvml.NVML_ERROR_TIMEOUT
    first, second = source.sample(0.0)
    assert isinstance(first, GpuFault) and not first.fatal and "Timeout" in first.reason
    assert isinstance(second, GpuSample)
    assert isinstance(source.sample(1.0)[0], GpuSample)  # it answers again


def test_a_gpu_lost_mid_run_becomes_one_gpu_failed_event_and_the_rest_keep_reporting(
    fake_nvml: ModuleType,
) -> None:
    source = NvmlSource(fake_nvml)
    engine = TriggerEngine(TriggerConfig(min_interval_s=0))
    assert [t.kind for t in engine.observe(0.0, source.sample(0.0))] == [TriggerKind.SNAPSHOT] * 2
    fake_pynvml._gpus[1].lost = True
    fake_pynvml._gpus[0].util_gpu = 95
    events = []
    for t in range(1, 2000, 10):
        events += engine.observe(float(t), source.sample(float(t)))
    failed = [e for e in events if e.kind is TriggerKind.FAILED]
    assert len(failed) == 1
    assert failed[0].gpu_index == 1 and failed[0].fail_reason == "fell_off_bus"
    assert any(e.kind is TriggerKind.TELEMETRY and e.gpu_index == 0 for e in events)
    assert engine.failed_gpus() == [1]


def test_xid_events_are_drained_per_gpu(fake_nvml: ModuleType) -> None:
    source = NvmlSource(fake_nvml)
    fake_pynvml._gpus[1].xid_queue.extend([13, 43])
    readings = source.sample(0.0)
    assert isinstance(readings[0], GpuSample) and readings[0].xids == ()
    assert isinstance(readings[1], GpuSample) and readings[1].xids == (13, 43)
    assert _sample(source, 1).xids == ()


def test_a_fatal_xid_fails_the_gpu_and_an_application_xid_only_reports(
    fake_nvml: ModuleType,
) -> None:
    source = NvmlSource(fake_nvml)
    engine = TriggerEngine(TriggerConfig(min_interval_s=1000))
    engine.observe(0.0, source.sample(0.0))
    fake_pynvml._gpus[0].xid_queue.append(13)
    fake_pynvml._gpus[1].xid_queue.append(79)
    events = engine.observe(1.0, source.sample(1.0))
    by_gpu = {e.gpu_index: e for e in events}
    assert by_gpu[0].kind is TriggerKind.TELEMETRY and by_gpu[0].errors == ("xid:13",)
    assert by_gpu[1].kind is TriggerKind.FAILED and by_gpu[1].xid == 79


def test_no_nvml_library_is_a_clear_source_unavailable(fake_nvml: ModuleType) -> None:
    fake_pynvml.reset([], init_error=fake_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(SourceUnavailable, match="--simulate"):
        NvmlSource(fake_nvml)


def test_close_is_idempotent_and_frees_event_sets(fake_nvml: ModuleType) -> None:
    source = NvmlSource(fake_nvml)
    source.close()
    source.close()
    assert fake_pynvml.calls.count("nvmlShutdown") == 1
    assert fake_pynvml.calls.count("nvmlEventSetFree") == 2


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_the_real_pynvml_without_a_driver_says_so() -> None:
    code = "from agents.telemetry.nvml import NvmlSource\nNvmlSource()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "SourceUnavailable" in proc.stderr and "NVML is not available" in proc.stderr


def test_a_gpu_dead_at_start_is_left_out_and_the_rest_register(fake_nvml: ModuleType) -> None:
    fake_pynvml._gpus[0].lost = True
    source = NvmlSource(fake_nvml)
    assert [g.uuid for g in source.inventory().gpus] == ["GPU-b"]
    assert [r.index for r in source.sample(0.0)] == [1]
