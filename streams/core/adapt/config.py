"""Thresholds and budgets of adaptation, with documented defaults.

Why a frozen record and not module constants: the same cell code runs in the
worker, the simulator and audit replay, each with its own settings; tests use
short windows. ``from_env`` reads ``HETSCHED_*`` variables once, at cell
construction (never per decision), so a decision depends only on the log and
this record.

=================================  =======  ==========================================
variable                           default  meaning
=================================  =======  ==========================================
HETSCHED_HEARTBEAT_TIMEOUT_S       90       node lost after this long without heartbeat
HETSCHED_ELASTIC_WINDOW_S          60       utilisation must hold this long to resize
HETSCHED_ELASTIC_COOLDOWN_S        120      no second resize of a task within this
HETSCHED_PROBE_S                   0 (off)  probe window of tasks without features
HETSCHED_MIGRATION_BUDGET          4        migrations per budget window (cell)
HETSCHED_OVERUSE_POLICY            warn     warn | rebook | move | stop
HETSCHED_DEFRAG                    0 (off)  1: free whole GPUs for a stuck multi-GPU task
HETSCHED_CONSOLIDATE_PCT           0 (off)  consolidate onto fewer nodes below this load
HETSCHED_MODEL_SPEED               0 (off)  1: moves weigh GPU model speed (``speed.py``)
HETSCHED_GPU_RESERVED_PCT          2        unexplained GPU memory up to this % is the
                                            driver's own (not reserved as a phantom)
=================================  =======  ==========================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class ElasticConfig:
    """Resizing thresholds of one QoS class (percent of GPU utilisation, seconds)."""

    high_pct: float = 90.0
    low_pct: float = 30.0
    window_s: float = 60.0
    cooldown_s: float = 120.0


def _default_elastic() -> tuple[tuple[str, ElasticConfig], ...]:
    # Guaranteed tasks shrink only when clearly idle; best-effort ones grow last.
    return (("guaranteed", ElasticConfig(low_pct=20.0)),
            ("burstable", ElasticConfig()),
            ("best_effort", ElasticConfig(high_pct=95.0, cooldown_s=300.0)))


@dataclass(frozen=True, slots=True)
class AdaptConfig:
    """See the module docstring; every field has the documented default."""

    heartbeat_timeout_s: float = 90.0
    elastic: tuple[tuple[str, ElasticConfig], ...] = field(default_factory=_default_elastic)
    probe_s: float = 0.0
    """Probe window; 0 disables probing. Off by default because it changes the first
    decision of every featureless submission (TaskProbe instead of TaskPlaced), which
    existing submitters and tests expect; the simulator and bench turn it on (60 s)."""
    probe_share_milli: int = 500
    """A probe runs on half of one GPU: small, yet enough to see the task's behaviour."""
    compute_util_pct: float = 60.0
    """Probe utilisation at or above this (with low memory bandwidth) means compute-bound."""
    data_mem_util_pct: float = 40.0
    """Memory-controller utilisation at or above this means data (bandwidth) bound."""
    bursty_cv: float = 0.35
    """Coefficient of variation of utilisation above this means bursty."""
    long_s: float = 3600.0
    """Tasks expected to run at least this long are 'long'."""
    migration_budget: int = 4
    migration_budget_window_s: float = 600.0
    migration_bandwidth_gbps: float = 1.25
    """Checkpoint transfer bandwidth (GB/s); 1.25 = 10 Gbit/s Ethernet."""
    migration_restart_s: float = 30.0
    migration_min_gain: float = 1.5
    """Move only when the expected time saved exceeds the cost by this factor."""
    default_remaining_s: float = 1800.0
    """Remaining runtime assumed for a task that declared no duration."""
    throttle_slowdown: float = 0.5
    """Share of speed a throttled GPU loses (for the migration benefit)."""
    thermal_margin_c: float = 5.0
    """No new work on a node with a GPU within this of its throttle temperature."""
    hot_util_pct: float = 95.0
    """A node whose GPUs all run above this is a hot spot (if others idle)."""
    hot_slowdown: float = 0.1
    """Share of speed lost on a hot-spot node (shared host, PCIe and power limits)."""
    hot_spot_onto_idle: bool = False
    """A hot-spot move lands only on a node already running something: moving a whole-GPU
    task from a full node onto an idle one leaves two half-used nodes where a whole-node
    job found one, and with consolidation on, the idle node is the one consolidation just
    emptied, so the two moves undo each other tick after tick. True: the original rule
    (any node, idle ones included)."""
    overuse_tolerance: float = 0.10
    gpu_reserved_pct: float = 2.0
    """Memory in use that no booking explains, up to this percent of a GPU's memory, is the
    GPU's own reserve (driver, firmware: NVML's ``used`` counts it, ~0.9 GiB of an idle
    80 GB A100) and is not reserved as a phantom booking; above it, all of it is. Without
    it no idle GPU stayed whole and whole-GPU tasks waited for ever
    (``streams.core.adapt.reconcile``). 0: the original rule (any such memory reserved)."""
    overuse_policy: str = "warn"
    """What a task over its GPU memory booking gets: ``warn`` (counted; the node's
    ``TaskOverUse`` makes it visible on the bus), ``rebook``, ``move`` or ``stop``.
    Warn by default: acting on a task needs an operator's say-so, while placement is
    already protected because memory in use beyond the bookings is reserved."""
    elastic_headroom_nodes: int = 0
    """Grow an elastic task only while at least this many healthy nodes of its node's GPU
    model stay wholly idle. Growth spreads onto free GPUs of busy nodes, so nodes stop
    emptying and a whole-node job waits (seen in the mixed-day simulation, BENCHMARKS.md
    section adapt). 0 keeps the original rule (any free GPU on the task's node)."""
    elastic_keep_slots: bool = True
    """Growth takes a GPU only where it breaks no free slot of a typical multi-GPU shape
    (``elastic.SLOT_SHAPES``: 2, 4 and 8 whole GPUs) on the task's node, i.e. only an
    odd one out; and borrowed GPUs are reclaimed only for a queued task that would fit on
    the node with them. Without it growth ate the free pairs and quads of busy nodes, so
    arrivals opened idle nodes and whole-node jobs waited longer (BENCHMARKS.md, adapt).
    False: the original rules (any free GPU; reclaim on the first tick anyone waits)."""
    probe_in_place_gpus: int = 0
    """Tasks asking for at least this many GPUs are probed on their full request (the
    probe window classifies them, no move follows): shrinking a multi-GPU task to half a
    GPU and moving it back later needs a second placement of the big shape, which may
    find no room. 0: every featureless task is probed on half a GPU (the original rule)."""
    defrag: bool = False
    """Defragmentation moves: off by default because they change decisions of existing
    logs (a queued multi-GPU task may start earlier, on a node emptied for it)."""
    defrag_scan: int = 4
    """Queued multi-GPU tasks examined per tick (bounds the work of one tick)."""
    consolidate_pct: float = 0.0
    """Off-peak consolidation: when allocated GPU share of healthy capacity is below this
    percentage and nothing waits, empty the least-loaded node onto already busy ones so
    it can be powered down. 0 disables it (the default: it trades restarts for energy)."""
    model_speed: bool = False
    """Declared durations are run times on the fastest GPU model a task may use, and a
    slower model runs it slower (FP32 TFLOPS for compute work, memory bandwidth for data
    work, from the catalog in the cluster state): the placement after a probe and the
    hot-spot, throttle, drain, defragmentation and consolidation moves then weigh
    completion time against energy per unit of work by the hour's objectives
    (``streams.core.adapt.speed``), and a move onto a model so slow that the task loses
    more time than the move gains is not made. Off by default: it changes the decisions
    of existing logs, and without it every model is taken to run a task alike."""

    def elastic_for(self, qos: str) -> ElasticConfig:
        for name, cfg in self.elastic:
            if name == qos:
                return cfg
        return ElasticConfig()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AdaptConfig:
        """Defaults overridden by ``HETSCHED_*`` variables (see the module docstring)."""
        env = os.environ if env is None else env
        cfg = cls()

        def num(name: str, default: float) -> float:
            raw = env.get(name, "").strip()
            return float(raw) if raw else default

        window = num("HETSCHED_ELASTIC_WINDOW_S", -1.0)
        cooldown = num("HETSCHED_ELASTIC_COOLDOWN_S", -1.0)
        elastic = tuple(
            (q, replace(e, window_s=window if window > 0 else e.window_s,
                        cooldown_s=cooldown if cooldown > 0 else e.cooldown_s))
            for q, e in cfg.elastic)
        policy = env.get("HETSCHED_OVERUSE_POLICY", "").strip() or cfg.overuse_policy
        if policy not in ("warn", "rebook", "move", "stop"):
            raise SystemExit(f"HETSCHED_OVERUSE_POLICY={policy!r}: warn, rebook, move or stop")
        return replace(
            cfg, heartbeat_timeout_s=num("HETSCHED_HEARTBEAT_TIMEOUT_S", cfg.heartbeat_timeout_s),
            probe_s=num("HETSCHED_PROBE_S", cfg.probe_s), elastic=elastic,
            migration_budget=int(num("HETSCHED_MIGRATION_BUDGET", cfg.migration_budget)),
            overuse_policy=policy, defrag=num("HETSCHED_DEFRAG", 0.0) > 0,
            consolidate_pct=num("HETSCHED_CONSOLIDATE_PCT", cfg.consolidate_pct),
            model_speed=num("HETSCHED_MODEL_SPEED", 0.0) > 0,
            gpu_reserved_pct=num("HETSCHED_GPU_RESERVED_PCT", cfg.gpu_reserved_pct))
