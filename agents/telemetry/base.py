"""The one interface every GPU telemetry source implements.

The agent loop, the trigger engine and the tests only ever see these types, so
a real NVML node, a trace-replayed simulated node and a fake ``pynvml`` in the
tests are interchangeable. Sources never raise for a single misbehaving GPU:
they return a :class:`GpuFault` in that GPU's place, and the trigger engine
decides whether it is worth a ``GpuFailed`` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"})
"""Throttle reasons that mean heat. ``hw_slowdown`` is set for thermal or power-brake
events alike; NVML sets it together with one of the specific reasons, so counting it
as thermal only matters on GPUs that report nothing more specific."""
POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
"""Throttle reasons that mean the power limit is binding."""


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Inventory of one GPU, read once at start for ``NodeRegistered``."""

    index: int
    uuid: str
    model: str
    memory_mib: int
    power_limit_w: float | None = None
    pcie_bus_id: str | None = None
    numa_node: int | None = None
    nvlink_peers: tuple[int, ...] = ()
    """Indices of GPUs on this node reachable over an active NVLink."""
    pcie_bandwidth_gbps: float | None = None
    """Host link bandwidth per direction (GB/s) at the link's maximum generation and width."""
    nvlink_bandwidth_gbps: float | None = None
    """Aggregate NVLink bandwidth per direction (GB/s); None without NVLink."""
    topology: dict[int, str] = field(default_factory=dict)
    """Peer index -> NVML common-ancestor level (``internal``, ``single``, ``multiple``,
    ``hostbridge``, ``node``, ``system``): how far apart two GPUs sit on PCIe."""


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """What the node has, as the source sees it."""

    hostname: str
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None = None
    cpu_count: int | None = None
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """One process's use of one GPU (NVML per-process accounting).

    Why per process: a GPU shared by several tasks, or by a task and a process
    the scheduler never placed, reports one memory figure for everyone; only
    the per-pid figures let the node say which task uses what and which memory
    belongs to nobody it runs.
    """

    pid: int
    """Host pid (the agent must see the host pid namespace for pids to match)."""
    mem_used_mib: float | None
    """GPU memory the process holds; None where the driver cannot say (WDDM)."""
    sm_util_pct: float | None = None
    """Share of the GPU's SM time the process used over the last sample period, in
    points of the whole GPU; None when per-process utilisation is unsupported."""
    mem_util_pct: float | None = None
    """Its share of memory-controller (bandwidth) time, same unit; None if unsupported."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU. ``None`` means the GPU does not support that counter."""

    index: int
    util_pct: float
    mem_used_mib: float
    mem_total_mib: float
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_util_pct: float | None = None
    """Memory-controller (bandwidth) utilisation, when the source has it."""
    throttle_reasons: frozenset[str] = frozenset()
    """Active clock event reasons, snake-cased NVML names (``sw_thermal_slowdown``...)."""
    ecc_sbe_total: int | None = None
    """Volatile (since driver load) corrected ECC error count."""
    ecc_dbe_total: int | None = None
    """Volatile (since driver load) uncorrected ECC error count."""
    xids: tuple[int, ...] = ()
    """XID error codes seen since the previous sample."""
    processes: tuple[ProcessUsage, ...] | None = None
    """Compute processes on the GPU now; None when the source has no per-process
    accounting for this GPU (then usage is split by booked share)."""
    foreign_mem_mib: float | None = None
    """Memory of processes that belong to no task of this node's executor. Sources
    leave it None; the agent fills it in from ``processes`` and the executor's pids."""

    @property
    def thermal_throttled(self) -> bool:
        """Clocks are held down because the GPU is too hot."""
        return not THERMAL_REASONS.isdisjoint(self.throttle_reasons)

    @property
    def power_throttled(self) -> bool:
        """Clocks are held down by the power cap or a power brake."""
        return not POWER_REASONS.isdisjoint(self.throttle_reasons)

    @property
    def mem_used_pct(self) -> float | None:
        """Memory used as a percentage of total (None when total is unknown)."""
        if self.mem_total_mib <= 0:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib

    @property
    def power_pct_of_limit(self) -> float | None:
        """Power draw as a percentage of the enforced limit (None when unknown)."""
        if self.power_w is None or not self.power_limit_w:
            return None
        return 100.0 * self.power_w / self.power_limit_w


@dataclass(frozen=True, slots=True)
class GpuFault:
    """A GPU that did not answer this time.

    ``fatal`` faults (GPU lost, fallen off the bus) fail the GPU at once;
    others (a timeout) only after several in a row, see the trigger config.
    """

    index: int
    reason: str
    fatal: bool


GpuReading = GpuSample | GpuFault


@runtime_checkable
class TelemetrySource(Protocol):
    """A node's GPUs. ``now_s`` is the agent's monotonic clock, passed in so that
    simulated sources and tests control time."""

    def inventory(self) -> NodeInventory:
        """The node's GPUs and host facts; called once at start."""
        ...

    def sample(self, now_s: float) -> list[GpuReading]:
        """One reading per inventoried GPU (a fault in place of a GPU that failed)."""
        ...

    def close(self) -> None:
        """Release the library/handles; idempotent."""
        ...


class SourceUnavailable(RuntimeError):
    """The source cannot run on this machine at all (e.g. no NVML library)."""
