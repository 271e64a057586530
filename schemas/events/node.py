"""Node-side events: inventory, liveness and threshold-triggered GPU telemetry.

Agents publish these (see ``agents/``); the scheduler folds them into its
cluster state. Telemetry is sent only when a threshold is crossed, so each
sample says which threshold fired.

Units: ``_mib`` mebibytes, ``_milli`` thousandths (CPU millicores, GPU share),
``_w`` watts, ``_c`` degrees Celsius, ``_s`` seconds, ``_us`` microseconds,
``_gbps`` gigabytes (10^9 bytes) per second, ``_tflops`` 10^12 FLOP/s,
``_pct`` percent 0..100.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from schemas.events.base import (
    CellId,
    Event,
    Name,
    NodeId,
    NonNegFloat,
    NonNegInt,
    Pct,
    PosInt,
    StrictModel,
    UtcDatetime,
)


class GpuSpec(StrictModel):
    """One GPU as inventoried at registration: identity, capability, topology."""

    index: NonNegInt
    """NVML index on the node (stable for the node's lifetime)."""
    uuid: Name
    """NVML UUID, e.g. ``GPU-8f1c...``; survives re-indexing."""
    model: Name
    """Model name as in the GPU catalog (``schemas/gpu_models.json``), e.g. ``V100M32``.

    Agents map the NVML name to it; an unknown model keeps the NVML name."""
    memory_mib: PosInt
    fp32_tflops: NonNegFloat
    """Peak dense FP32 throughput."""
    fp16_tflops: NonNegFloat
    """Peak dense FP16 (tensor core where present) throughput."""
    mem_bandwidth_gbps: NonNegFloat
    """Peak device memory bandwidth in GB/s."""
    power_limit_w: NonNegFloat
    numa_node: NonNegInt | None = None
    """NUMA node the GPU's PCIe root hangs off; None when unknown."""
    pcie_bus_id: str | None = None
    pcie_bandwidth_gbps: NonNegFloat | None = None
    """Host link bandwidth per direction in GB/s."""
    nvlink_peers: list[NonNegInt] = Field(default_factory=list)
    """Indices of GPUs on this node reachable over NVLink."""
    nvlink_bandwidth_gbps: NonNegFloat | None = None
    """Aggregate NVLink bandwidth per direction in GB/s; None without NVLink."""


class NodeRegistered(Event):
    """A node agent joined (or re-joined after restart) with its full inventory."""

    EVENT_TYPE: ClassVar[str] = "NodeRegistered"
    node_id: NodeId
    cell: CellId | None = None
    """Requested cell; None lets the scheduler's router choose."""
    pool: Name | None = None
    """Operator pool label (e.g. ``training``, ``inference``)."""
    rack: Name | None = None
    """Rack id used for locality and link metrics."""
    labels: dict[str, str] = Field(default_factory=dict)
    cpu_milli: PosInt
    """Allocatable CPU in millicores."""
    memory_mib: PosInt
    """Allocatable host memory."""
    gpus: list[GpuSpec]
    agent_version: str | None = None


class NodeHeartbeat(Event):
    """Slow liveness signal; missing ones make a node suspect, then failed."""

    EVENT_TYPE: ClassVar[str] = "NodeHeartbeat"
    node_id: NodeId
    seq: NonNegInt
    """Per-agent counter, restarting at 0 when the agent restarts."""
    running_task_ids: list[Name] = Field(default_factory=list)
    """Tasks the executor believes are running, for reconciliation."""


class NodeDraining(Event):
    """No new work may land on the node; running tasks may finish or be moved."""

    EVENT_TYPE: ClassVar[str] = "NodeDraining"
    node_id: NodeId
    reason: str
    deadline_s: NonNegFloat | None = None
    """Seconds after ``occurred_at`` when the node goes away; None if open-ended."""


class NodeFailed(Event):
    """The node is gone without a clean leave; its tasks must be rescheduled."""

    EVENT_TYPE: ClassVar[str] = "NodeFailed"
    node_id: NodeId
    reason: Literal["heartbeat_timeout", "agent_reported", "operator"]
    detail: str = ""
    last_heartbeat_at: UtcDatetime | None = None


class NodeLeft(Event):
    """Clean removal after draining."""

    EVENT_TYPE: ClassVar[str] = "NodeLeft"
    node_id: NodeId
    reason: str = ""


TelemetryMetric = Literal[
    "gpu_util_pct",
    "mem_used_pct",
    "temperature_c",
    "power_w",
    "throttle",
    "ecc_errors",
    "xid_errors",
]

ThrottleReason = Literal[
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
]
"""NVML clock event (throttle) reasons, snake-cased from ``nvmlClocksEventReason*``."""


class ThresholdCrossing(StrictModel):
    """Which threshold made the agent send this sample."""

    metric: TelemetryMetric
    direction: Literal["rising", "falling"]
    threshold: float
    """The configured threshold (after hysteresis) that was crossed."""
    value: float
    """The metric's value that crossed it."""


class GpuTelemetry(Event):
    """One GPU's sample, sent when a threshold is crossed (never periodically).

    ``triggers`` empty means a snapshot: sent once at agent start or on resync,
    or when the memory held by processes that belong to no task of the node
    (``foreign_mem_mib``) changed by more than the node's step.
    """

    EVENT_TYPE: ClassVar[str] = "GpuTelemetry"
    node_id: NodeId
    gpu_index: NonNegInt
    gpu_uuid: Name
    gpu_util_pct: Pct
    mem_used_mib: NonNegInt
    mem_util_pct: Pct | None = None
    """Memory-controller (bandwidth) utilisation, when the source has it."""
    temperature_c: float
    power_w: NonNegFloat
    throttle_reasons: list[ThrottleReason] = Field(default_factory=list)
    ecc_sbe_total: NonNegInt = 0
    """Volatile single-bit (corrected) ECC errors since driver load."""
    ecc_dbe_total: NonNegInt = 0
    """Volatile double-bit (uncorrected) ECC errors since driver load."""
    xid_errors: list[NonNegInt] = Field(default_factory=list)
    """XID codes observed since the previous sample of this GPU."""
    triggers: list[ThresholdCrossing] = Field(default_factory=list)
    foreign_mem_mib: NonNegInt | None = None
    """GPU memory used by processes that belong to no task the node's executor
    runs (NVML per-process accounting); None when the node cannot tell (no
    per-process accounting, or no executor beside the agent). The scheduler
    reserves it so that placement never books memory NVML shows in use."""


class GpuFailed(Event):
    """A single GPU is unusable; the rest of the node keeps working."""

    EVENT_TYPE: ClassVar[str] = "GpuFailed"
    node_id: NodeId
    gpu_index: NonNegInt
    gpu_uuid: Name
    reason: Literal["xid", "ecc_uncorrectable", "fell_off_bus", "thermal", "unknown"]
    xid: NonNegInt | None = None
    detail: str = ""


class LinkMetrics(Event):
    """Measured bandwidth and latency from this node to a peer node or rack."""

    EVENT_TYPE: ClassVar[str] = "LinkMetrics"
    node_id: NodeId
    """The measuring node (the topic key)."""
    peer_id: Name
    """Peer node id, or rack id when ``scope`` is ``rack``."""
    scope: Literal["node", "rack"]
    bandwidth_gbps: NonNegFloat
    latency_us: NonNegFloat
