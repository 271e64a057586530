"""The pending queue: priority, weighted tenant fair share, aging and quotas. Pure.

Why this order: a cluster shared by teams must (1) run urgent work first
(priority), (2) split what is left by agreed weights rather than by who
submits fastest (fair share), (3) never let a task wait forever behind a
stream of more urgent or better-placed work (aging), and (4) keep one tenant
from taking more than it paid for (quota).

The order key of a queued task is, smallest first:

1. ``-level``, where ``level = priority + aging bonus``; the bonus grows by
   ``aging_step`` every ``aging_interval_s`` of waiting (in steps, so tasks of
   one priority that waited about as long still compare by fair share), and a
   task that waited ``starvation_s`` or more jumps to ``STARVED_LEVEL``, above
   any priority: that is the aging bound the tests check.
2. the tenant's GPU share divided by its weight (the dominant resource of a
   GPU cluster is the GPU): the tenant furthest below its weighted share goes
   first, so allocations converge to the weights;
3. the submission sequence number (FIFO among equals, deterministic).

Tenant usage is a projection updated incrementally by ``on_start`` and
``on_stop`` (Volcano/KAI style), never recomputed by scanning tasks. Time is
given by the caller (the cell's input events), never read from a clock.
``order="fifo"`` turns all of this off (the static baseline's FCFS).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

STARVED_LEVEL = 10_000
QOS_CLASSES = ("best_effort", "burstable", "guaranteed")


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Queue and dispatch settings (configuration; defaults documented in docs/simulation.md).

    ``tenant_weights``: fair-share weight per tenant (missing: ``default_weight``).
    ``tenant_quota_milli``: most GPU milli a tenant may hold at once (missing: no quota).
    ``backfill``: let later tasks start when they do not delay the head's reservation.
    ``strict_fifo``: stop at the first task that does not fit (static baseline).
    ``max_attempts``: placements tried per dispatch pass, bounding the work per event.
    ``default_duration_s``: runtime assumed for tasks that state none (reservations).
    ``preemption``: allow latency-sensitive/guaranteed tasks to preempt best-effort ones.
    ``preempt_priority``: priority from which a burstable task counts as latency-sensitive.
    ``preemptions_per_tick``: budget of preempted tasks between two ticks.
    """

    order: str = "fair"
    tenant_weights: Mapping[str, float] = field(default_factory=dict)
    default_weight: float = 1.0
    tenant_quota_milli: Mapping[str, int] = field(default_factory=dict)
    aging_interval_s: float = 600.0
    aging_step: int = 50
    starvation_s: float = 3600.0
    backfill: bool = True
    strict_fifo: bool = False
    max_attempts: int = 64
    default_duration_s: float = 3600.0
    preemption: bool = True
    preempt_priority: int = 500
    preemptions_per_tick: int = 16

    def __post_init__(self) -> None:
        if self.order not in ("fair", "fifo"):
            raise ValueError(f"queue order must be 'fair' or 'fifo', got {self.order!r}")
        if self.aging_interval_s <= 0 or self.starvation_s <= 0 or self.max_attempts < 1:
            raise ValueError("aging_interval_s, starvation_s and max_attempts must be positive")
        if any(w <= 0 for w in self.tenant_weights.values()) or self.default_weight <= 0:
            raise ValueError("tenant weights must be positive")
        object.__setattr__(self, "tenant_weights", MappingProxyType(dict(self.tenant_weights)))
        object.__setattr__(self, "tenant_quota_milli",
                           MappingProxyType(dict(self.tenant_quota_milli)))

    def weight(self, tenant: str) -> float:
        return float(self.tenant_weights.get(tenant, self.default_weight))


@dataclass(frozen=True, slots=True)
class TaskMeta:
    """What ordering, preemption and workflows need to know of a task beyond its shape."""

    tenant: str = "default"
    priority: int = 0
    qos: str = "burstable"
    expected_s: float | None = None
    depends_on: tuple[str, ...] = ()
    task_class: str = ""

    def __post_init__(self) -> None:
        if self.qos not in QOS_CLASSES:
            raise ValueError(f"unknown qos {self.qos!r} (known: {', '.join(QOS_CLASSES)})")


@dataclass(slots=True)
class Entry:
    task: str
    seq: int
    meta: TaskMeta
    demand_milli: int
    enqueued_s: float


class FairQueue:
    """Queued tasks and per-tenant usage; see the module docstring."""

    def __init__(self, config: QueueConfig | None = None) -> None:
        self.config = config or QueueConfig()
        self.entries: dict[str, Entry] = {}
        self.usage_milli: dict[str, int] = {}
        self.total_milli = 0

    # ---- container protocol (what views and metrics read) -----------------------

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __contains__(self, task: object) -> bool:
        return task in self.entries

    # ---- changes --------------------------------------------------------------------

    def push(self, task: str, seq: int, meta: TaskMeta, demand_milli: int,
             now_s: float) -> None:
        self.entries[task] = Entry(task, seq, meta, demand_milli, now_s)

    def remove(self, task: str) -> Entry | None:
        return self.entries.pop(task, None)

    def on_start(self, tenant: str, milli: int) -> None:
        self.usage_milli[tenant] = self.usage_milli.get(tenant, 0) + milli

    def on_stop(self, tenant: str, milli: int) -> None:
        left = self.usage_milli.get(tenant, 0) - milli
        if left:
            self.usage_milli[tenant] = left
        else:
            self.usage_milli.pop(tenant, None)

    # ---- order ------------------------------------------------------------------------

    def level(self, entry: Entry, now_s: float) -> int:
        """Priority plus the aging bonus (``STARVED_LEVEL`` past the starvation bound)."""
        cfg = self.config
        waited = max(0.0, now_s - entry.enqueued_s)
        if waited >= cfg.starvation_s:
            return STARVED_LEVEL
        return entry.meta.priority + int(waited // cfg.aging_interval_s) * cfg.aging_step

    def share(self, tenant: str) -> float:
        """The tenant's GPU share of the cell divided by its weight."""
        total = max(self.total_milli, 1)
        return self.usage_milli.get(tenant, 0) / total / self.config.weight(tenant)

    def over_quota(self, entry: Entry) -> bool:
        quota = self.config.tenant_quota_milli.get(entry.meta.tenant)
        if quota is None:
            return False
        return self.usage_milli.get(entry.meta.tenant, 0) + entry.demand_milli > quota

    def ordered(self, now_s: float) -> Iterator[Entry]:
        """Queued tasks in dispatch order, lazily (see the module docstring).

        Within one level, the next task comes from the tenant with the lowest
        weighted share *now*: usage changes as the caller starts tasks during
        the pass, so one pass already splits freed capacity by the weights.
        """
        entries = sorted(self.entries.values(), key=lambda e: e.seq)
        if self.config.order == "fifo":
            yield from entries
            return
        levels: dict[int, dict[str, deque[Entry]]] = {}
        for e in entries:
            levels.setdefault(-self.level(e, now_s), {}).setdefault(
                e.meta.tenant, deque()).append(e)
        for neg_level in sorted(levels):
            tenants = levels[neg_level]
            while tenants:
                name = min(tenants, key=lambda t: (self.share(t), tenants[t][0].seq))
                queue = tenants[name]
                yield queue.popleft()
                if not queue:
                    del tenants[name]
