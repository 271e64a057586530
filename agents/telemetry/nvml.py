"""Telemetry of real NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

Why it is written this way:

* Every NVML call can fail on its own (a counter the GPU does not support, a
  timeout, a GPU that fell off the bus). Each call is guarded separately: an
  unsupported counter becomes ``None`` and is not asked again, a timeout
  becomes a non-fatal :class:`GpuFault` for that GPU this round, and "GPU is
  lost" becomes a fatal one, which the trigger engine turns into ``GpuFailed``.
  One bad GPU never stops the agent from reporting the others.
* XID errors arrive as NVML events, not counters; each GPU gets its own event
  set so an event can be attributed even when its GPU no longer answers.
* The module is passed in (default: import ``pynvml``) so that the tests run
  the same code against ``tests/agents/fake_pynvml.py``.
* Without the NVML library (no driver, no GPU), construction raises
  :class:`SourceUnavailable` with a message that says so; the CLI exits non-zero
  unless the simulated source was asked for.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from agents.telemetry.base import (
    GpuFault,
    GpuInfo,
    GpuReading,
    GpuSample,
    NodeInventory,
    ProcessUsage,
    SourceUnavailable,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
_MIB = 1024 * 1024

# NVML error codes (stable ABI values; read from the module when it has them).
_GPU_IS_LOST = 15
_RESET_REQUIRED = 16
_GPU_NOT_FOUND = 28
_FATAL_CODES = frozenset({_GPU_IS_LOST, _RESET_REQUIRED, _GPU_NOT_FOUND})
"""Errors after which the GPU will not answer again without a reset."""
_UNSUPPORTED_CODES = frozenset({2, 3, 4, 13})
"""Invalid argument, not supported, no permission, function not found: the counter
is simply not available on this GPU/driver, which is not a fault."""
_UNAVAILABLE_CODES = frozenset({9, 12})
"""Driver not loaded, library not found: NVML cannot run on this machine."""
_NOT_FOUND = 6
"""Per-process utilisation: no sample newer than the timestamp asked for (no process
was busy in the period), which is an answer, not an error."""
_PROCESS_LISTS = (
    ("procs", "nvmlDeviceGetComputeRunningProcesses"),
    ("mps_procs", "nvmlDeviceGetMPSComputeRunningProcesses"),
)
"""Where a GPU's processes are listed: CUDA contexts, and the clients of an MPS
server (fractional tasks run as MPS clients; a driver may list them only here)."""
_PROCESS_UTIL = (
    ("procs_util_info", "nvmlDeviceGetProcessesUtilizationInfo"),
    ("procs_util", "nvmlDeviceGetProcessUtilization"),
)
"""Per-process SM / memory-controller utilisation, newest API first."""

# Clock event (throttle) reason bits -> wire names (schemas ThrottleReason).
THROTTLE_BITS: tuple[tuple[str, int, str], ...] = (
    ("nvmlClocksThrottleReasonGpuIdle", 0x1, "gpu_idle"),
    ("nvmlClocksThrottleReasonApplicationsClocksSetting", 0x2, "applications_clocks_setting"),
    ("nvmlClocksThrottleReasonSwPowerCap", 0x4, "sw_power_cap"),
    ("nvmlClocksThrottleReasonHwSlowdown", 0x8, "hw_slowdown"),
    ("nvmlClocksThrottleReasonSyncBoost", 0x10, "sync_boost"),
    ("nvmlClocksThrottleReasonSwThermalSlowdown", 0x20, "sw_thermal_slowdown"),
    ("nvmlClocksThrottleReasonHwThermalSlowdown", 0x40, "hw_thermal_slowdown"),
    ("nvmlClocksThrottleReasonHwPowerBrakeSlowdown", 0x80, "hw_power_brake_slowdown"),
    ("nvmlClocksThrottleReasonDisplayClockSetting", 0x100, "display_clock_setting"),
)
PCIE_GTPS: dict[int, tuple[float, float]] = {
    1: (2.5, 0.8),
    2: (5.0, 0.8),
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
    6: (64.0, 242 / 256),
}
"""PCIe generation -> (GT/s per lane, line-code efficiency): 8b/10b up to gen 2,
128b/130b for gen 3-5, FLIT mode for gen 6."""
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
"""NVLink version -> GB/s per link per direction (P100, V100, A100, H100, B200)."""
_TOPOLOGY_LEVELS = {
    0: "internal",
    10: "single",
    20: "multiple",
    30: "hostbridge",
    40: "node",
    50: "system",
}


def load_pynvml() -> ModuleType:
    """Import ``pynvml``; the deprecated ``pynvml`` wrapper package warns on import,
    which says nothing useful to an operator, so that warning is silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise SourceUnavailable(
            "the pynvml module is not installed (pip install nvidia-ml-py)"
        ) from exc
    return pynvml


class _Unsupported(Exception):
    """Internal: this counter is not available on this GPU."""


class _Gpu:
    """One GPU's handle, event set and the counters it turned out not to support."""

    def __init__(self, index: int, handle: Any, event_set: Any | None) -> None:
        self.index = index
        self.handle = handle
        self.event_set = event_set
        self.unsupported: set[str] = set()
        self.lost_reason: str | None = None
        self.power_limit_w: float | None = None
        self.util_seen_us = 0
        """Newest per-process utilisation sample read (NVML's CPU timestamp, us)."""
        self.said: set[str] = set()
        """Accounting gaps already logged (each is said once)."""


class NvmlSource:
    """A :class:`~agents.telemetry.base.TelemetrySource` backed by NVML."""

    def __init__(self, nvml: ModuleType | None = None, *, hostname: str | None = None) -> None:
        self._nv = nvml if nvml is not None else load_pynvml()
        self._hostname = hostname or socket.gethostname()
        self._closed = False
        try:
            self._nv.nvmlInit()
        except self._nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _UNAVAILABLE_CODES:
                raise SourceUnavailable(
                    f"NVML is not available on this machine ({exc}): no NVIDIA driver or "
                    "libnvidia-ml.so.1 found. Install the NVIDIA driver, or run a simulated "
                    "node with --simulate MODEL[xCOUNT]."
                ) from exc
            raise SourceUnavailable(f"NVML failed to initialise: {exc}") from exc
        opened = (self._open(i) for i in range(self._nv.nvmlDeviceGetCount()))
        self._gpus = [gpu for gpu in opened if gpu is not None]

    # -- TelemetrySource -----------------------------------------------------

    def inventory(self) -> NodeInventory:
        gpus = [self._info(gpu) for gpu in self._gpus]
        by_bus = {g.pcie_bus_id: g.index for g in gpus if g.pcie_bus_id}
        peers, nvlink_gbps = self._nvlink_peers(by_bus)
        topo = self._topology()
        final = tuple(
            GpuInfo(
                index=g.index,
                uuid=g.uuid,
                model=g.model,
                memory_mib=g.memory_mib,
                power_limit_w=g.power_limit_w,
                pcie_bus_id=g.pcie_bus_id,
                numa_node=g.numa_node,
                nvlink_peers=tuple(sorted(peers.get(g.index, ()))),
                topology=topo.get(g.index, {}),
                pcie_bandwidth_gbps=g.pcie_bandwidth_gbps,
                nvlink_bandwidth_gbps=nvlink_gbps.get(g.index),
            )
            for g in gpus
        )
        driver = self._optional(None, "driver", self._nv.nvmlSystemGetDriverVersion)
        return NodeInventory(
            hostname=self._hostname,
            gpus=final,
            driver_version=_text(driver) if driver is not None else None,
            cpu_count=os.cpu_count(),
            memory_mib=_host_memory_mib(),
        )

    def sample(self, now_s: float) -> list[GpuReading]:
        del now_s  # NVML reports the present; time is the caller's
        return [self._sample(gpu) for gpu in self._gpus]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for gpu in self._gpus:
            if gpu.event_set is not None:
                self._quiet(self._nv.nvmlEventSetFree, gpu.event_set)
        self._quiet(self._nv.nvmlShutdown)

    # -- helpers -------------------------------------------------------------

    def _code(self, name: str, default: int) -> int:
        return int(getattr(self._nv, name, default))

    def _quiet(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except self._nv.NVMLError as exc:
            log.debug("nvml cleanup call failed: %s", exc)

    def _open(self, index: int) -> _Gpu | None:
        """Handle and event set of one GPU; None (logged) if it does not answer at all,
        so a node with one dead GPU still registers the others."""
        try:
            handle = self._nv.nvmlDeviceGetHandleByIndex(index)
            self._nv.nvmlDeviceGetUUID(handle)
        except self._nv.NVMLError as exc:
            log.error(
                "gpu %d does not answer NVML (%s); leaving it out of the inventory", index, exc
            )
            return None
        event_set = None
        try:
            event_set = self._nv.nvmlEventSetCreate()
            self._nv.nvmlDeviceRegisterEvents(
                handle, self._code("nvmlEventTypeXidCriticalError", 0x8), event_set
            )
        except self._nv.NVMLError as exc:
            log.info("gpu %d: XID events unavailable (%s); relying on counters", index, exc)
            if event_set is not None:
                self._quiet(self._nv.nvmlEventSetFree, event_set)
            event_set = None
        gpu = _Gpu(index, handle, event_set)
        limit_mw = self._optional(
            gpu, "power_limit", self._nv.nvmlDeviceGetEnforcedPowerLimit, handle
        )
        gpu.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None
        return gpu

    def _optional(self, gpu: _Gpu | None, key: str, fn: Callable[..., T], *args: Any) -> T | None:
        """Call an NVML function whose absence is no fault; remember unsupported ones."""
        if gpu is not None and key in gpu.unsupported:
            return None
        try:
            return fn(*args)
        except _Unsupported:
            if gpu is not None:
                gpu.unsupported.add(key)
            return None
        except self._nv.NVMLError as exc:
            if getattr(exc, "value", None) in _UNSUPPORTED_CODES:
                if gpu is not None:
                    gpu.unsupported.add(key)
                return None
            if gpu is None:
                log.warning("nvml %s failed: %s", key, exc)
                return None
            raise

    def _info(self, gpu: _Gpu) -> GpuInfo:
        nv, h = self._nv, gpu.handle
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        pci = self._optional(gpu, "pci", nv.nvmlDeviceGetPciInfo, h)
        bus_id = _normal_bus_id(_text(pci.busId)) if pci is not None else None
        numa = self._optional(gpu, "numa", getattr(nv, "nvmlDeviceGetNumaNodeId", _absent), h)
        if numa is None and bus_id:
            numa = _sysfs_numa_node(bus_id)
        return GpuInfo(
            index=gpu.index,
            uuid=_text(nv.nvmlDeviceGetUUID(h)),
            model=_text(nv.nvmlDeviceGetName(h)),
            memory_mib=int(mem.total // _MIB),
            power_limit_w=gpu.power_limit_w,
            pcie_bus_id=bus_id,
            numa_node=numa if numa is None or numa >= 0 else None,
            pcie_bandwidth_gbps=self._pcie_gbps(gpu),
        )

    def _nvlink_peers(self, by_bus: dict[str, int]) -> tuple[dict[int, set[int]], dict[int, float]]:
        """GPU -> GPUs it reaches over an active NVLink (directly or through NVSwitch),
        and GPU -> aggregate NVLink bandwidth per direction (GB/s)."""
        nv = self._nv
        max_links = int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))
        switch_type = self._code("NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        peers: dict[int, set[int]] = {}
        bandwidth: dict[int, float] = {}
        on_switch: set[int] = set()
        for gpu in self._gpus:
            for link in range(max_links):
                try:
                    if not nv.nvmlDeviceGetNvLinkState(gpu.handle, link):
                        continue
                    version = self._optional(
                        gpu,
                        "nvlink_version",
                        getattr(nv, "nvmlDeviceGetNvLinkVersion", _absent),
                        gpu.handle,
                        link,
                    )
                    per_link = NVLINK_GBPS_PER_LINK.get(int(version or 0), 25.0)
                    bandwidth[gpu.index] = bandwidth.get(gpu.index, 0.0) + per_link
                    remote_type = self._optional(
                        gpu,
                        "nvlink_type",
                        getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", _absent),
                        gpu.handle,
                        link,
                    )
                    if remote_type == switch_type:
                        on_switch.add(gpu.index)
                        continue
                    remote = nv.nvmlDeviceGetNvLinkRemotePciInfo(gpu.handle, link)
                except nv.NVMLError:
                    break  # no (more) links on this GPU
                peer = by_bus.get(_normal_bus_id(_text(remote.busId)))
                if peer is not None and peer != gpu.index:
                    peers.setdefault(gpu.index, set()).add(peer)
        for index in on_switch:
            peers.setdefault(index, set()).update(on_switch - {index})
        return peers, bandwidth

    def _pcie_gbps(self, gpu: _Gpu) -> float | None:
        """Host link bandwidth per direction from the maximum link generation and width."""
        nv = self._nv
        gen = self._optional(
            gpu, "pcie_gen", getattr(nv, "nvmlDeviceGetMaxPcieLinkGeneration", _absent), gpu.handle
        )
        width = self._optional(
            gpu, "pcie_width", getattr(nv, "nvmlDeviceGetMaxPcieLinkWidth", _absent), gpu.handle
        )
        if not gen or not width or int(gen) not in PCIE_GTPS:
            return None
        gtps, efficiency = PCIE_GTPS[int(gen)]
        return round(gtps * efficiency * int(width) / 8.0, 2)

    def _topology(self) -> dict[int, dict[int, str]]:
        out: dict[int, dict[int, str]] = {}
        fn = getattr(self._nv, "nvmlDeviceGetTopologyCommonAncestor", _absent)
        for a in self._gpus:
            for b in self._gpus:
                if b.index <= a.index:
                    continue
                level = self._optional(None, "topology", fn, a.handle, b.handle)
                if level is None:
                    continue
                name = _TOPOLOGY_LEVELS.get(int(level), str(level))
                out.setdefault(a.index, {})[b.index] = name
                out.setdefault(b.index, {})[a.index] = name
        return out

    def _sample(self, gpu: _Gpu) -> GpuReading:
        if gpu.lost_reason is not None:
            return GpuFault(gpu.index, gpu.lost_reason, fatal=True)
        nv, h = self._nv, gpu.handle
        try:
            xids = self._drain_xids(gpu)
            util = self._optional(gpu, "util", nv.nvmlDeviceGetUtilizationRates, h)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            temp = self._optional(
                gpu, "temp", nv.nvmlDeviceGetTemperature, h, self._code("NVML_TEMPERATURE_GPU", 0)
            )
            power_mw = self._optional(gpu, "power", nv.nvmlDeviceGetPowerUsage, h)
            sm_clock = self._optional(
                gpu, "sm_clock", nv.nvmlDeviceGetClockInfo, h, self._code("NVML_CLOCK_SM", 1)
            )
            reasons = self._throttle_mask(gpu)
            sbe, dbe = self._ecc(gpu)
            processes = self._processes(gpu)
        except nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            fatal = code in _FATAL_CODES
            reason = f"nvml: {exc}"
            if fatal:
                gpu.lost_reason = reason
            log.warning("gpu %d: %s (fatal=%s)", gpu.index, reason, fatal)
            return GpuFault(gpu.index, reason, fatal=fatal)
        return GpuSample(
            index=gpu.index,
            util_pct=float(util.gpu) if util is not None else 0.0,
            mem_util_pct=float(util.memory) if util is not None else None,
            mem_used_mib=mem.used / _MIB,
            mem_total_mib=mem.total / _MIB,
            temperature_c=float(temp) if temp is not None else None,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            power_limit_w=gpu.power_limit_w,
            sm_clock_mhz=float(sm_clock) if sm_clock is not None else None,
            throttle_reasons=frozenset(
                name for _, bit, name in THROTTLE_BITS if reasons is not None and reasons & bit
            ),
            ecc_sbe_total=sbe,
            ecc_dbe_total=dbe,
            xids=xids,
            processes=processes,
        )

    # -- per-process accounting -------------------------------------------------

    def _processes(self, gpu: _Gpu) -> tuple[ProcessUsage, ...] | None:
        """The GPU's compute processes with their memory and (where supported) SM and
        memory-controller utilisation; None when the GPU cannot list its processes.

        A GPU that is lost raises (the caller turns it into a fatal fault); any other
        failure only costs this round's attribution, never the GPU's sample.
        """
        nv, h = self._nv, gpu.handle
        memory: dict[int, float | None] = {}
        listed = False
        for key, name in _PROCESS_LISTS:
            procs = self._accounting(gpu, key, getattr(nv, name, _absent), h)
            if procs is None:
                if key not in gpu.unsupported:
                    return None  # failed this round: half a list would hide a task's memory
                continue
            listed = True
            for proc in procs:
                used = getattr(proc, "usedGpuMemory", None)
                mib = None if used is None else int(used) / _MIB
                pid = int(proc.pid)
                old = memory.get(pid)
                memory[pid] = mib if old is None else max(old, mib or 0.0)
        if not listed:
            self._say_once(
                gpu,
                "procs",
                "per-process GPU memory accounting is not available; task "
                "usage falls back to whole-GPU figures split by booked share",
            )
            return None
        util = self._process_util(gpu)
        return tuple(
            ProcessUsage(
                pid=pid,
                mem_used_mib=mib,
                sm_util_pct=None if util is None else util.get(pid, (0.0, 0.0))[0],
                mem_util_pct=None if util is None else util.get(pid, (0.0, 0.0))[1],
            )
            for pid, mib in sorted(memory.items())
        )

    def _process_util(self, gpu: _Gpu) -> dict[int, tuple[float, float]] | None:
        """pid -> mean (SM %, memory-controller %) over the samples since the last read;
        processes idle in the period are absent (NVML returns only busy ones). None when
        neither per-process utilisation call is supported here."""
        nv, h = self._nv, gpu.handle
        for key, name in _PROCESS_UTIL:
            samples = self._accounting(
                gpu, key, getattr(nv, name, _absent), h, gpu.util_seen_us, empty_on_not_found=True
            )
            if samples is None:
                continue
            sums: dict[int, list[float]] = {}
            for sample in samples:
                acc = sums.setdefault(int(sample.pid), [0.0, 0.0, 0.0])
                acc[0] += float(sample.smUtil)
                acc[1] += float(sample.memUtil)
                acc[2] += 1
                gpu.util_seen_us = max(gpu.util_seen_us, int(sample.timeStamp))
            return {pid: (a[0] / a[2], a[1] / a[2]) for pid, a in sums.items()}
        if any(key not in gpu.unsupported for key, _ in _PROCESS_UTIL):
            return None
        self._say_once(
            gpu,
            "procs_util",
            "per-process utilisation is not supported; task utilisation "
            "is the GPU's split by booked share",
        )
        return None

    def _accounting(
        self,
        gpu: _Gpu,
        key: str,
        fn: Callable[..., Any],
        *args: Any,
        empty_on_not_found: bool = False,
    ) -> Any:
        """One accounting call: None when unsupported (remembered) or failing this round;
        raises only for errors that mean the GPU itself is gone."""
        if key in gpu.unsupported:
            return None
        try:
            return fn(*args)
        except _Unsupported:
            gpu.unsupported.add(key)
            return None
        except self._nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _NOT_FOUND and empty_on_not_found:
                return []
            if code in _FATAL_CODES:
                raise
            if code in _UNSUPPORTED_CODES:
                gpu.unsupported.add(key)
            else:
                log.debug("gpu %d: %s failed this round: %s", gpu.index, key, exc)
            return None

    def _say_once(self, gpu: _Gpu, key: str, message: str) -> None:
        if key not in gpu.said:
            gpu.said.add(key)
            log.info("gpu %d: %s", gpu.index, message)

    def _throttle_mask(self, gpu: _Gpu) -> int | None:
        nv, h = self._nv, gpu.handle
        if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons"):
            mask = self._optional(gpu, "clock_events", nv.nvmlDeviceGetCurrentClocksEventReasons, h)
            if mask is not None:
                return int(mask)
        mask = self._optional(gpu, "throttle", nv.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        return int(mask) if mask is not None else None

    def _ecc(self, gpu: _Gpu) -> tuple[int | None, int | None]:
        nv, h = self._nv, gpu.handle
        volatile = self._code("NVML_VOLATILE_ECC", 0)
        counts: list[int | None] = []
        for key, kind in (
            ("ecc_sbe", self._code("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)),
            ("ecc_dbe", self._code("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)),
        ):
            value = self._optional(gpu, key, nv.nvmlDeviceGetTotalEccErrors, h, kind, volatile)
            counts.append(int(value) if value is not None else None)
        return counts[0], counts[1]

    def _drain_xids(self, gpu: _Gpu) -> tuple[int, ...]:
        """Read every pending XID event of this GPU without blocking."""
        if gpu.event_set is None:
            return ()
        nv = self._nv
        xid_type = self._code("nvmlEventTypeXidCriticalError", 0x8)
        timeout = self._code("NVML_ERROR_TIMEOUT", 10)
        xids: list[int] = []
        for _ in range(64):  # bounded: a storm is reported, not looped on forever
            try:
                data = nv.nvmlEventSetWait(gpu.event_set, 0)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == timeout:
                    break
                raise
            if int(data.eventType) & xid_type:
                xids.append(int(data.eventData))
        return tuple(xids)


def _absent(*_: Any) -> Any:
    """Stand-in for an NVML function an old ``pynvml`` lacks: reads as unsupported."""
    raise _Unsupported


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _normal_bus_id(bus_id: str) -> str:
    """NVML writes ``00000000:3B:00.0``; sysfs and humans ``0000:3b:00.0``."""
    domain, _, rest = bus_id.strip().partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}" if rest else bus_id.lower()


def _sysfs_numa_node(bus_id: str) -> int | None:
    path = Path("/sys/bus/pci/devices") / bus_id / "numa_node"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _host_memory_mib() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _MIB
    except (ValueError, OSError, AttributeError):
        return None
