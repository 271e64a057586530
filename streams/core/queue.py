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
2. with ``predict_runtimes``, the task's size class: the decade of the GPU-seconds
   it is expected to need still (``size_class``; set by the cell when it queues
   the task, 0 otherwise). Shortest first is what minimises mean completion
   time (SRPT); decades rather than exact sizes keep the order coarse, so fair
   share (3) still splits capacity between tenants whose work is of one size,
   and aging (1) still lifts a long task above every short one in the end. A task
   predicted to need more than ``starvation_s`` still ages ``2 ** age_class``
   times slower (``Entry.age_class``, ``Cell._age_class``): its bound on waiting
   is about its own remaining run time, not one hour, so a multi-day job does not
   go ahead of every short one after an hour;
3. the tenant's GPU share divided by its weight (the dominant resource of a
   GPU cluster is the GPU): the tenant furthest below its weighted share goes
   first, so allocations converge to the weights;
4. the submission sequence number (FIFO among equals, deterministic).

Tenant usage is a projection updated incrementally by ``on_start`` and
``on_stop`` (Volcano/KAI style), never recomputed by scanning tasks. Time is
given by the caller (the cell's input events), never read from a clock.
``order="fifo"`` turns all of this off (the fifo/static baseline's FCFS);
``order="priority"`` keeps only (1), without aging, and (4): the job's own
priority, then submission order, the order Slurm's schedulers walk the queue
in (the backfill baseline; no fair share, no aging).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

STARVED_LEVEL = 10_000
QUEUE_ORDERS = ("fair", "fifo", "priority")
QOS_CLASSES = ("best_effort", "burstable", "guaranteed")
PREDICTING_MARK = "queue_predicts_runtimes"
"""The metric (1.0) a placement's reason carries when the queue ran with
``predict_runtimes``: the setting is part of the decisions, so an audit replay takes it
from the log (a log without it was recorded without prediction)."""


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """Queue and dispatch settings (configuration; defaults documented in docs/simulation.md).

    ``tenant_weights``: fair-share weight per tenant (missing: ``default_weight``).
    ``tenant_quota_milli``: most GPU milli a tenant may hold at once (missing: no quota).
    ``backfill``: let later tasks start when they do not delay the head's reservation.
    ``strict_fifo``: stop at the first task that does not fit (static baseline).
    ``max_attempts``: placements tried per dispatch pass, bounding the work per event;
    ``max_scan``: queued tasks looked at per pass (skipping shapes that failed).
    ``default_duration_s``: runtime assumed for tasks that state none (reservations).
    ``preemption``: allow latency-sensitive/guaranteed tasks to preempt best-effort ones.
    ``preempt_priority``: priority from which a burstable task counts as latency-sensitive.
    ``preemptions_per_tick``: budget of preempted tasks between two ticks.
    ``predict_runtimes``: reservations and backfill take a task that declares no runtime
    to run what its peers ran (streams.core.predictor), not ``default_duration_s``, and
    its placement says so, and the queue orders by the size class. Off here, for the
    bare mechanics; on in hetsched's queue (the worker's ``HETSCHED_PREDICT_RUNTIMES``
    and ``simulate``'s ``hetsched``), since it met issue 31's targets.
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
    max_scan: int = 512
    default_duration_s: float = 3600.0
    preemption: bool = True
    preempt_priority: int = 500
    preemptions_per_tick: int = 16
    predict_runtimes: bool = False

    def __post_init__(self) -> None:
        if self.order not in QUEUE_ORDERS:
            raise ValueError(f"queue order must be one of {', '.join(map(repr, QUEUE_ORDERS))}, "
                             f"got {self.order!r}")
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
    name: str = ""
    """The job's name (e.g. ``resnet50``), shared by its runs: the closest peers a run
    time is predicted from (streams.core.predictor); "" when not given."""
    elastic: tuple[int, ...] = ()
    """(min_gpus, max_gpus) of a task that may run on any whole-GPU count in that range
    (``Cell``'s elastic sizing); () for a task of a fixed count."""

    def __post_init__(self) -> None:
        if self.qos not in QOS_CLASSES:
            raise ValueError(f"unknown qos {self.qos!r} (known: {', '.join(QOS_CLASSES)})")
        if self.elastic and not 1 <= self.elastic[0] <= self.elastic[1]:
            raise ValueError(f"elastic range {self.elastic!r}: needs 1 <= min_gpus <= "
                             "max_gpus")


@dataclass(slots=True)
class Entry:
    task: str
    seq: int
    meta: TaskMeta
    demand_milli: int
    enqueued_s: float
    size_class: int = 0
    shape: object = None
    """The caller's shape of the task (the cell's ``TaskRequest.key``), counted in
    ``FairQueue.shapes``."""
    age_class: int = 0
    """Its waiting time counts ``2 ** age_class`` times slower toward aging (set by the
    cell with ``predict_runtimes`` for a task predicted to run long; 0 otherwise)."""


class FairQueue:
    """Queued tasks and per-tenant usage; see the module docstring.

    Entries live in buckets, one per (tenant, priority, size class), each in enqueue order:
    within a bucket the oldest task has waited longest, so it has the highest
    level. A dispatch pass merges the bucket heads lazily, so it costs a few
    operations per task it looks at, not a sort of the whole queue per event.
    Removal is lazy (a bucket keeps stale entries until compaction).
    """

    def __init__(self, config: QueueConfig | None = None) -> None:
        self.config = config or QueueConfig()
        self.entries: dict[str, Entry] = {}
        self.buckets: dict[tuple[str, int, int, int], list[Entry]] = {}
        self._stale = 0
        self._iterating = 0
        self._reorder = False  # a pass must rank every bucket head again (see _merge)
        self._yielded: str | None = None
        self.usage_milli: dict[str, int] = {}
        self.total_milli = 0
        self._usage_gen = 0  # bumped by every usage change (a pass's shares are kept till then)
        self.shapes: dict[object, int] = {}
        """Queued tasks per shape (``Entry.shape``): a pass that found every shape
        still queued unplaceable can stop (``Cell._drain``)."""
        # Tenant weights of the objectives rule in force (streams.core.objectives), set by
        # the cell from event time and load before each pass; None: the config's weights.
        self.weights: Mapping[str, float] | None = None

    # ---- container protocol (what views and metrics read) -----------------------

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __contains__(self, task: object) -> bool:
        return task in self.entries

    # ---- changes --------------------------------------------------------------------

    def _bucket(self, meta: TaskMeta, size_class: int,
                age_class: int = 0) -> tuple[str, int, int, int]:
        order = self.config.order
        if order == "fair":
            return (meta.tenant, meta.priority, size_class, age_class)
        return ("", meta.priority if order == "priority" else 0, 0, 0)

    def push(self, task: str, seq: int, meta: TaskMeta, demand_milli: int,
             now_s: float, size_class: int = 0, shape: object = None,
             age_class: int = 0) -> None:
        if task in self.entries:
            self.remove(task)
        entry = Entry(task, seq, meta, demand_milli, now_s, size_class, shape, age_class)
        self.entries[task] = entry
        self.shapes[shape] = self.shapes.get(shape, 0) + 1
        self.buckets.setdefault(self._bucket(meta, size_class, age_class), []).append(entry)

    def remove(self, task: str) -> Entry | None:
        entry = self.entries.pop(task, None)
        if entry is not None:
            left = self.shapes[entry.shape] - 1
            if left:
                self.shapes[entry.shape] = left
            else:
                del self.shapes[entry.shape]
            self._stale += 1
            if self._iterating and task != self._yielded:
                self._reorder = True
            if not self._iterating and self._stale > 64 and self._stale > len(self.entries):
                self._compact()
        return entry

    def _compact(self) -> None:
        for key in list(self.buckets):
            live = [e for e in self.buckets[key] if self.entries.get(e.task) is e]
            if live:
                self.buckets[key] = live
            else:
                del self.buckets[key]
        self._stale = 0

    def on_start(self, tenant: str, milli: int) -> None:
        self._usage_gen += 1
        self.usage_milli[tenant] = self.usage_milli.get(tenant, 0) + milli

    def on_stop(self, tenant: str, milli: int) -> None:
        self._usage_gen += 1
        if self._iterating:
            self._reorder = True  # the tenant's share falls: heads may rank earlier now
        left = self.usage_milli.get(tenant, 0) - milli
        if left:
            self.usage_milli[tenant] = left
        else:
            self.usage_milli.pop(tenant, None)

    # ---- order ------------------------------------------------------------------------

    def level(self, entry: Entry, now_s: float) -> int:
        """Priority plus the aging bonus (``STARVED_LEVEL`` past the starvation bound)."""
        cfg = self.config
        waited = max(0.0, now_s - entry.enqueued_s) / (1 << entry.age_class)
        if waited >= cfg.starvation_s:
            return STARVED_LEVEL
        return entry.meta.priority + int(waited // cfg.aging_interval_s) * cfg.aging_step

    def share(self, tenant: str) -> float:
        """The tenant's GPU share of the cell divided by its weight."""
        total = max(self.total_milli, 1)
        w = self.weights.get(tenant) if self.weights is not None else None
        return self.usage_milli.get(tenant, 0) / total / (w or self.config.weight(tenant))

    def over_quota(self, entry: Entry) -> bool:
        quota = self.config.tenant_quota_milli.get(entry.meta.tenant)
        if quota is None:
            return False
        return self.usage_milli.get(entry.meta.tenant, 0) + entry.demand_milli > quota

    def ordered(self, now_s: float) -> Iterator[Entry]:
        """Queued tasks in dispatch order, lazily (see the module docstring).

        The next task is the bucket head with the highest level, then the
        smallest size class, then the tenant with the lowest weighted share
        *now* (usage changes as the caller starts tasks during the pass, so one
        pass already splits freed capacity by the weights), then the lowest
        sequence number. The caller
        may start or remove the yielded task before asking for the next.
        """
        self._iterating += 1
        try:
            yield from self._merge(now_s)
        finally:
            self._iterating -= 1

    def _merge(self, now_s: float) -> Iterator[Entry]:
        """Merge the bucket heads by rank with a lazy heap: O(log buckets) per task.

        Same order as taking the minimum over every bucket head at each step
        (the order key is unique: it ends with the sequence number). Stored
        ranks stay lower bounds of the current ones because, within a pass,
        a head's rank only grows (its tenant's share grows as the caller
        starts tasks); a popped head whose rank grew is pushed back with the
        new one. What can lower a rank mid-pass (a preemption stopping a
        tenant's task, a removal other than the yielded task) marks the pass
        ``_reorder`` and every head is ranked again.
        """
        order = self.config.order
        # No sorting needed: ranks end with the unique sequence number, so the heap's
        # order does not depend on the order buckets are put in.
        cursors = dict.fromkeys(self.buckets, 0)
        heap: list[tuple[tuple[float, ...], tuple[str, int, int, int]]] = []
        cfg = self.config
        starvation_s, aging_interval_s, aging_step = (cfg.starvation_s, cfg.aging_interval_s,
                                                      cfg.aging_step)
        shares: dict[str, float] = {}
        shares_gen = [self._usage_gen]

        def head_rank(key: tuple[str, int, int, int]) -> tuple[float, ...] | None:
            bucket = self.buckets.get(key, [])
            i = cursors[key]
            while i < len(bucket) and self.entries.get(bucket[i].task) is not bucket[i]:
                i += 1
            if i and not cursors[key] and self._iterating == 1:
                # Removed entries ahead of the bucket's first live one: drop them now,
                # or every later pass walks them again until the next compaction.
                # Safe: no other pass holds a cursor into this list.
                del bucket[:i]
                self._stale -= i
                i = 0
            if i >= len(bucket):
                del cursors[key]
                if not bucket and self._iterating == 1:
                    self.buckets.pop(key, None)  # emptied: later passes need not visit it
                return None
            cursors[key] = i
            e = bucket[i]
            if order == "fifo":
                return (e.seq,)
            if order == "priority":
                return (-e.meta.priority, e.seq)
            # self.level(e, now_s) and self.share(tenant), inlined: this runs twice per
            # task a pass looks at; a tenant's share is kept until its usage changes.
            waited = max(0.0, now_s - e.enqueued_s)
            if e.age_class:
                waited /= 1 << e.age_class
            if waited >= starvation_s:
                level, size = STARVED_LEVEL, 0  # the bound beats size
            else:
                level = e.meta.priority + int(waited // aging_interval_s) * aging_step
                size = e.size_class if level < STARVED_LEVEL else 0
            tenant = e.meta.tenant
            if shares_gen[0] != self._usage_gen:
                shares.clear()
                shares_gen[0] = self._usage_gen
            share = shares.get(tenant)
            if share is None:
                share = shares[tenant] = self.share(tenant)
            return (-level, size, share, e.seq)

        def rank_all() -> None:
            heap.clear()
            for key in list(cursors):
                rank = head_rank(key)
                if rank is not None:
                    heap.append((rank, key))
            heapq.heapify(heap)
            self._reorder = False

        rank_all()
        while heap:
            if self._reorder:
                rank_all()
                continue
            stored, key = heap[0]
            rank = head_rank(key) if key in cursors else None
            if rank is None:
                heapq.heappop(heap)
                continue
            if rank != stored:
                heapq.heapreplace(heap, (rank, key))
                continue
            heapq.heappop(heap)
            entry = self.buckets[key][cursors[key]]
            cursors[key] += 1
            self._yielded = entry.task
            yield entry
            if key in cursors:
                rank = head_rank(key)
                if rank is not None:
                    heapq.heappush(heap, (rank, key))
