"""Simulated GPUs: catalog models whose load follows the tasks placed on them.

Why: the scheduler must be exercised end to end, at cluster scale, without
GPUs. A simulated GPU's utilisation and memory are the sum of the tasks the
(simulated or process) executor runs on it, each task shaped by a real
per-container curve of the Alibaba GenAI trace, replayed ``time_scale`` times
faster. Power and temperature follow utilisation through a first-order
thermal model of the catalog's TDP and throttle temperature, so thermal
throttling appears when a GPU runs hot, and fault injection
(:mod:`agents.telemetry.faults`) makes GPUs fail, overheat or the node vanish.

Shaping: a task that says it uses ``util_pct`` of its share runs at
``util_pct * c(t) / mean(c)`` (capped at 100 %), ``c`` being its container's
duty-cycle curve, and uses ``mem_mib * m(t) / max(m)`` of memory. The mean
over a curve is the task's nominal figure; the shape is production's. Which
curve and where in it a task starts come from a hash of the task id and the
seed, so runs are reproducible. Without the traces, loads are flat.
"""

from __future__ import annotations

import math
import time
import uuid
import zlib
from dataclasses import dataclass, field

import numpy as np

from agents.telemetry.base import (
    GpuFault,
    GpuInfo,
    GpuReading,
    GpuSample,
    NodeInventory,
    ProcessUsage,
)
from agents.telemetry.faults import Fault
from agents.telemetry.traces import Curve, GenaiCurves
from schemas.gpu_catalog import GpuModelSpec, get_model

AMBIENT_C = 30.0
IDLE_POWER_SHARE = 0.2
"""Idle draw as a share of TDP (datasheet idle is 15-30 % for data-centre GPUs)."""
FULL_LOAD_HEADROOM_C = 10.0
"""A healthy GPU at full load settles this far below its throttle temperature."""
COOLING_FAILURE_C = 10.0
"""An injected ``throttle`` fault (failed fan, blocked airflow) settles the GPU this far
above its throttle temperature, whatever its load."""
THERMAL_TAU_S = 20.0
"""Thermal time constant, in simulated seconds."""
NOMINAL_SM_CLOCK_MHZ = 1500.0
SIM_PCIE_GBPS = 31.51
"""PCIe gen 4 x16 per direction."""
SIM_NVLINK_GBPS = 300.0
"""8-GPU servers are simulated as NVSwitch boards (all-to-all, 12 links of 25 GB/s)."""
THROTTLED_SPEED = 0.6
"""Clock (and so throughput) share left to a thermally throttled GPU."""
SIM_PID_BASE = 5_000_000
"""Simulated tasks' process ids start here: above Linux's largest pid_max (2**22),
so no real process (and no real process tree) can ever share one."""
SIM_FOREIGN_PID_BASE = 6_000_000
"""Pids of injected ``foreign-mem`` processes (one per fault)."""


def parse_simulate(text: str) -> tuple[str, int]:
    """``A100x8`` -> ('A100', 8); ``T4`` -> ('T4', 1). The model must be in the catalog."""
    model, sep, count = text.strip().rpartition("x")
    if not sep or not count.isdigit() or not model:
        model, count = text.strip(), "1"
    get_model(model)  # KeyError lists the known models
    if int(count) < 1:
        raise ValueError(f"--simulate {text!r}: GPU count must be >= 1")
    return model, int(count)


@dataclass(frozen=True, slots=True)
class _Shape:
    util: Curve
    mem: Curve
    util_mean: float
    mem_max: float
    phase_s: float


@dataclass(slots=True)
class Load:
    """One task's footprint on one GPU."""

    task_id: str
    share: float
    """Share of the GPU the task holds, 0..1."""
    util_pct: float
    """Nominal utilisation of its share while running."""
    mem_mib: float
    """Nominal memory used on this GPU."""
    started_s: float
    """Wall (agent clock) time the task started here."""
    shape: _Shape | None = None


@dataclass(slots=True)
class SimulatedGpu:
    """One simulated GPU's physical state."""

    index: int
    uuid: str
    spec: GpuModelSpec
    loads: dict[str, Load] = field(default_factory=dict)
    temperature_c: float = AMBIENT_C
    last_s: float | None = None
    failed: bool = False

    def usage(self, now_s: float, time_scale: float) -> dict[str, tuple[float, float]]:
        """Per task: (GPU utilisation points it contributes, memory MiB) at ``now_s``."""
        out: dict[str, tuple[float, float]] = {}
        for task_id, load in self.loads.items():
            util, mem = load.util_pct, load.mem_mib
            if load.shape is not None:
                sim_t = load.shape.phase_s + (now_s - load.started_s) * time_scale
                util = min(
                    100.0,
                    util * load.shape.util.at(_wrap(sim_t, load.shape.util)) / load.shape.util_mean,
                )
                mem = mem * load.shape.mem.at(_wrap(sim_t, load.shape.mem)) / load.shape.mem_max
            out[task_id] = (util * load.share, mem)
        return out


def _wrap(t: float, curve: Curve) -> float:
    span = curve.span_s
    return float(curve.t_s[0] + (t % span)) if span > 0 else float(curve.t_s[0])


class SimulatedNode:
    """A :class:`~agents.telemetry.base.TelemetrySource` of simulated GPUs.

    The simulated executor backend adds and removes :class:`Load` s; the agent
    samples. ``now_s`` is the agent's monotonic clock; ``start_s`` is when the
    node came up (fault times count from it).
    """

    def __init__(
        self,
        model: str,
        count: int,
        *,
        hostname: str,
        time_scale: float = 1.0,
        faults: list[Fault] | None = None,
        curves: GenaiCurves | None = None,
        seed: int = 0,
        start_s: float | None = None,
        cpu_count: int | None = None,
        memory_mib: int | None = None,
    ) -> None:
        spec = get_model(model)
        self.hostname = hostname
        self.time_scale = time_scale
        self.faults = list(faults or [])
        self.seed = seed
        self.start_s = time.monotonic() if start_s is None else start_s
        self._cpu_count = cpu_count
        self._memory_mib = memory_mib
        self._xids_sent: set[int] = set()
        self.gpus = [SimulatedGpu(i, _sim_uuid(hostname, i), spec) for i in range(count)]
        self._curves = curves
        self._active = _active_containers(curves) if curves is not None else []
        self._pids: dict[str, int] = {}
        self._next_pid = SIM_PID_BASE

    # -- TelemetrySource -----------------------------------------------------

    def inventory(self) -> NodeInventory:
        gpus = tuple(
            GpuInfo(
                index=g.index,
                uuid=g.uuid,
                model=g.spec.name,
                memory_mib=g.spec.memory_mib,
                power_limit_w=g.spec.tdp_w,
                pcie_bus_id=f"0000:{0x10 + g.index:02x}:00.0",
                numa_node=0 if g.index < max(1, len(self.gpus) // 2) else 1,
                nvlink_peers=tuple(p.index for p in self.gpus if p.index != g.index)
                if len(self.gpus) >= 8
                else (),
                pcie_bandwidth_gbps=SIM_PCIE_GBPS,
                nvlink_bandwidth_gbps=SIM_NVLINK_GBPS if len(self.gpus) >= 8 else None,
            )
            for g in self.gpus
        )
        return NodeInventory(
            hostname=self.hostname,
            gpus=gpus,
            driver_version="simulated",
            cpu_count=self._cpu_count,
            memory_mib=self._memory_mib,
        )

    def sample(self, now_s: float) -> list[GpuReading]:
        elapsed = now_s - self.start_s
        return [self._read(gpu, now_s, elapsed) for gpu in self.gpus]

    def close(self) -> None:
        """Nothing to release."""

    # -- the executor's side -------------------------------------------------

    def add_load(
        self,
        gpu_index: int,
        task_id: str,
        *,
        share: float,
        util_pct: float,
        mem_mib: float,
        now_s: float,
    ) -> None:
        """Put (part of) a task on a GPU; replaces an earlier load of the same task."""
        gpu = self.gpus[gpu_index]
        gpu.loads[task_id] = Load(task_id, share, util_pct, mem_mib, now_s, self._shape(task_id))
        if task_id not in self._pids:
            self._pids[task_id] = self._next_pid
            self._next_pid += 1

    def remove_load(self, gpu_index: int, task_id: str) -> None:
        self.gpus[gpu_index].loads.pop(task_id, None)
        if not any(task_id in g.loads for g in self.gpus):
            self._pids.pop(task_id, None)

    def task_pids(self, task_id: str) -> set[int]:
        """The simulated process of a task placed here (empty when it is not): what
        the executor maps to the task, as it maps a real task's process tree."""
        pid = self._pids.get(task_id)
        return set() if pid is None else {pid}

    def task_usage(self, task_id: str, now_s: float) -> dict[int, tuple[float, float]]:
        """GPU index -> (utilisation points, memory MiB) the task uses now."""
        out: dict[int, tuple[float, float]] = {}
        for gpu in self.gpus:
            if task_id in gpu.loads:
                out[gpu.index] = gpu.usage(now_s, self.time_scale)[task_id]
        return out

    def gpu_speed(self, gpu_index: int, now_s: float) -> float:
        """Throughput factor of the GPU now: 1 healthy, less throttled, 0 failed."""
        gpu = self.gpus[gpu_index]
        if gpu.failed or self._fault("gpu-fail", gpu_index, now_s - self.start_s):
            return 0.0
        self._advance_thermal(gpu, now_s, now_s - self.start_s)
        return THROTTLED_SPEED if self._throttled(gpu) else 1.0

    def is_lost(self, now_s: float) -> bool:
        """True once an injected ``node-loss`` fault has hit: the node is silent."""
        return self._fault("node-loss", None, now_s - self.start_s) is not None

    # -- internals -----------------------------------------------------------

    def _shape(self, task_id: str) -> _Shape | None:
        if not self._active or self._curves is None:
            return None
        key = zlib.crc32(f"{self.seed}/{task_id}".encode())
        container = self._active[key % len(self._active)]
        util, mem = self._curves.util_pct[container], self._curves.mem_mib[container]
        phase = float((key >> 8) % max(1, int(util.span_s)))
        return _Shape(util, mem, float(np.mean(util.values)), float(np.max(mem.values)), phase)

    def _fault(self, kind: str, gpu: int | None, elapsed: float) -> Fault | None:
        for fault in self.faults:
            if fault.kind == kind and fault.gpu == gpu and fault.active(elapsed):
                return fault
        return None

    def _throttled(self, gpu: SimulatedGpu) -> bool:
        return gpu.temperature_c >= gpu.spec.throttle_temp_c

    def _util(self, gpu: SimulatedGpu, now_s: float) -> tuple[float, float]:
        usage = gpu.usage(now_s, self.time_scale).values()
        util = min(100.0, sum(u for u, _ in usage))
        foreign = sum(mib for _, mib in self._foreign(gpu.index, now_s - self.start_s))
        mem = min(float(gpu.spec.memory_mib), sum(m for _, m in usage) + foreign)
        return util, mem

    def _foreign(self, gpu_index: int, elapsed: float) -> list[tuple[int, float]]:
        """(pid, MiB) of the injected processes no task owns, active now on this GPU."""
        return [
            (SIM_FOREIGN_PID_BASE + i, float(f.mem_mib or 0))
            for i, f in enumerate(self.faults)
            if f.kind == "foreign-mem" and f.gpu == gpu_index and f.active(elapsed)
        ]

    def _processes(
        self, gpu: SimulatedGpu, now_s: float, elapsed: float
    ) -> tuple[ProcessUsage, ...]:
        """Per-process figures as NVML gives them: each task's process with its memory
        and SM points, then the foreign processes (memory only)."""
        out = [
            ProcessUsage(
                pid=self._pids[task_id],
                mem_used_mib=round(mem, 3),
                sm_util_pct=round(util, 3),
                mem_util_pct=round(util * 0.6, 3),
            )
            for task_id, (util, mem) in gpu.usage(now_s, self.time_scale).items()
            if task_id in self._pids
        ]
        out += [ProcessUsage(pid, mib, 0.0, 0.0) for pid, mib in self._foreign(gpu.index, elapsed)]
        return tuple(out)

    def _advance_thermal(self, gpu: SimulatedGpu, now_s: float, elapsed: float) -> float:
        """Move the temperature toward its load's steady state; return power (W)."""
        util, _ = self._util(gpu, now_s)
        spec = gpu.spec
        power = spec.tdp_w * (IDLE_POWER_SHARE + (1 - IDLE_POWER_SHARE) * util / 100.0)
        target = AMBIENT_C + (spec.throttle_temp_c - FULL_LOAD_HEADROOM_C - AMBIENT_C) * (
            power / spec.tdp_w
        )
        if self._fault("throttle", gpu.index, elapsed):
            target = spec.throttle_temp_c + COOLING_FAILURE_C
        if gpu.last_s is None:
            gpu.temperature_c = target
        elif now_s > gpu.last_s:
            dt_sim = (now_s - gpu.last_s) * self.time_scale
            gpu.temperature_c += (1 - math.exp(-dt_sim / THERMAL_TAU_S)) * (
                target - gpu.temperature_c
            )
        gpu.last_s = max(now_s, gpu.last_s or now_s)
        return power

    def _due_xids(self, gpu_index: int, elapsed: float) -> tuple[int, ...]:
        """XIDs injected on this GPU whose time has come, each reported once."""
        due: list[int] = []
        for i, fault in enumerate(self.faults):
            if (
                fault.kind == "xid"
                and fault.gpu == gpu_index
                and fault.xid is not None
                and fault.at_s <= elapsed
                and i not in self._xids_sent
            ):
                self._xids_sent.add(i)
                due.append(fault.xid)
        return tuple(due)

    def _read(self, gpu: SimulatedGpu, now_s: float, elapsed: float) -> GpuReading:
        if gpu.failed or self._fault("gpu-fail", gpu.index, elapsed):
            gpu.failed = True
            return GpuFault(gpu.index, "simulated: GPU is lost", fatal=True)
        power = self._advance_thermal(gpu, now_s, elapsed)
        util, mem = self._util(gpu, now_s)
        throttled = self._throttled(gpu)
        xids = self._due_xids(gpu.index, elapsed)
        return GpuSample(
            index=gpu.index,
            util_pct=round(util, 3),
            mem_used_mib=round(mem, 3),
            mem_total_mib=float(gpu.spec.memory_mib),
            temperature_c=round(gpu.temperature_c, 2),
            power_w=round(power, 2),
            power_limit_w=gpu.spec.tdp_w,
            sm_clock_mhz=NOMINAL_SM_CLOCK_MHZ * (THROTTLED_SPEED if throttled else 1.0),
            mem_util_pct=round(util * 0.6, 3),
            throttle_reasons=frozenset({"sw_thermal_slowdown"}) if throttled else frozenset(),
            ecc_sbe_total=0,
            ecc_dbe_total=0,
            xids=xids,
            processes=self._processes(gpu, now_s, elapsed),
        )


def _sim_uuid(hostname: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{hostname}.gpu{index}.hetsched.sim')}"


def _active_containers(curves: GenaiCurves) -> list[str]:
    """Containers whose curves carry load (a flat-zero curve would shape nothing)."""
    out = []
    for name in curves.containers():
        util, mem = curves.util_pct[name], curves.mem_mib[name]
        if (
            len(util.t_s) > 1
            and float(np.mean(util.values)) >= 1.0
            and float(np.max(mem.values)) > 0
        ):
            out.append(name)
    return out
