"""One scheduling cell: cluster state, the tasks it knows, and its pending queue. Pure.

The service runs one ``Cell`` per cell of the input log; the time simulator
(``streams.sim.time``) runs the same class on a virtual clock. A cell wraps
the core's ``ClusterState`` and ``step`` with what a long-running scheduler
needs and the bare core does not keep:

* **Task records**: every task submitted to the cell, with an opaque ``spec``
  (whatever the caller needs to emit full decisions, e.g. the submission's
  executor), its ``TaskMeta`` (tenant, priority, QoS, expected runtime,
  dependencies) and its status (``waiting`` for predecessors, ``queued``,
  ``running``, ``done``). Knowing done tasks keeps a task id taken for good: the
  same submission read again (a producer's retry) is a no-op, and any other
  submission of a known id is rejected (:meth:`Cell.answer_taken_id`) instead
  of a second placement or a silent drop.
* **Pending queue** (``streams.core.queue``, issue 7): priority, weighted
  tenant fair share with quotas, and aging. A dispatch pass walks it in that
  order, bounded by ``max_attempts``; the first task that does not fit becomes
  the *head*: it may take GPUs elastic tasks give back (``Cell._shrink_for``), or
  preempt best-effort work (``streams.core.preemption``, budget per tick; with
  ``predict_runtimes`` also much longer work, a gang head too:
  ``Cell._preempt_for_gang``), else it gets a reservation (the node and time it can
  start at the earliest, from the expected ends of running tasks), and later
  tasks are backfilled only where they cannot delay it.
* **Workflows** (``streams.core.workflow``): a task that depends on others
  waits until they all finished; then it is queued with its input on its
  predecessor's node, which the ``locality`` policy prefers.
* **Records for persistence**: ``node_record``/``task_record``/``meta_record``
  are small JSON-able dicts with sequence numbers, and ``Cell.restore``
  rebuilds an identical cell from them (same node order, so the same
  tie-breaks and the same decisions as a cell that never restarted).
  ``dirty_nodes``/``dirty_tasks`` say which records changed since the caller
  last saved them.

Time is ``now_s`` given with each input (the event's ``occurred_at``); when
omitted the cell's last time is kept. No I/O, no clock, no unordered
iteration: replaying the same inputs gives the same outcomes, which audit
replay relies on.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.core import elastic_sizing, gang
from streams.core.adapt.config import AdaptConfig
from streams.core.adapt.outcomes import AdaptOutcome
from streams.core.adapt.restore import after_restore
from streams.core.adapt.runtime import AdaptRuntime
from streams.core.decisions import Placement, Unschedulable
from streams.core.events import (
    LinkMeasured,
    NodeAdded,
    NodeHealthChanged,
    TaskArrived,
    TaskEnded,
)
from streams.core.objectives import WeightSchedule
from streams.core.policy import NodesView, Verdict
from streams.core.predictor import DurationPredictor, Prediction, TaskKind
from streams.core.preemption import (
    Victim,
    choose_victims,
    empty_fit_mask,
    fits_after,
    is_preemptor,
    may_preempt,
    victim_cost,
)
from streams.core.queue import Entry, FairQueue, QueueConfig, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import PlaceResult, Scheduler, place, place_on_copy
from streams.core.speed_book import Estimate, SpeedBook, catalog_speeds
from streams.core.state import ClusterState
from streams.core.step import MAX_GPUS_PER_NODE, evolve, gang_placement, step

WAITING, QUEUED, RUNNING, DONE = "waiting", "queued", "running", "done"
RESERVATION_NODES = 32  # candidate nodes examined for the head's reservation
RESTART_S = 60.0
"""What stopping a task costs it when it runs again (checkpoint, reload, warm-up): the
Tiresias paper measured about 62 s on average (Gu et al., NSDI'19)."""
SIZE_PREEMPT_GAIN = 2.0  # see Cell._shorter_first
SIZE_PREEMPTIONS_PER_TASK = 1
"""A task is stopped for a shorter one at any time once; past that, only after it ran
``RESTART_S / RESTART_SHARE`` since it last started (``Cell._shorter_first``)."""
RESTART_SHARE = 0.05
"""Past its first, a task is stopped for a shorter one again only once it ran for
``RESTART_S / RESTART_SHARE`` (20 min) since it last started: its restarts then cost it at
most this share of its run time, and it always makes that much progress between stops."""
MAX_AGE_CLASS = 16  # see Cell._age_class: 2 ** 16 h is past any run time
CHANGE_GUARD_S = RESTART_S / RESTART_SHARE
"""A task that changed GPU model (a move, ``Cell._move_to_faster``, or one side of a
swap, ``Cell._swap_for_least_attained``) changes again only once it ran this long (20
min) since: its restarts then cost it at most ``RESTART_SHARE`` of its run time, the
bound ``_shorter_first`` keeps for repeated preemptions. It is the bound on a task's
model changes: at most one more per 20 minutes it runs."""
SWAP_EVERY_TICKS = 10
"""Ticks between two passes of ``Cell._swap_for_least_attained``: a pass scans every
running task with speeds, and a task changes model at most once per 20 minutes
(``CHANGE_GUARD_S``), so looking every tenth tick
(ten minutes at the simulator's one-minute ticks, 50 s at the service's default
``HETSCHED_TICK_S`` of 5 s) finds the swaps that matter for little work. By tick
number, so a restored cell looks at the same ticks."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The task cannot be placed now; ``resolvable`` False: never in this cell."""

    unschedulable: Unschedulable
    resolvable: bool


@dataclass(frozen=True, slots=True)
class Stopped:
    """A running task was cancelled: the executor must stop it; its resources are free."""

    task: str
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Preempted:
    """A task was stopped for ``by_task`` (an urgent one, or a much shorter one); it is
    queued again with its progress."""

    task: str
    node: str
    by_task: str
    progress_s: float
    why: str = ""
    """Why, in words, when it is not for ``by_task`` (the task changes GPU model)."""


@dataclass(frozen=True, slots=True)
class TaskIdTaken:
    """A submission asked for a task id the cell already has: it is rejected, and the
    task holding the id goes on untouched. ``message`` is what its submitter is told
    (see :meth:`Cell.answer_taken_id`)."""

    task: str
    message: str


@dataclass(frozen=True, slots=True)
class ReportRefused:
    """A node's finish or failure report that must not end its task: the task is not
    placed on ``node`` (it runs elsewhere, or is queued or waiting), or the report names
    no run when the placement's is known. Nothing of the cell changes.

    Kafka binds a report's ``node_id`` to the principal that sent it (the router's
    ``bind_node``), but only the cell knows where a task runs: a node that could end
    any task by naming its own id freed the booking of a task still running on
    another node, and the next placement double-booked that GPU. ``placed_on`` and
    ``run`` (None for a task placed nowhere) are for the operators' dead letter; the
    decision, which every node reads, names only the task and the reporting node.
    """

    task: str
    node: str | None
    placed_on: str | None
    run: str | None


Outcome = (Placement | Refused | Stopped | Preempted | TaskIdTaken | ReportRefused
           | AdaptOutcome)
"""What a cell input led to, in order; the adapter turns each into one decision event."""


@dataclass(slots=True)
class TaskRecord:
    task: str
    seq: int
    request: TaskRequest
    spec: Any
    status: str
    node: str | None = None
    gpus: tuple[int, ...] = ()
    place_seq: int = -1
    meta: TaskMeta = dataclasses.field(default_factory=TaskMeta)
    enqueued_s: float = 0.0
    started_s: float = 0.0
    progress_s: float = 0.0
    preemptions: int = 0
    kill_acks: int = 0
    ok: bool = True
    waiting_on: tuple[str, ...] = ()
    last_node: str | None = None
    queued_seq: int = -1
    """When it was last put in the queue, counted in pushes (``Cell.queue_pushes``)."""
    submission: str = ""
    """Event id of the submission that created the task ("" in records written before it
    was kept): the same submission read again is a retry, any other one a duplicate."""
    members: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """A running gang's members (node, GPUs) in rank order; empty for one-node tasks."""
    size_class: int = 0
    """Its size class in the queue (``FairQueue``), fixed when it was queued."""
    age_class: int = 0
    """Its aging class in the queue (``FairQueue``, ``Cell._age_class``), fixed when queued."""
    size_preemptions: int = 0
    """Times it was stopped for a much shorter task (``Cell._shorter_first``)."""
    moves: int = 0
    """Times it changed GPU model: moved to a faster one (``Cell._move_to_faster``) or
    swapped (``Cell._swap_for_least_attained``)."""
    learned: tuple[int, float] | None = None
    """(order learned, seconds run) when the predictor learned this task's run."""
    kind: TaskKind | None = None
    run_rate: tuple[str, int, float] | None = None
    """The running task's last reported progress rate: (GPU model, GPU count, units per
    second); the speed book learns it when the run ends (``Cell._learn_speed``)."""
    speed_runs: tuple[tuple[int, str, int, str, float], ...] = ()
    """What the speed book learned of this task's runs: (order learned, class, GPU count,
    model, rate) each, rebuilt in order by ``restore``."""


@dataclass(slots=True)
class NodeRecord:
    seq: int
    added: NodeAdded
    healthy: bool
    extra: Any


@dataclass(frozen=True, slots=True)
class _Reservation:
    """Where and when the head starts at the earliest: one node, or a gang's nodes."""

    task: str
    nodes: tuple[int, ...]
    start_s: float
    versions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _NodeFrees:
    """One node as ``Cell._earliest_start`` reads it for one request shape (``_node_frees``)."""

    fits_now: bool
    never: bool
    """Unhealthy, or not of a GPU model the request accepts."""
    cpu: int
    mem: int
    gpu_free: tuple[int, ...]
    slots: dict[str, tuple[int, int, tuple[int, ...], int]]
    """Each running task's allocation here: (CPU, memory, GPU indices, share per GPU)."""


SPEED_MEMO_KEPT = 4096
"""Keys of ``Cell._speed_cache`` before it starts afresh (classes x shapes x generations)."""

TOLD_KEPT = 4096
"""Entries of ``Cell._told_speeds``' memo before it starts afresh (tasks told speeds)."""

NODE_FREES_KEPT = 4096
"""Entries of ``Cell._node_frees``' memo before it starts afresh (nodes x shapes asked)."""

_UNKNOWN = object()
"""A memo's answer not yet computed (where None is an answer)."""

_NOT_PLACED = PlaceResult(-1, (), None)
"""``_admit``'s answer until a placement is tried (immutable: one is enough)."""


def _free(state: ClusterState, task: str) -> None:
    """``step(state, TaskEnded(..., task))`` with its decisions dropped, without building them.

    ``decide`` answers a ``TaskEnded`` with ``Released`` (the task holds an
    allocation) or ``Rejected`` (it holds none), ``evolve`` of the ``TaskEnded``
    itself changes nothing and that of ``Released`` is ``state.release``, which
    does nothing for a task without an allocation: the same state change, without
    reading the allocation twice and building two decisions per finished task.
    tests/core/test_cell_free.py compares both on every finish of a recorded run.
    """
    state.release(task)


class Cell:
    """See the module docstring. Mutable: each method changes the cell in place."""

    def __init__(self, name: str, scheduler: Scheduler, config: QueueConfig | None = None,
                 objectives: WeightSchedule | None = None,
                 adapt: AdaptConfig | None = None, explain: bool = True) -> None:
        self.name = name
        self.explain = explain  # False (simulator): no candidate lists in decisions
        self.scheduler = scheduler
        self.config = config or QueueConfig()
        self.objectives = objectives
        self.state = ClusterState()
        self.nodes: dict[str, NodeRecord] = {}
        self.tasks: dict[str, TaskRecord] = {}
        self.unfinished: dict[str, TaskRecord] = {}
        """The tasks of ``tasks`` not ``DONE``, in the same (submission) order: a tick's
        scans read this instead of every task the cell ever saw, which a cell keeps for
        good (repeated submissions, dependencies) and which grows without bound."""
        self.elastic_unfinished: set[str] = set()
        """The tasks of ``unfinished`` that declare an elastic range: the sizing passes
        look at nothing when it is empty (derived from ``unfinished``)."""
        self.queue = FairQueue(self.config)
        self.dependents: dict[str, list[str]] = {}
        self.on_node: dict[str, dict[str, None]] = {}
        self.task_seq = 0
        self.place_seq = 0
        self.input_place_seq = 0
        """``place_seq`` when the current input arrived: a run started since was started
        by this input, and is no preemption victim (``_may_stop``)."""
        self.queue_pushes = 0
        """Tasks put in the queue so far: a queued task's ``queued_seq`` is its push, which
        orders it within its queue bucket (see :meth:`restore`)."""
        self.tick_seq = -1
        self.now_s = 0.0
        self.preempt_budget = self.config.preemptions_per_tick
        self.preemptions = 0
        self.predictor = DurationPredictor()
        self.speeds = SpeedBook(catalog_speeds(self.state.catalog))
        """How fast each class of task runs on each GPU model (issue 35), learned from
        the progress its runs reported (``report_progress``)."""
        self.speed_seq = 0
        """Runs the speed book learned so far: the next one's order (see ``restore``)."""
        self.speeds_told = False
        """A submission came with its speeds (the simulator's ``--speeds oracle``): running
        tasks may then move to faster models before the speed book learns anything."""
        self._moves_due: tuple[tuple[int, int, int], float] | None = None
        """(state key, time) before which a pass of ``_move_to_faster`` moves nothing."""
        self._grows_due: tuple[tuple[int, int, int], float] | None = None
        """(state key, time) before which a pass of ``_grow_elastic`` grows nothing."""
        self._move_keys: tuple[object, dict[str, tuple[Any, ...]]] = (None, {})
        """(the state's node models memo, each running task's (request, meta, node,
        members, ``_move_key``)) as ``_move_to_faster``'s last scan found them."""
        self._swap_cache: tuple[tuple[int, int], dict[str, list[Any]]] | None = None
        """((tick, speed_seq), candidates) of ``_swap_candidates``."""
        self._told: dict[str, tuple[TaskRequest, tuple[Any, ...], TaskRequest]] = {}
        """(request, speeds, request told them) per task, of ``_told_speeds``."""
        self._swap_scan: tuple[tuple[int, int, float], list[Any]] | None = None
        """((tick, input_place_seq, time), tasks found) of ``_swap_candidates``' last scan."""
        self._reservation: _Reservation | None = None
        self.memo = True
        """Use the memos below (and ``_node_frees``') and stop a pass once every queued
        shape failed (False: ask every question afresh, tests/core/test_cell_memo.py
        compares both)."""
        self._masked: tuple[int, ...] = ()
        self._memo_key: tuple[int, int] = (-1, -1)
        self._place_memo: dict[tuple[Any, ...], PlaceResult] = {}
        self._gang_memo: dict[tuple[Any, ...], tuple[int, gang.GangPlan] | None] = {}
        """Answers of ``_place`` (failures) and ``_reserve_gang`` for the state as it is
        (``_memo``): a dispatch pass at every tick asks the same questions of an unchanged
        cluster; these are answered once per change instead."""
        self.dirty_nodes: set[str] = set()
        self.dirty_tasks: set[str] = set()
        # Adaptation (streams.core.adapt): its config is read once here, never per decision.
        self.adapt = AdaptRuntime(adapt if adapt is not None else AdaptConfig.from_env())

    # ---- inputs --------------------------------------------------------------------

    def _at(self, now_s: float | None) -> None:
        self.input_place_seq = self.place_seq
        if now_s is not None and now_s > self.now_s:
            self.now_s = float(now_s)

    def add_node(self, event: NodeAdded, extra: Any = None,
                 now_s: float | None = None) -> list[Outcome]:
        """A node registered. Re-registration of a known node marks it healthy again."""
        self._at(now_s)
        known = self.nodes.get(event.node)
        if known is not None:
            return self.set_health(NodeHealthChanged(event.event_id, event.node, True))
        problems = _node_problems(event)
        if problems:
            return []  # invalid inventory: nothing to decide (the adapter logs it)
        self.state, _ = step(self.state, event, self.scheduler)
        self.nodes[event.node] = NodeRecord(len(self.nodes), event, True, extra)
        self.queue.total_milli += event.gpu_count * MILLI_PER_GPU
        self.dirty_nodes.add(event.node)
        return self._drain(event.event_id)

    def set_health(self, event: NodeHealthChanged, now_s: float | None = None) -> list[Outcome]:
        """A node became unhealthy (drained, failed, left) or healthy again."""
        self._at(now_s)
        rec = self.nodes.get(event.node)
        if rec is None or rec.healthy == event.healthy:
            return []
        self.state, _ = step(self.state, event, self.scheduler)
        rec.healthy = event.healthy
        self.dirty_nodes.add(event.node)
        return self._drain(event.event_id) if event.healthy else []

    def link(self, event: LinkMeasured, now_s: float | None = None) -> list[Outcome]:
        """A link measurement (``LinkMetrics``): re-prices data transfers; frees nothing,
        so nothing new can start."""
        self._at(now_s)
        self.state, _ = step(self.state, event, self.scheduler)
        return []

    def submit(self, event: TaskArrived, spec: Any, meta: TaskMeta | None = None,
               now_s: float | None = None) -> list[Outcome]:
        """A task was submitted: place it now, queue it, hold it for its predecessors,
        or refuse it for good."""
        req = event.request
        meta = meta or TaskMeta()
        taken = self.answer_taken_id(event.event_id, req.task, meta.tenant)
        if taken is not None:
            return taken
        self._at(now_s)
        rec = TaskRecord(req.task, self.task_seq, req, spec, QUEUED, meta=meta,
                         enqueued_s=self.now_s, submission=event.event_id)
        self.task_seq += 1
        self.speeds_told = self.speeds_told or bool(req.speeds)
        self.tasks[req.task] = self.unfinished[req.task] = rec
        if meta.elastic:
            self.elastic_unfinished.add(req.task)
        self.dirty_tasks.add(req.task)
        if meta.depends_on:
            failed = [p for p in meta.depends_on if p in self.tasks
                      and self.tasks[p].status == DONE and not self.tasks[p].ok]
            if failed:
                self.state = evolve(self.state, event)
                return self._fail_dependent(rec, failed[0], event.event_id)
            pending = tuple(p for p in meta.depends_on if p not in self.tasks
                            or self.tasks[p].status != DONE)
            if pending:
                self.state = evolve(self.state, event)
                rec.status, rec.waiting_on = WAITING, pending
                for p in pending:
                    self.dependents.setdefault(p, []).append(req.task)
                verdict = Verdict("unschedulable", (f"waiting for {', '.join(pending)}",),
                                  "workflow")
                return [Refused(Unschedulable(f"{event.event_id}/0", event.event_id,
                                              req.task, verdict, None), True)]
            rec.request = self._near_predecessor(req, meta.depends_on)
        self.state = evolve(self.state, event)
        if not self._could_ever_fit(rec.request):
            self._done(rec, False)
            never = gang.never_fits(self.state, rec.request) if self.is_gang(
                rec.request) else None
            verdict = Verdict("unschedulable_and_unresolvable", (never,), "gang") if never else \
                self.scheduler.fit.explain(
                rec.request, NodesView(self.state, np.arange(self.state.n))) or Verdict(
                "unschedulable", ("no feasible node",), "fit")
            return [Refused(Unschedulable(f"{event.event_id}/0", event.event_id, req.task,
                                          verdict, None), False)]
        self._enqueue(rec)
        return self._admit(rec, event.event_id)

    def answer_taken_id(self, event_id: str, task: str, tenant: str) -> list[Outcome] | None:
        """The answer to a submission of ``task`` when the cell already has that id:
        None when the id is free; ``[]`` for the very submission that created the task,
        read again (a producer's retry: decided already); otherwise one
        :class:`TaskIdTaken`, and nothing of the cell changes, not even its clock.

        A tenant resubmitting its own task id learns which task holds it and in what
        state; any other tenant (or one the records no longer tell: a finished task
        restored from records written before the tenant was kept) only that the id is
        in use, nothing about a task that is not its own.
        """
        rec = self.tasks.get(task)
        if rec is None:
            return None
        if rec.submission and rec.submission == event_id:
            return []
        if not tenant or rec.meta.tenant != tenant:
            return [TaskIdTaken(task, "task id already in use")]
        since = f", submitted in event {rec.submission}" if rec.submission else ""
        return [TaskIdTaken(task, f"task {task} already exists ({_state_of(rec)}){since}; "
                                  "this submission is ignored: submit it under a new task id")]

    def _admit(self, rec: TaskRecord, cause: str) -> list[Outcome]:
        """Try a newly queued task alone: nothing was freed, so nothing else can start.

        It may start now if no task is ahead of it in the queue's order, or as
        a backfill that cannot delay the head's reservation; an urgent task may
        preempt. Otherwise it waits with the reason.
        """
        cfg = self.config
        sched = self._active_scheduler()
        # Alone in the queue (the usual case when capacity is free), the task is its
        # own head: the same answer as a dispatch-order pass, without building one.
        ahead = (self.queue.entries[rec.task] if len(self.queue) == 1
                 else next(iter(self.queue.ordered(self.now_s))))
        is_head = ahead.task == rec.task
        out: list[Outcome] = []
        res = _NOT_PLACED
        if not self.queue.over_quota(self.queue.entries[rec.task]) and (
                is_head or (cfg.backfill and not cfg.strict_fifo)):
            reservation = None if is_head else self._reserve(self.tasks[ahead.task])
            mask: tuple[int, ...] = ()
            if reservation is not None and self._expected_end(rec) > reservation.start_s:
                mask = reservation.nodes
                self._mask(mask, True)
            try:
                res = self._place(rec, sched)
                if res.node < 0 and rec.meta.elastic:
                    res = self._place_smaller(rec, sched)
            finally:
                self._mask(mask, False)
            if res.node < 0 and is_head:
                res = self._preempt_for(rec, self.queue.entries[rec.task], sched, cause, out)
        if res.node >= 0:
            self._place_queued(rec, res, cause, out, f"{cause}/0")
            return out
        if res.verdict is not None:
            verdict = res.verdict
        elif is_head:
            verdict = Verdict("unschedulable", ("no feasible node now",), "fit")
        else:
            verdict = Verdict("unschedulable", (f"queued behind {len(self.queue) - 1} tasks",),
                              "queue")
        out.append(Refused(Unschedulable(f"{cause}/0", cause, rec.task, verdict, res.reason),
                           True))
        return out

    def refuse_report(self, task: str, node: str | None, decision_id: str | None,
                      run: str | None = None) -> list[Outcome] | None:
        """The answer to a node's finish or failure report when it must not end ``task``:
        one :class:`ReportRefused`, and nothing of the cell changes, not even its clock;
        None when the report may go on to :meth:`end` (or changes nothing: an unknown or
        finished task).

        Only the node the task is placed on may end it, and only about that placement:
        ``run`` is the decision id of the task's current run as the caller tracks runs
        (None: not known, then the node alone is checked). A report about a run the
        caller already stopped or replaced is the caller's to ignore before this.
        """
        rec = self.tasks.get(task)
        if rec is None or rec.status == DONE:
            return None
        if rec.status == RUNNING:
            here = node == rec.node or (node is not None and node in _nodes_of(rec))
            if here and (run is None or decision_id == run):
                return None
            return [ReportRefused(task, node, rec.node, run)]
        return [ReportRefused(task, node, None, None)]

    def end(self, event: TaskEnded, reason: str = "", now_s: float | None = None,
            failed: bool = False) -> list[Outcome]:
        """A task finished, failed or was cancelled: free it, release or fail its
        dependents, then retry the queue."""
        self._at(now_s)
        rec = self.tasks.get(event.task)
        if rec is None or rec.status == DONE:
            return []
        out: list[Outcome] = []
        if rec.status == RUNNING and not event.cancelled and not failed:
            ran_s = rec.progress_s + max(self.now_s - rec.started_s, 0.0)
            rec.learned = (self.predictor.learned, ran_s)
            self.predictor.learn(self.kind(rec), ran_s)
        if rec.status == QUEUED:
            self.queue.remove(event.task)
        elif rec.status == WAITING:
            self._unwait(rec)
        else:
            node = rec.node or ""
            gang_of = len(rec.members)
            self._release(rec)
            _free(self.state, event.task)
            if event.cancelled:
                out.append(Stopped(event.task, node, reason or "cancelled"))
            elif gang_of:
                # One member's report ends the gang (once): the others must stop too.
                out.append(Stopped(event.task, node, f"gang of {gang_of} ended by one "
                                   "member's report: the other members are stopped"))
        ok = rec.status == RUNNING and not event.cancelled and not failed
        rec.node, rec.gpus = None, ()
        self._done(rec, ok)
        self.dirty_tasks.add(event.task)
        out.extend(self._release_dependents(rec, event.event_id))
        return out + self._drain(event.event_id)

    def _done(self, rec: TaskRecord, ok: bool) -> None:
        """``rec`` is finished for good (``DONE`` is final): out of ``unfinished``."""
        rec.status, rec.ok = DONE, ok
        self.unfinished.pop(rec.task, None)
        self.elastic_unfinished.discard(rec.task)

    def ack_preempted(self, task: str) -> bool:
        """The executor's report that a preempted run stopped: absorbed (True) or not ours."""
        rec = self.tasks.get(task)
        if rec is None or rec.kill_acks <= 0:
            return False
        rec.kill_acks -= 1
        self.dirty_tasks.add(task)
        return True

    def tick(self, event_id: str, seq: int, now_s: float | None = None) -> list[Outcome]:
        """A clock tick: age the queue, reset the preemption budget, retry the queue.
        Ticks at or below the last seq are repeats."""
        if seq <= self.tick_seq:
            return []
        self._at(now_s)
        self.tick_seq = seq
        self.preempt_budget = self.config.preemptions_per_tick
        self._reservation = None
        out = self._drain(event_id)
        if not self.queue:
            out.extend(self._grow_elastic(event_id))
        if self.speeds_told or self.speed_seq:
            if not self.queue:
                out.extend(self._move_to_faster(event_id))
            if seq % SWAP_EVERY_TICKS == 0:
                out.extend(self._swap_for_least_attained(event_id))
                out.extend(self._swap_for_work_rate(event_id))
        return out

    def requeue(self, task: str, cause: str) -> None:
        """Free a running task and queue it again (its node or GPU failed; issue 8)."""
        rec = self.tasks[task]
        self._release(rec)
        _free(self.state, task)
        rec.node, rec.gpus = None, ()
        self._enqueue(rec)

    # ---- queue ---------------------------------------------------------------------

    def _enqueue(self, rec: TaskRecord) -> None:
        rec.status = QUEUED
        rec.enqueued_s = self.now_s
        rec.queued_seq = self.queue_pushes
        self.queue_pushes += 1
        rec.size_class = self._size_class(rec)
        rec.age_class = self._age_class(rec)
        self.queue.push(rec.task, rec.seq, rec.meta, rec.request.gpu_total_milli, self.now_s,
                        rec.size_class, rec.request.key, rec.age_class)
        self.dirty_tasks.add(rec.task)

    def _age_class(self, rec: TaskRecord) -> int:
        """How much slower a queued task ages (``predict_runtimes``): ``k`` when it is
        predicted to need about ``2 ** k`` times ``starvation_s`` still, 0 when it needs
        no more than that or nothing is known of it.

        Aging bounds a task's wait so that shorter-first cannot starve it. An absolute
        bound (``starvation_s``, 1 h) is right for tasks of about that length, but it
        turns the queue back into first-come first-served wherever waits pass an hour:
        a multi-day job that waited an hour goes ahead of every waiting job of a few
        minutes, which then waits days behind it. Bounding a task's wait relative to its
        own length instead (about its predicted remaining run time, in powers of two so
        that a queue bucket's tasks age alike) keeps the guarantee that matters to it,
        a slowdown of about two at worst, and lets short work keep going first."""
        if not self.config.predict_runtimes:
            return 0
        left = self._left_s(rec)
        if left is None or left <= self.config.starvation_s:
            return 0
        return min(math.ceil(math.log2(left / self.config.starvation_s)), MAX_AGE_CLASS)

    def _size_class(self, rec: TaskRecord) -> int:
        """The decade of the GPU-seconds a task still needs (0 without ``predict_runtimes``).

        Declared runtime, else predicted (given what it ran before a preemption), else
        what it attained so far: least attained service for a task nothing is known of,
        so a new one goes first and one that keeps coming back sinks (Tiresias' rule)."""
        if not self.config.predict_runtimes:
            return 0
        left = self._left_s(rec)
        if left is None:
            left = rec.progress_s
        gpu_s = left * rec.request.gpu_total_milli / MILLI_PER_GPU
        return int(math.log10(gpu_s)) if gpu_s >= 1.0 else 0

    def _active_scheduler(self) -> Scheduler:
        if self.objectives is None:
            return self.scheduler
        load = self.state.allocated_gpu_milli / max(self.queue.total_milli, 1)
        rule = self.objectives.rule(self.now_s, load)
        self.queue.weights = None if rule is None else rule.tenant_weights
        return self.scheduler if rule is None else rule.scheduler

    def _drain(self, cause: str) -> list[Outcome]:
        """One dispatch pass over the queue (see the module docstring)."""
        if not self.queue:
            return []
        cfg = self.config
        sched = self._active_scheduler()
        out: list[Outcome] = []
        failed: set[tuple[Any, ...]] = set()
        attempts = scanned = 0
        head: TaskRecord | None = None
        reservation: _Reservation | None = None
        masked: tuple[int, ...] = ()
        try:
            for entry in self.queue.ordered(self.now_s):
                scanned += 1
                if attempts >= cfg.max_attempts or scanned > cfg.max_scan:
                    break
                rec = self.tasks[entry.task]
                key = rec.request.key
                if key in failed or self.queue.over_quota(entry):
                    continue
                want_mask: tuple[int, ...] = ()
                if head is not None:
                    if not cfg.backfill or cfg.strict_fifo:
                        break
                    if reservation is not None and self._expected_end(rec) > reservation.start_s:
                        want_mask = reservation.nodes
                if want_mask != masked:
                    self._mask(masked, False)
                    self._mask(want_mask, True)
                    masked = want_mask
                attempts += 1
                res = self._place(rec, sched)
                if res.node < 0 and rec.meta.elastic:
                    res = self._place_smaller(rec, sched)
                if res.node < 0 and head is None:
                    self._mask(masked, False)
                    masked = ()
                    res = self._preempt_for(rec, entry, sched, cause, out)
                if res.node < 0:
                    failed.add(key)
                    if head is None:
                        head = rec
                        if cfg.strict_fifo:
                            break
                        if cfg.backfill:
                            reservation = self._reserve(rec)
                else:
                    self._place_queued(rec, res, cause, out)
                if self.memo and self._all_failed(failed):
                    break  # every task still queued has a shape that failed: all skipped
        finally:
            self._mask(masked, False)
        return out

    def _all_failed(self, failed: set[tuple[Any, ...]]) -> bool:
        """Every queued task's shape is in ``failed`` (the rest of a pass skips them all)."""
        shapes = self.queue.shapes
        return sum(shapes.get(k, 0) for k in failed) == len(self.queue)

    def _mask(self, nodes: tuple[int, ...], hide: bool) -> None:
        """Hide a reservation's nodes from backfilled tasks (as if unhealthy), or show them.

        The state's ``free_version`` is put back: the memos key a masked state by the
        version of the unmasked one and the mask (``_masked``)."""
        if not nodes:
            return
        s = self.state
        version = s.free_version
        for node in nodes:
            s.set_health(node, not hide)
        s.free_version = version
        self._masked = nodes if hide else ()

    def _memo(self) -> None:
        """Forget the memos when the state changed since they were filled."""
        key = (id(self.state), self.state.free_version)
        if key != self._memo_key:
            self._memo_key = key
            self._place_memo.clear()
            self._gang_memo.clear()

    def is_gang(self, req: TaskRequest) -> bool:
        """``gang.is_gang``, remembered per request shape until a node is added."""
        if not req.num_gpu:
            return False
        cache: dict[tuple[Any, ...], bool] = self.state.cache.setdefault(  # type: ignore[assignment]
            "cell.gang", {})
        known = cache.get(req.key)
        if known is None:
            known = cache[req.key] = gang.is_gang(self.state, req)
        return known

    def _place(self, rec: TaskRecord, sched: Scheduler) -> PlaceResult:
        """Where the task runs now: the scheduler's best node, or a gang's whole plan.

        A failure is remembered for the shape (``TaskRequest.key``, the scheduler and the
        mask; the arrival count too for a scheduler that reads it) until the state
        changes: placement is a function of these (``scheduler.place`` caches by shape
        already), and a placement changes the state."""
        req = self._told_speeds(rec)
        if not self.memo:
            return self._place_uncached(req, sched)
        self._memo()
        key = (req.key, sched.key, self._masked,
               -1 if sched.cacheable else self.state.arrivals)
        known = self._place_memo.get(key)
        if known is not None:
            return known
        res = self._place_uncached(req, sched)
        if res.node < 0:
            self._place_memo[key] = res
        return res

    def _told_speeds(self, rec: TaskRecord) -> TaskRequest:
        """The task's request with what the speed book knows of its class on this
        cell's models (``TaskRequest.speeds``), so the scheduler's ``speedy`` variant
        places it on its fastest free model (a gang: ``gang.plan`` takes the fastest
        model that holds it); the request as it is when nothing is known (a new class,
        a fractional task)."""
        req = rec.request
        speeds = self._speeds_of(rec)
        if speeds is req.speeds:
            return req
        # Remembered per task while its request and the speeds are the same objects: a
        # queued task is tried at every tick, and a running one at every swap it is
        # weighed for and at its placement's speed note; each ``replace`` built and
        # checked a new request (its ``__post_init__``).
        known = self._told.get(rec.task)
        if known is not None and known[0] is req and known[1] is speeds:
            return known[2]
        if len(self._told) >= TOLD_KEPT:
            self._told.clear()
        told = dataclasses.replace(req, speeds=speeds)
        self._told[rec.task] = (req, speeds, told)
        return told

    def _speeds_of(self, rec: TaskRecord) -> tuple[tuple[str, float], ...]:
        """The ``speeds`` of ``_told_speeds``: the book's when it knows the task's class,
        else the request's own (told by the simulator's ``--speeds oracle``, or none).

        Which of the two, and the book's, is remembered per class and request shape
        with ``_class_relative``'s answers (``_speed_cache``; by the row's
        ``SpeedBook.rates_generation``, as ``_class_speeds``): every placement attempt
        asks, and every tick's move pass and swap pass ask it of every running task."""
        req = rec.request
        row_class = rec.meta.name or rec.meta.task_class
        cache = self._speed_cache()
        key = ("of", row_class, req.key, self.speeds.rates_generation(row_class, req.num_gpu))
        known = cache.get(key, _UNKNOWN)
        if known is _UNKNOWN:
            known = cache[key] = self._book_speeds(row_class, req)
        return req.speeds if known is None else known  # type: ignore[no-any-return]

    def _book_speeds(self, row_class: str, req: TaskRequest
                     ) -> tuple[tuple[str, float], ...] | None:
        """The book's speeds for ``_speeds_of``, None where the request's own hold."""
        if (not row_class or req.fractional or not req.num_gpu
                or not self.speeds.knows(row_class, req.num_gpu)):
            return None
        return self._class_speeds(row_class, req.num_gpu) or None

    def _speed_map(self, rec: TaskRecord) -> dict[str, float]:
        """``_speeds_of`` as a model -> speed map of the models the task may run on (its
        ``gpu_models``; the book fills a speed for every model of the cell, so without
        this a swap would carry a task to a model it refuses), remembered alike (shared:
        read only); the move and swap passes look speeds up by model for every running
        task."""
        speeds = self._speeds_of(rec)
        allowed = rec.request.gpu_models
        cache = self._speed_cache()
        key = ("map", speeds, allowed)
        known: dict[str, float] | None = cache.get(key)
        if known is None:
            known = cache[key] = {m: v for m, v in speeds if not allowed or m in allowed}
        return known

    def _class_speeds(self, row_class: str, num_gpu: int) -> tuple[tuple[str, float], ...]:
        """The book's relative speeds of a class on this cell's models (``TaskRequest.speeds``),
        remembered with ``_class_relative``'s answer (``_speed_cache``): every running
        task's row is asked at each tick's move pass. Keyed by the row's
        ``SpeedBook.rates_generation``, as it reads rates only: a run that reports what its
        class already showed (most do) changes no speed, and asks for none again."""
        cache = self._speed_cache()
        key = ("speeds", row_class, num_gpu, self.speeds.rates_generation(row_class, num_gpu))
        known = cache.get(key)
        if known is None:
            relative = self._class_relative(row_class, num_gpu)
            known = cache[key] = tuple((m, r) for m, (r, _) in relative.items())
        return known  # type: ignore[no-any-return]

    def _speed_cache(self) -> dict[Any, Any]:
        """The memo of what the speed book says (``_class_relative`` and those built on
        it), keyed by the row's ``SpeedBook.generation``: an observation makes new keys
        for the rows it may change only (a whole run learns thousands of times, and each
        time every class was asked again). It lives in the state's derived cache, which
        a new node (new models) clears, and starts afresh past ``SPEED_MEMO_KEPT`` keys
        (old generations are never asked again)."""
        cache: dict[Any, Any] = self.state.cache.setdefault(  # type: ignore[assignment]
            "cell.class_speeds", {})
        if len(cache) >= SPEED_MEMO_KEPT:
            cache.clear()
        return cache

    def _class_relative(self, row_class: str, num_gpu: int
                        ) -> dict[str, tuple[float, Estimate]]:
        """``SpeedBook.relative`` for a class on this cell's models, remembered until the
        book's answer for the row may change (``_speed_cache``) or the cell's models
        change: every placement attempt, every move pass and every placement's reason
        asks."""
        cache = self._speed_cache()
        key = (row_class, num_gpu, self.speeds.generation(row_class, num_gpu))
        known = cache.get(key)
        if known is None:
            known = cache[key] = self.speeds.relative(row_class, num_gpu, self._gpu_models())
        return known

    def _gpu_models(self) -> list[str]:
        """The GPU models of this cell's nodes (those with GPUs), sorted; remembered in
        the state's derived cache, which a new node clears."""
        s = self.state
        cache: dict[str, list[str]] = s.cache.setdefault(  # type: ignore[assignment]
            "cell.models", {})
        known = cache.get("models")
        if known is None:
            known = cache["models"] = sorted(
                {s.model_names[int(m)] for m in s.model[:s.n] if m >= 0})
        return known

    def speed_note(self, rec: TaskRecord, node: str) -> tuple[str, float] | None:
        """Why the task's model, in words, and its speed there against the fastest
        (None when nothing was known): what the placement's reason says."""
        req = self._told_speeds(rec)
        if not req.speeds:
            return None
        row_class = rec.meta.name or rec.meta.task_class
        rel = self._class_relative(row_class, req.num_gpu) if self.speeds.knows(
            row_class, req.num_gpu) else {}
        here = self.model_of(node)
        if here not in rel:
            return None
        speed, est = rel[here]
        fastest = max(rel, key=lambda m: (rel[m][0], m))
        slowest = min(rel, key=lambda m: (rel[m][0], m))
        other = slowest if here == fastest else fastest
        if other == here:
            return None
        ratio = speed / rel[other][0]
        return (f"speed: {ratio:.2g}x as fast on {here} as on {other} for '{row_class}' "
                f"({here}: {est.basis}; {other}: {rel[other][1].basis})", speed)

    def _place_uncached(self, req: TaskRequest, sched: Scheduler) -> PlaceResult:
        if not self.is_gang(req):
            return place(self.state, sched, req, self.explain)
        found = gang.plan(self.state, req)
        if found is None:
            return PlaceResult(-1, (), None, Verdict(
                "unschedulable", ("no set of nodes holds the whole gang now",), "gang"))
        node, gpus = found.members[0]
        return PlaceResult(node, gpus, None, None, found.members, found.why)

    def _place_queued(self, rec: TaskRecord, res: PlaceResult, cause: str,
                      out: list[Outcome], decision_id: str | None = None) -> None:
        req = rec.request
        if res.members:
            decision = self._predicted(rec, gang_placement(
                self.state, req, gang.GangPlan(res.members, res.why),
                decision_id or f"{cause}/{rec.task}", cause, None))
            self.state = evolve(self.state, decision)
            self.queue.remove(rec.task)
            self._mark_running(rec, decision)
            out.append(decision)
            return
        decision = Placement(
            decision_id=decision_id or f"{cause}/{rec.task}", cause_id=cause, task=rec.task,
            node=self.state.node_names[res.node], gpus=res.gpus,
            share_milli=req.gpu_milli if res.gpus else 0, cpu_milli=req.cpu_milli,
            memory_mib=req.memory_mib, fractional=req.fractional, reason=res.reason,
        )
        note = self.speed_note(rec, decision.node)
        if note is not None:
            decision = dataclasses.replace(decision, speed=note[0], speed_vs_fastest=note[1])
        decision = self._predicted(rec, decision)
        self.state = evolve(self.state, decision)
        self.queue.remove(rec.task)
        self._mark_running(rec, decision)
        out.append(decision)

    def _predicted(self, rec: TaskRecord, decision: Placement) -> Placement:
        """The placement with the run time predicted for the task, so the log (and
        ``hetsched explain``) says what its reservation and backfill assumed."""
        predicted = self.prediction(rec)
        if predicted is None:
            return decision
        return dataclasses.replace(decision, predicted_s=predicted.p50_s,
                                   prediction=predicted.text())

    def kind(self, rec: TaskRecord) -> TaskKind:
        """Whose peers a task's run time is predicted from (cached on the record)."""
        if rec.kind is None:
            m = rec.meta
            rec.kind = TaskKind(m.tenant, m.name, m.task_class, rec.request.num_gpu)
        return rec.kind

    def prediction(self, rec: TaskRecord) -> Prediction | None:
        """The predicted run time of a task that declares none (None: it declares one,
        prediction is off, or nothing is known of its peers yet). Learning goes on while
        prediction is off, so a cell that turns it on starts with its history."""
        if rec.meta.expected_s or not self.config.predict_runtimes:
            return None
        return self.predictor.predict(self.kind(rec))

    def _expected_end(self, rec: TaskRecord) -> float:
        """When a task would end if started now (queued) or was started (running).

        Its declared runtime, else the predictor's (given what it ran so far), else
        ``default_duration_s``."""
        total = rec.meta.expected_s
        if not total:
            predicted = self.prediction(rec)
            ran_s = rec.progress_s + (self.now_s - rec.started_s if rec.status == RUNNING
                                      else 0.0)
            total = (predicted.total_s(ran_s) if predicted is not None
                     else self.config.default_duration_s)
        left = max(total - rec.progress_s, 0.0)
        start = rec.started_s if rec.status == RUNNING else self.now_s
        return max(start + left, self.now_s)

    def _reserve(self, rec: TaskRecord) -> _Reservation | None:
        """The node and time where the head task can start at the earliest (EASY backfill).

        Kept while the head and the reserved node are unchanged, so a reservation
        is computed once per head rather than once per event.
        """
        old = self._reservation
        if old is not None and old.task == rec.task and self._reservation_holds(old):
            return old
        req = rec.request
        if self.is_gang(req):
            return self._reserve_gang(rec)
        mask = empty_fit_mask(self.state, req)
        cand = np.flatnonzero(mask)
        if cand.shape[0] == 0:
            return None
        s = self.state
        if req.num_gpu:
            closeness = (s.gpu_free[cand] == MILLI_PER_GPU).sum(axis=1)
        else:
            closeness = s.cpu_free[cand]
        order = np.lexsort((s.rank[cand], -closeness))[:RESERVATION_NODES]
        nodes = cand[order]
        best: tuple[float, int, int] | None = None  # start, rank, node
        for node, rank in zip(nodes.tolist(), s.rank[nodes].tolist(), strict=True):
            if best is not None and best[0] <= self.now_s and rank >= best[1]:
                # Nothing starts before now (``_earliest_start`` is never earlier), so
                # this node cannot beat the best: skipping it changes no answer, and a
                # reservation at a node whose task overran its expected end (the usual
                # case while tasks wait) is found at the first such node.
                continue
            start = self._earliest_start(node, req, math.inf if best is None else best[0])
            if best is None or (start, rank) < best[:2]:
                best = (start, rank, node)
        if best is None or best[0] == math.inf:
            return None
        self._reservation = _Reservation(rec.task, (best[2],), best[0],
                                         (int(self.state.version[best[2]]),))
        return self._reservation

    def _reserve_gang(self, rec: TaskRecord) -> _Reservation | None:
        """The earliest time the whole gang fits if running tasks end as expected, and the
        nodes it would take then: backfilled tasks that would still run at that time are
        kept off those nodes, so they cannot delay the gang.

        Each eligible node's idle GPUs (and CPU, memory) grow as its tasks end; the gang's
        start is the first of those ends after which ``gang.plan`` finds a placement on
        the nodes as they will be. Reserved GPUs stay idle only until then, and a task
        that ends before then may still use them (the bound on idle waiting).
        """
        s, req = self.state, rec.request
        n = s.n
        ok = gang.model_mask(s, req, s.healthy[:n] & (s.cpu_cap[:n] >= req.cpu_milli)
                              & (s.mem_cap[:n] >= req.memory_mib))
        ends: list[tuple[float, int, str, int]] = []
        for node in np.flatnonzero(ok).tolist():
            for t in self.on_node.get(s.node_names[node], {}):
                r = self.tasks[t]
                ends.append((self._expected_end(r), r.seq, t, node))
        ends.sort()
        self._memo()
        key = (req.key, self._masked, tuple((t, node) for _, _, t, node in ends))
        if not self.memo:
            known = self._gang_start(req, ok, ends)
        elif key in self._gang_memo:
            known = self._gang_memo[key]
        else:
            known = self._gang_memo[key] = self._gang_start(req, ok, ends)
        if known is None:
            return None
        freed, found = known
        start = ends[freed - 1][0] if freed else self.now_s
        nodes = tuple(sorted(m for m, _ in found.members))
        self._reservation = _Reservation(rec.task, nodes, max(start, self.now_s),
                                         tuple(int(s.version[m]) for m in nodes))
        return self._reservation

    def _gang_start(self, req: TaskRequest, ok: np.ndarray,
                    ends: list[tuple[float, int, str, int]]
                    ) -> tuple[int, gang.GangPlan] | None:
        """How many of ``ends`` (running tasks by expected end) must end before the gang
        fits on the ``ok`` nodes, and its plan then; None: never. A function of the state,
        ``req``'s shape, ``ok`` and the order of ``ends`` (not of their times), so
        ``_reserve_gang`` remembers it for them."""
        s, n = self.state, self.state.n
        trial = copy.copy(s)  # shares the task tables; the free figures are its own
        trial.cpu_free, trial.mem_free = s.cpu_free.copy(), s.mem_free.copy()
        trial.gpu_free, trial.healthy = s.gpu_free.copy(), s.healthy.copy()
        trial.healthy[:n] &= ok
        found = gang.plan(trial, req)
        freed = 0
        for _, _, task, node in ends:
            if found is not None:
                break
            slot = trial.slot_on(task, node)
            trial.return_resources(slot)
            freed += 1
            found = gang.plan(trial, req)
        return None if found is None else (freed, found)

    def _earliest_start(self, node: int, req: TaskRequest, beat: float = math.inf) -> float:
        """When ``req`` fits on ``node`` if running tasks end as expected (inf: never).

        Same answer as asking ``fits_after`` with the first k tasks by expected
        end freed, for k = 0, 1, ...; but the freed resources are accumulated
        once (linear in the node's tasks, not quadratic), because this runs for
        up to ``RESERVATION_NODES`` nodes each time the head changes. Returns
        inf as soon as the start would be later than ``beat`` (the best node so
        far): such a node cannot be chosen, so the answer is the same.
        """
        frees = self._node_frees(node, req)
        if frees.fits_now:
            return self.now_s
        if frees.never:
            return math.inf
        running = sorted((self._expected_end(r), r.seq, r.task) for r in (
            self.tasks[t] for t in frees.slots))
        cpu, mem, free = frees.cpu, frees.mem, list(frees.gpu_free)
        for end, _, task in running:
            if end > beat:
                return math.inf
            t_cpu, t_mem, gpus, share = frees.slots[task]
            cpu += t_cpu
            mem += t_mem
            for g in gpus:
                free[g] += share
            if cpu < req.cpu_milli or mem < req.memory_mib:
                continue
            if (not req.num_gpu
                    or (req.fractional and any(f >= req.gpu_milli for f in free))
                    or (not req.fractional
                        and sum(f == MILLI_PER_GPU for f in free) >= req.num_gpu)):
                return end
        return math.inf

    def _node_frees(self, node: int, req: TaskRequest) -> _NodeFrees:
        """What ``_earliest_start`` reads of ``node`` for ``req`` besides the running tasks'
        expected ends, as plain numbers: remembered until the node changes (its
        ``version``, which every allocation, release and health change bumps) or its
        tasks do. A reservation asks it of up to ``RESERVATION_NODES`` nodes at every
        tick a task waits, and the nodes rarely changed since the last tick; only the
        expected ends move with the clock. Derived state only (the state's cache)."""
        s = self.state
        tasks = tuple(self.on_node.get(s.node_names[node], {}))
        cache: dict[Any, Any] = s.cache.setdefault("cell.node_frees", {})  # type: ignore[assignment]
        key = (node, req.key)
        version = int(s.version[node])
        known = cache.get(key) if self.memo else None
        if known is not None and known[0] == version and known[1] == tasks:
            frees: _NodeFrees = known[2]
            return frees
        never = not s.healthy[node]
        if req.num_gpu and req.gpu_models:
            m = int(s.model[node])
            never = never or m < 0 or s.model_names[m] not in req.gpu_models
        slots: dict[str, tuple[int, int, tuple[int, ...], int]] = {}
        for task in tasks:
            slot = s.slot_on(task, node)
            gpus = tuple(g for g in s.t_gpus[slot].tolist() if g >= 0)
            slots[task] = (int(s.t_cpu[slot]), int(s.t_mem[slot]), gpus, int(s.t_share[slot]))
        frees = _NodeFrees(fits_after(s, node, req, ()), bool(never), int(s.cpu_free[node]),
                           int(s.mem_free[node]),
                           tuple(s.gpu_free[node, : int(s.gpu_count[node])].tolist()), slots)
        if len(cache) >= NODE_FREES_KEPT:
            cache.clear()
        cache[key] = (version, tasks, frees)
        return frees

    # ---- preemption ------------------------------------------------------------------

    def _victim(self, rec: TaskRecord, node: int, cost: float) -> Victim:
        """What stopping ``rec`` frees on ``node`` (a gang frees its other members too)."""
        slot = self.state.slot_on(rec.task, node)
        alloc = self.state.allocation_of_slot(rec.task, slot)
        return Victim(rec.task, alloc.node, alloc.gpus, alloc.share_milli, alloc.cpu_milli,
                      alloc.memory_mib, cost)

    def _left_s(self, rec: TaskRecord) -> float | None:
        """Seconds a task still needs to run: declared, else predicted (given what it ran),
        None when nothing is known of it."""
        ran_s = rec.progress_s + (max(self.now_s - rec.started_s, 0.0)
                                  if rec.status == RUNNING else 0.0)
        if rec.meta.expected_s:
            return max(rec.meta.expected_s - ran_s, 0.0)
        predicted = self.prediction(rec)
        return None if predicted is None else max(predicted.total_s(ran_s) - ran_s, 0.0)

    def _left_rises_at(self, rec: TaskRecord) -> float | None:
        """When ``_left_s`` of a running task may next rise, for the passes that skip
        until a saving proportional to it could pay (``_moves_due``, ``_grows_due``).

        None while it rises a second a second: nothing is known (the passes then take
        it to be as long as the task ran) or the task outlived all its peers (twice what
        it ran). A declared runtime only runs down (inf). A prediction is the median of
        the past runs longer than what the task ran, so it holds, and what is left runs
        down, until the task reaches the shortest of them: then it may jump up."""
        if rec.meta.expected_s:
            return math.inf
        predicted = self.prediction(rec)
        if predicted is None:
            return None
        ran_s = self._ran_s(rec)
        longer = bisect.bisect_right(predicted.runs, ran_s)
        if longer == len(predicted.runs):
            return None
        return self.now_s + (predicted.runs[longer] - ran_s)

    def _started_by_this_input(self, rec: TaskRecord) -> bool:
        """Was ``rec``'s run started by the input being handled? Such a run is no
        preemption victim: the queue's order put it ahead of the task that would stop it
        a moment ago, and stopping it would send its node a start and a kill at once."""
        return rec.place_seq >= self.input_place_seq

    def _shorter_first(self, head: TaskRecord, victim: TaskRecord,
                       head_left: float | None = None) -> bool:
        """May the head stop ``victim`` because it is much shorter (``predict_runtimes``)?

        Shortest remaining time first, bounded: the victim is not guaranteed, not of a
        higher priority, was never stopped this way before (``SIZE_PREEMPTIONS_PER_TASK``)
        or has run ``RESTART_S / RESTART_SHARE`` since it last started (so restarts cost
        it at most ``RESTART_SHARE`` of its run, and a long job is not shielded for
        days by one early stop), and still needs at least ``SIZE_PREEMPT_GAIN``
        times what the head needs plus a restart (``RESTART_S``). Swapping the two
        ends the head ``victim left`` earlier and the victim ``head left + restart``
        later, so any margin above 1 lowers the mean completion time when the
        predictions hold; 2 keeps it lowered when they are off by the factor two a
        median prediction commonly is. ``head_left``: the head's ``_left_s`` when the
        caller weighs many victims for one head (worked out here when not given).
        """
        if (victim.meta.qos == "guaranteed" or victim.meta.priority > head.meta.priority
                or (victim.size_preemptions >= SIZE_PREEMPTIONS_PER_TASK
                    and (self.now_s - victim.started_s) * RESTART_SHARE < RESTART_S)):
            return False
        if head_left is None:
            head_left = self._left_s(head)
        victim_left = self._left_s(victim)
        if head_left is None or victim_left is None:
            return False
        return victim_left >= SIZE_PREEMPT_GAIN * (head_left + RESTART_S)

    def _preempt_for(self, rec: TaskRecord, entry: Entry, sched: Scheduler, cause: str,
                     out: list[Outcome]) -> PlaceResult:
        """Stop the cheapest victims so ``rec`` fits, within the budget: best-effort ones
        for an urgent task, or (``predict_runtimes``) much longer ones for a short one."""
        nothing = PlaceResult(-1, (), None)
        cfg = self.config
        if not cfg.preemption or self.preempt_budget <= 0:
            return nothing
        shrunk = self._shrink_for(rec, sched, cause, out)
        if shrunk.node >= 0:
            return shrunk
        urgent = is_preemptor(rec.meta, cfg)
        if not (urgent or cfg.predict_runtimes):
            return nothing
        if self.is_gang(rec.request):
            if not cfg.predict_runtimes:
                return nothing  # a gang waits for its reservation; it does not preempt
            return self._preempt_for_gang(rec, sched, cause, out)
        # Shorter first needs the head's remaining time: worked out once, not per victim.
        head_left = self._left_s(rec) if cfg.predict_runtimes else None
        if not urgent and head_left is None:
            return nothing
        mask = empty_fit_mask(self.state, rec.request)
        victims: list[Victim] = []
        by_size: set[str] = set()
        for node in np.flatnonzero(mask):
            for t in self.on_node.get(self.state.node_names[int(node)], {}):
                v = self.tasks[t]
                if self._started_by_this_input(v):
                    continue
                allowed = urgent and may_preempt(rec.meta, v.meta, cfg)
                if (not allowed and head_left is not None
                        and self._shorter_first(rec, v, head_left)):
                    allowed = True
                    by_size.add(t)
                if allowed:
                    gpus = v.request.num_gpu
                    victims.append(self._victim(v, int(node), victim_cost(
                        v.request.gpu_milli, gpus, self.now_s - v.started_s)))
        chosen = choose_victims(self.state, rec.request, victims)
        if chosen is None or len(chosen[1]) > self.preempt_budget:
            return nothing
        for chosen_victim in chosen[1]:
            self._stop_victim(self.tasks[chosen_victim.task], rec,
                              chosen_victim.task in by_size, out)
        self._reservation = None
        return place(self.state, sched, rec.request, self.explain)

    def _stop_victim(self, victim: TaskRecord, rec: TaskRecord, by_size: bool,
                     out: list[Outcome]) -> None:
        """Stop ``victim`` for ``rec`` (a gang whole) and queue it again with its progress."""
        victim.size_preemptions += by_size
        self._stop_and_requeue(victim, rec.task, "", out)

    def _stop_and_requeue(self, rec: TaskRecord, by_task: str, why: str,
                          out: list[Outcome]) -> None:
        """Stop a running task, keep its progress, queue it again: one preemption, paid
        from the tick's budget, until its executor acknowledges the kill."""
        node_name = rec.node or ""
        rec.progress_s = self._ran_s(rec)
        rec.preemptions += 1
        rec.kill_acks += 1
        self._release(rec)
        self.state.release(rec.task)
        self._enqueue(rec)
        self.preempt_budget -= 1
        self.preemptions += 1
        out.append(Preempted(rec.task, node_name, by_task, rec.progress_s, why=why))

    def _ran_s(self, rec: TaskRecord) -> float:
        """Seconds a running task has run, over all its runs."""
        return rec.progress_s + max(self.now_s - rec.started_s, 0.0)

    def _move_to_faster(self, cause: str) -> list[Outcome]:
        """Move running tasks to idle GPUs of faster models (scheduling by speed).

        Only when nothing waits: the drain pass gave queued tasks every GPU they could
        use, so an idle GPU left over does nothing, while a task on a slower model would
        finish sooner on it. A task moves when what the move saves, its remaining run
        time times ``1 - speed here / speed there``, is at least ``SIZE_PREEMPT_GAIN``
        restarts (``RESTART_S``; the margin ``_shorter_first`` asks for, as both sides are
        estimates). The remaining time is the declared or predicted one (``_left_s``),
        else as long as the task ran so far: run times are heavy-tailed, so a task that
        ran long is likely to run long still (the premise of least attained service), and
        one that just started is not moved on a guess.

        Candidates: one-node whole-GPU tasks whose class has speeds (told or learned),
        not guaranteed ones, not within ``CHANGE_GUARD_S`` of a model change, within the
        tick's preemption budget; the largest saving first (ties by task id, so the order of
        the cell's indexes cannot change a decision). A move is a preemption (its
        ``Preempted`` says why) followed at once by the placement on the faster model,
        so executors, replay and the simulator handle it as any preemption, and it
        counts in the task's preemptions.

        A pass that moves nothing remembers when the first task would start to pay
        (``_moves_due``): until then, or until GPUs are taken or freed or the speed book
        learns, a pass would find nothing either, and is skipped. Derived state only: a
        restored cell that checks again finds what this one would have."""
        key = (id(self.state), self.state.free_version, self.speed_seq)
        if self._moves_due is not None and self._moves_due[0] == key \
                and self.now_s < self._moves_due[1]:
            return []
        out: list[Outcome] = []
        sched = self._active_scheduler()
        tried: set[str] = set()
        due = math.inf
        while self.preempt_budget > 0:
            free = self._free_whole_gpus_by_model()
            if not free:
                break
            memo: dict[tuple[Any, ...], tuple[float, tuple[str, ...]] | None] = {}
            best: tuple[float, str, tuple[str, ...]] | None = None
            due = math.inf
            # Each task's ``_move_gain`` memo key, kept from the last scan while its
            # request, class, node and gang members are the same objects and no node was
            # added (the state's node models are the same memo): a pass visits every
            # running task, most answers are None from the memo, and building the key was
            # most of the visit. Derived state only.
            models = self.state.cache.setdefault("cell.node_models", {})
            known = self._move_keys[1] if self._move_keys[0] is models else {}
            keys: dict[str, tuple[Any, ...]] = {}
            now = self.now_s
            for tasks in self.on_node.values():
                for task in tasks:
                    rec = self.tasks[task]
                    if rec.moves and now - rec.started_s < CHANGE_GUARD_S:
                        # ``_changed_lately``, spelled out: this line runs for every
                        # running task at every scan.
                        due = min(due, rec.started_s + CHANGE_GUARD_S)
                        continue
                    if task in tried:
                        continue
                    k = known.get(task)
                    if (k is None or k[0] is not rec.request or k[1] is not rec.meta
                            or k[2] is not rec.node or k[3] is not rec.members):
                        k = (rec.request, rec.meta, rec.node, rec.members, self._move_key(rec))
                    keys[task] = k
                    found = (None if k[4] is None
                             else memo[k[4]] if k[4] in memo
                             else self._move_gain(rec, free, memo))
                    if found is None:
                        continue
                    gain, faster = found
                    left = self._left_s(rec)
                    rises = self._left_rises_at(rec)
                    if left is None:
                        left = self._ran_s(rec)
                    if rises is None:  # grows by a second a second
                        wait = SIZE_PREEMPT_GAIN * RESTART_S / gain - left
                        due = min(due, self.now_s + max(wait, 0.0))
                    elif left * gain >= SIZE_PREEMPT_GAIN * RESTART_S:
                        due = self.now_s  # pays now: moved, or looked at again
                    else:  # shrinks until the prediction may jump
                        due = min(due, rises)
                    saved = left * gain
                    if (saved >= SIZE_PREEMPT_GAIN * RESTART_S
                            and not self._started_by_this_input(rec)
                            and (best is None or (saved, task) > best[:2])):
                        best = (saved, task, faster)
            self._move_keys = (models, keys)
            if best is None:
                break
            _, task, faster = best
            tried.add(task)
            rec = self.tasks[task]
            target = dataclasses.replace(self._told_speeds(rec), gpu_models=faster)
            res = self._place_uncached(target, sched)
            if res.node >= 0:
                self._move(rec, res, cause, out)
        if not out:
            self._moves_due = (key, due)
        return out

    def _move_gain(self, rec: TaskRecord, free: dict[str, int],
                   memo: dict[tuple[Any, ...], tuple[float, tuple[str, ...]] | None]
                   ) -> tuple[float, tuple[str, ...]] | None:
        """(share of its remaining run time a move saves, the faster models with idle GPUs
        it may move to) for a task that may move (``_move_to_faster``), else None.
        ``memo`` holds the answer per ``_move_key`` for one pass."""
        req = rec.request
        key = self._move_key(rec)
        if key is None:
            return None
        if key in memo:
            return memo[key]
        model = key[-1]
        speeds = self._speed_map(rec)
        here = speeds.get(model)
        faster = tuple(sorted(m for m, count in free.items()
                              if count >= req.num_gpu and speeds.get(m, 0.0) > (here or 0.0)
                              and (not req.gpu_models or m in req.gpu_models)))
        memo[key] = found = ((1.0 - here / max(speeds[m] for m in faster), faster)
                             if here and faster else None)
        return found

    def _move_key(self, rec: TaskRecord) -> tuple[Any, ...] | None:
        """What ``_move_gain`` depends on besides the idle GPUs and the book: class, GPU
        count, told speeds, allowed models and the model it runs on; None for a task
        that may not change model. A function of the task's request, meta, node and
        members (and of the node's model)."""
        if not self._may_change_model(rec):
            return None
        req = rec.request
        return (rec.meta.name or rec.meta.task_class, req.num_gpu, req.speeds, req.gpu_models,
                self.model_of(rec.node or ""))

    def _move(self, rec: TaskRecord, res: PlaceResult, cause: str,
              out: list[Outcome]) -> None:
        """Stop ``rec`` where it runs and place it at ``res`` (found while it still ran
        there: a node of another model, so freeing its GPUs changes nothing of it)."""
        to = self.model_of(self.state.node_names[res.node])
        self._stop_to_move(rec, f"moved from {self.model_of(rec.node or '')} to the faster "
                           f"{to}", out)
        self._place_queued(rec, res, cause, out)

    def _stop_to_move(self, rec: TaskRecord, why: str, out: list[Outcome],
                      by_task: str | None = None) -> None:
        """Stop a running task that changes GPU model or count (a preemption and a change,
        under ``CHANGE_GUARD_S``) and queue it, for the caller to place at once;
        ``by_task``: the task it makes room for, else itself."""
        rec.moves += 1
        self._stop_and_requeue(rec, by_task or rec.task, why, out)

    # ---- elastic sizing (streams.core.elastic_sizing) ----------------------------------

    def _place_smaller(self, rec: TaskRecord, sched: Scheduler) -> PlaceResult:
        """Where an elastic task that does not fit at its count runs on fewer GPUs: the
        most that fit now, down to its ``min_gpus`` (``elastic_sizing``); its request then
        asks for that count. The request is left as it was when no count fits."""
        asked = rec.request
        if asked.fractional or not asked.num_gpu:
            return _NOT_PLACED
        for k in elastic_sizing.smaller_counts(asked.num_gpu, rec.meta.elastic):
            rec.request = dataclasses.replace(asked, num_gpu=k)
            res = self._place(rec, sched)
            if res.node >= 0:
                return res
        rec.request = asked
        return _NOT_PLACED

    def _grow_elastic(self, cause: str) -> list[Outcome]:
        """Grow running elastic tasks into their nodes' idle GPUs (``elastic_sizing``).

        Only when nothing waits (the caller's check): a GPU the drain pass left idle is
        one no queued task could use. A task grows to as many GPUs as its node has idle
        up to its ``max_gpus`` when the saving (``elastic_sizing.saving_s``, its remaining
        run time as ``_left_or_ran_s`` reckons it) is at least ``SIZE_PREEMPT_GAIN``
        restarts, and not within ``CHANGE_GUARD_S`` of its last resize or model change
        (a resize is a restart, like a move); never a guaranteed task, which the cell
        does not stop to improve on (as for moves). Tasks in submission order, within the
        tick's preemption budget. A resize is a preemption (its ``Preempted`` says from
        and to what count, and why) and the placement on the same node with the larger
        count at once, as a move is.

        A pass that grows nothing remembers when the first task would start to pay, as
        ``_move_to_faster`` does (``_grows_due``; derived state only)."""
        if not self.elastic_unfinished:
            return []
        key = (id(self.state), self.state.free_version, self.speed_seq)
        if self._grows_due is not None and self._grows_due[0] == key \
                and self.now_s < self._grows_due[1]:
            return []
        s = self.state
        out: list[Outcome] = []
        due = math.inf
        for rec in list(self.unfinished.values()):
            if self.preempt_budget <= 0:
                due = self.now_s
                break
            elastic = rec.meta.elastic
            if (not elastic or rec.status != RUNNING or rec.members or rec.node is None
                    or rec.request.num_gpu >= elastic[1] or rec.request.fractional
                    or rec.meta.qos == "guaranteed"):
                continue
            if self._changed_lately(rec):
                due = min(due, rec.started_s + CHANGE_GUARD_S)
                continue
            i = s.node_index[rec.node]
            count = int(s.gpu_count[i])
            idle = [g for g in range(count) if s.gpu_free[i, g] >= MILLI_PER_GPU]
            k = rec.request.num_gpu
            k2 = min(elastic[1], k + len(idle))
            if k2 <= k or not s.healthy[i] or self._started_by_this_input(rec):
                continue
            model = self.model_of(rec.node)
            factor, basis = self._scaling(rec, model, k, k2)
            left = self._left_s(rec)
            saved = elastic_sizing.saving_s(self._ran_s(rec) if left is None else left,
                                            factor)
            need = SIZE_PREEMPT_GAIN * RESTART_S
            if saved < need:
                rises = self._left_rises_at(rec)
                if factor > 1.0 and rises is None:  # saved grows with the time it ran
                    due = min(due, self.now_s + (need - saved) / (1.0 - 1.0 / factor))
                elif factor > 1.0 and rises is not None:
                    due = min(due, rises)  # shrinks until the prediction may jump
                continue
            gpus = tuple(sorted((*rec.gpus, *idle[:k2 - k])))
            self._stop_to_move(rec, f"resized from {k} to {k2} GPUs on {rec.node}: "
                               f"{factor:.2f}x as fast on {k2} as on {k} GPUs of {model} "
                               f"({basis}); saves {saved / 60:.0f} min", out)
            rec.request = dataclasses.replace(rec.request, num_gpu=k2)
            self._place_queued(rec, PlaceResult(i, gpus, None), cause, out)
        if not out:
            self._grows_due = (key, due)
        return out

    def _shrink_for(self, rec: TaskRecord, sched: Scheduler, cause: str,
                    out: list[Outcome]) -> PlaceResult:
        """Shrink running elastic tasks on one node so the head of the queue starts now
        (``elastic_sizing``: shrinking when others wait).

        The head is a one-node whole-GPU task that fits nowhere now. On each node that
        could hold it, the GPUs it lacks are taken from the node's elastic tasks above
        their ``min_gpus`` (not guaranteed ones, not of a higher priority, not within
        ``CHANGE_GUARD_S`` of their last change, not started by this input), the cheapest
        first. A task shrunk from k to k2 GPUs runs ``scaling(k2 -> k)`` times as long for
        the rest of its run, plus a restart: that is its cost (``elastic_sizing.shrink_cost_s``).
        The head starts its reservation's wait earlier, so the node with the lowest total
        cost is taken when that wait is at least ``SIZE_PREEMPT_GAIN`` times it (both are
        predictions, as for ``_shorter_first``). A task that grew into idle GPUs while
        nothing waited so gives them back; one that scales badly gives them cheaply.
        Each shrink is a preemption (its ``Preempted`` says why) and the placement on the
        same node on the GPUs it keeps, within the tick's budget."""
        req = rec.request
        if (not self.elastic_unfinished or req.fractional or not req.num_gpu
                or self.is_gang(req)):
            return _NOT_PLACED
        s = self.state
        mask = empty_fit_mask(s, req)
        nodes = [i for i in np.flatnonzero(mask).tolist()
                 if s.cpu_free[i] >= req.cpu_milli and s.mem_free[i] >= req.memory_mib]
        plans: list[tuple[float, int, list[tuple[TaskRecord, int, float, float, str]]]] = []
        for i in nodes:
            plan = self._shrink_plan(rec, i)
            if plan is not None:
                plans.append((sum(p[2] for p in plan), i, plan))
        if not plans:
            return _NOT_PLACED
        cost, i, plan = min(plans, key=lambda p: p[:2])
        reservation = self._reserve(rec)
        wait = math.inf if reservation is None else reservation.start_s - self.now_s
        if wait < SIZE_PREEMPT_GAIN * cost:
            return _NOT_PLACED
        node = s.node_names[i]
        waits = "no reservation" if reservation is None else f"waits {wait / 60:.0f} min"
        model = self.model_of(node)
        for v, k2, v_cost, factor, basis in plan:
            k = v.request.num_gpu
            keep = tuple(sorted(v.gpus)[:k2])
            self._stop_to_move(v, f"resized from {k} to {k2} GPUs on {node} for task "
                               f"{rec.task}, which {waits} otherwise: {factor:.2f}x as fast "
                               f"on {k} as on {k2} GPUs of {model} ({basis}); costs "
                               f"{v_cost / 60:.0f} min", out, by_task=rec.task)
            v.request = dataclasses.replace(v.request, num_gpu=k2)
            self._place_queued(v, PlaceResult(i, keep, None), cause, out)
        self._reservation = None
        return place(self.state, sched, req, self.explain)

    def _shrink_plan(self, rec: TaskRecord, i: int
                     ) -> list[tuple[TaskRecord, int, float, float, str]] | None:
        """The elastic tasks on node ``i`` to shrink, each to what count, at what cost and
        why, so ``rec`` fits there (``_shrink_for``); None when they cannot free enough."""
        s = self.state
        count = int(s.gpu_count[i])
        need = rec.request.num_gpu - sum(1 for g in range(count)
                                         if s.gpu_free[i, g] >= MILLI_PER_GPU)
        if need <= 0:
            return None
        model = self.model_of(s.node_names[i])
        cands: list[tuple[float, int, TaskRecord, int]] = []
        for t in self.on_node.get(s.node_names[i], {}):
            v = self.tasks[t]
            elastic = v.meta.elastic
            if (not elastic or v.members or v.request.fractional
                    or v.request.num_gpu <= elastic[0] or v.meta.qos == "guaranteed"
                    or v.meta.priority > rec.meta.priority or self._changed_lately(v)
                    or self._started_by_this_input(v)):
                continue
            k = v.request.num_gpu
            k2 = max(elastic[0], k - need)
            cands.append((self._shrink_cost(v, model, k, k2)[0] / (k - k2), v.seq, v, k2))
        plan: list[tuple[TaskRecord, int, float, float, str]] = []
        for _, _, v, k2 in sorted(cands, key=lambda c: c[:2]):
            if need <= 0:
                break
            k = v.request.num_gpu
            k2 = max(k2, k - need)  # fewer GPUs suffice once cheaper tasks gave theirs
            plan.append((v, k2, *self._shrink_cost(v, model, k, k2)))
            need -= k - k2
        if need > 0 or len(plan) > self.preempt_budget:
            return None
        return plan

    def _shrink_cost(self, v: TaskRecord, model: str, k: int, k2: int
                     ) -> tuple[float, float, str]:
        """What shrinking ``v`` from ``k`` to ``k2`` GPUs of ``model`` costs it
        (``elastic_sizing.shrink_cost_s``), how many times as fast it runs on ``k`` as on
        ``k2``, and the basis of that figure."""
        factor, basis = self._scaling(v, model, k2, k)
        return elastic_sizing.shrink_cost_s(self._left_or_ran_s(v), factor, RESTART_S), \
            factor, basis

    def _scaling(self, rec: TaskRecord, model: str, k: int, k2: int) -> tuple[float, str]:
        """``elastic_sizing.scaling`` for the task's class, remembered with the speed
        book's answers (``_speed_cache``, keyed by both rows' generations): every pass
        asks it of every elastic task below its maximum."""
        row_class = rec.meta.name or rec.meta.task_class
        cache = self._speed_cache()
        key = ("scaling", row_class, model, k, k2, self.speeds.generation(row_class, k),
               self.speeds.generation(row_class, k2))
        known = cache.get(key)
        if known is None:
            known = cache[key] = elastic_sizing.scaling(self.speeds, row_class, model, k, k2)
        return known  # type: ignore[no-any-return]

    def _may_change_model(self, rec: TaskRecord) -> bool:
        """May the cell move ``rec`` to another GPU model at all: a one-node whole-GPU
        task, not a guaranteed one (moves and swaps alike)?"""
        req = rec.request
        return (not rec.members and not req.fractional and bool(req.num_gpu)
                and rec.meta.qos != "guaranteed")

    def _changed_lately(self, rec: TaskRecord) -> bool:
        """Did ``rec`` change GPU model less than ``CHANGE_GUARD_S`` ago (its last start)?"""
        return bool(rec.moves) and self.now_s - rec.started_s < CHANGE_GUARD_S

    def _attained_gpu_s(self, rec: TaskRecord) -> float:
        """GPU-seconds a running task has had, over all its runs."""
        return self._ran_s(rec) * rec.request.num_gpu

    def _swap_for_least_attained(self, cause: str) -> list[Outcome]:
        """Give the faster GPU models to the tasks that have had the least service, by
        swapping running tasks between models (when no GPU idles for a move).

        Why: mean completion time is lowest when the fastest machines serve the work
        closest to its end (shortest remaining time on the fastest machine, SRPT-FM);
        with run times unknown and heavy-tailed, the work with the least attained service
        is the likeliest to end soon (least attained service, Tiresias' premise), and
        when it ends its fast GPU goes to the next (a move, or the queue). Without this,
        the first job to reach a V100 keeps it for days while every later one, however
        short, runs on a K80 at a quarter of the speed.

        Task T on model S and task U on model F, of the same GPU count, change places
        when T runs faster on F than on S, U has had at least ``SIZE_PREEMPT_GAIN``
        times T's GPU-seconds plus a restart (the margin of ``_shorter_first``), and U
        loses no larger a share of its speed on S than T gains on F (``speed S / speed
        F`` at least T's): the cluster's work rate does not drop for the age order.
        For each two models the youngest such T and the oldest such U are the pair; the
        pair of the largest age gap goes first. Candidates as for ``_move_to_faster``,
        both not within ``CHANGE_GUARD_S`` of a model change; two of the tick's
        preemption budget per swap. Both places are found on a copy of the state before
        anything stops, so a swap is done whole or not at all."""
        return self._swap_pass(cause, self._least_attained_pair, "as it has had {} service")

    def _swap_for_work_rate(self, cause: str) -> list[Outcome]:
        """Give each GPU model the running tasks that gain most from it, by swapping two
        tasks between models when the cluster's work rate rises enough to pay both
        restarts.

        Why: on a cluster of mixed models the tasks' speeds rank the models differently
        (a Recommendation job runs faster on a K80 than on a V100, a ResNet-18 twelve
        times slower), so how much work the cluster does per second depends on which
        task holds which model, not only on how many GPUs are busy. Once the cluster is
        loaded that rate is its capacity: Gavel's workload at 5.6 jobs/h needs 93 % of
        what the best split of job types over models can do, and every point of speed
        lost to a task on the wrong model is queueing for all the others. The placement
        gives a task its fastest free model, which is right for it alone; swaps then
        move the cluster toward the split a throughput-maximising allocation finds
        (comparative advantage), one pair at a time.

        The work rate of a task on a model is its speed there over its speed on its
        fastest model (1: it runs as fast as it can anywhere). For two models S and F
        (same GPU count), the task T on S that gains most on F and the task U on F that
        loses least on S change places when T's gain less U's loss, times the time they
        are both likely to run still (each one's remaining run time as in
        ``_move_to_faster``: declared, predicted, else as long as it ran), is at least
        ``SIZE_PREEMPT_GAIN`` times the two restarts (``RESTART_S`` each); the largest
        gain first. Candidates and the guard on model changes as for
        ``_swap_for_least_attained``."""
        return self._swap_pass(cause, self._work_rate_pair,
                               "as the swap raises the cluster's work rate ({})")

    def _swap_candidates(self) -> dict[str, list[tuple[float, str, dict[str, float]]]]:
        """The running tasks a swap may move, by GPU model: (attained GPU-seconds, task,
        its class's speeds by model), for tasks whose model has a speed.

        Remembered for the tick until the speed book learns (a stopped run reports what
        it did, so a swap may teach it): a swap takes its two tasks out (both changed
        model just now, so a fresh look would leave them out too), and the next pass
        of the same tick starts from what is left. Derived state only.

        When the book learned within the same input (the same tick, time and
        ``input_place_seq``), only the speeds are read again, of the tasks the input's
        first scan found: no other task can have become a candidate since (the time is
        the same, and a run started since was started by this input), and those found
        stay candidates, with the same model and attained service, unless they stopped
        or started again since."""
        key = (self.tick_seq, self.speed_seq)
        if self._swap_cache is not None and self._swap_cache[0] == key:
            return self._swap_cache[1]
        scan = (self.tick_seq, self.input_place_seq, self.now_s)
        if self._swap_scan is not None and self._swap_scan[0] == scan:
            found = [c for c in self._swap_scan[1]
                     if c[2].status == RUNNING and not self._started_by_this_input(c[2])]
        else:
            found = []
            for tasks in self.on_node.values():
                for task in tasks:
                    rec = self.tasks[task]
                    if (not self._may_change_model(rec) or self._changed_lately(rec)
                            or self._started_by_this_input(rec)):
                        continue
                    found.append((self._attained_gpu_s(rec), task, rec,
                                  self.model_of(rec.node or "")))
        self._swap_scan = (scan, found)
        by_model: dict[str, list[tuple[float, str, dict[str, float]]]] = {}
        # This scan's ``_speed_map`` per (class, request shape), all that it depends on:
        # the running tasks share a few classes, and the book learns nothing mid-scan.
        maps: dict[tuple[Any, ...], dict[str, float]] = {}
        for attained, task, rec, model in found:
            shape = (rec.meta.name or rec.meta.task_class, rec.request.key)
            speeds = maps.get(shape)
            if speeds is None:
                speeds = maps[shape] = self._speed_map(rec)
            if speeds.get(model):
                by_model.setdefault(model, []).append((attained, task, speeds))
        self._swap_cache = (key, by_model)
        return by_model

    def _swap_pass(self, cause: str, pick: Callable[..., tuple[Any, ...] | None],
                   why: str) -> list[Outcome]:
        """Swap pairs of running tasks between GPU models while ``pick`` finds one among
        the candidates (``_swap_candidates``; T, U, F, S: T moves to F, U to S) and the
        tick's preemption budget lasts; ``why`` completes each ``Preempted``'s reason."""
        out: list[Outcome] = []
        sched = self._active_scheduler()
        tried: set[tuple[str, str]] = set()
        while self.preempt_budget >= 2:
            by_model = self._swap_candidates()
            found = pick(by_model, tried)
            if found is None:
                break
            t_task, u_task, t_to, u_to, detail = found
            tried.add((t_task, u_task))
            t, u = self.tasks[t_task], self.tasks[u_task]
            placed = self._swap_places(t, t_to, u, u_to, sched)
            if placed is None:
                continue
            for rec, there, other in ((t, t_to, u), (u, u_to, t)):
                self._stop_to_move(rec, f"swapped with {other.task}: from "
                                   f"{self.model_of(rec.node or '')} to {there}, "
                                   + why.format(detail(rec is t)), out)
            self._place_queued(t, placed[0], cause, out)
            self._place_queued(u, placed[1], cause, out)
            for model in (t_to, u_to):
                by_model[model] = [c for c in by_model[model] if c[1] not in (t_task, u_task)]
        return out

    def _least_attained_pair(self, by_model: dict[str, list[tuple[float, str, dict[str, float]]]],
                             tried: set[tuple[str, str]]) -> tuple[Any, ...] | None:
        """The pair of ``_swap_for_least_attained``: for each two models the youngest T and
        the oldest U that may change places, the largest age gap first."""
        # Each model's candidates sorted once, not once per pair of models: sorting them
        # again in ``_youngest_oldest`` is then one linear pass (the same order: the
        # (age, task) pairs are unique).
        ordered = sorted((model, sorted(cands)) for model, cands in by_model.items())
        best: tuple[float, str, str, str, str] | None = None
        for s_model, ts in ordered:
            for f_model, us in ordered:
                if s_model != f_model:
                    found = self._youngest_oldest(ts, us, s_model, f_model, tried)
                    if found is not None and (best is None or found > best):
                        best = found
        if best is None:
            return None
        return (*best[1:], lambda is_t: "less" if is_t else "more")

    def _work_rate_pair(self, by_model: dict[str, list[tuple[float, str, dict[str, float]]]],
                        tried: set[tuple[str, str]]) -> tuple[Any, ...] | None:
        """The pair of ``_swap_for_work_rate`` of the largest gain, or None."""
        # A task's work rate on each model (its speed there over its fastest), worked out
        # once a call rather than for every pair of models, and once per speed map: a
        # class's tasks share one (alive for the call, so its ``id`` is a key).
        rates: dict[int, dict[str, float]] = {}
        rated: dict[str, list[tuple[str, dict[str, float], dict[str, float]]]] = {}
        for model, cands in by_model.items():
            rated[model] = []
            for _, task, sp in cands:
                rate = rates.get(id(sp))
                if rate is None:
                    top = max(sp.values())
                    rate = rates[id(sp)] = {m: sp.get(m, 0.0) / top for m in by_model}
                rated[model].append((task, sp, rate))

        best: tuple[float, str, str, str, str] | None = None
        for s_model in sorted(by_model):
            for f_model in sorted(by_model):
                if s_model == f_model:
                    continue
                # The task that gains most: the least (minus gain, task), tasks being unique.
                gainer = min(((r[s_model] - r[f_model], t)
                              for t, sp, r in rated[s_model] if sp.get(f_model)), default=None)
                if gainer is None:
                    continue
                minus_gain, t = gainer
                losers = sorted(((r[f_model] - r[s_model], u)
                                 for u, sp, r in rated[f_model] if sp.get(s_model)))
                t_rec = self.tasks[t]
                for loss, u in losers:  # the first that may take its place loses least
                    gain = -minus_gain - loss
                    if gain <= 0:
                        break
                    u_rec = self.tasks[u]
                    if (t, u) in tried or u_rec.request.num_gpu != t_rec.request.num_gpu:
                        continue
                    horizon = min(self._left_or_ran_s(t_rec), self._left_or_ran_s(u_rec))
                    if (gain * horizon >= SIZE_PREEMPT_GAIN * 2 * RESTART_S
                            and (best is None or (gain, t, u) > best[:3])):
                        best = (gain, t, u, f_model, s_model)
                    break
        if best is None:
            return None
        gain = best[0]
        return (*best[1:], lambda _is_t: f"+{gain:.2f} of a GPU's work")

    def _left_or_ran_s(self, rec: TaskRecord) -> float:
        """Its remaining run time (``_left_s``), else as long as it ran (the premise of
        least attained service: a task that ran long is likely to run long still)."""
        left = self._left_s(rec)
        return self._ran_s(rec) if left is None else left

    def _youngest_oldest(self, ts: list[tuple[float, str, dict[str, float]]],
                         us: list[tuple[float, str, dict[str, float]]], s_model: str,
                         f_model: str, tried: set[tuple[str, str]]
                         ) -> tuple[float, str, str, str, str] | None:
        """(age gap, T, U, F, S): the youngest task T of ``ts`` (on model S) faster on F,
        and the oldest U of ``us`` (on F) that may take its place
        (``_swap_for_least_attained``), or None."""
        for t_age, t, t_speeds in sorted(ts):
            if t_speeds.get(f_model, 0.0) <= t_speeds[s_model]:
                continue
            t_ratio = t_speeds[s_model] / t_speeds[f_model]
            restart = RESTART_S * self.tasks[t].request.num_gpu
            for u_age, u, u_speeds in sorted(us, reverse=True):
                if u_age < SIZE_PREEMPT_GAIN * (t_age + restart):
                    return None  # the oldest left are younger still
                if ((t, u) not in tried and u_speeds.get(s_model)
                        and self.tasks[u].request.num_gpu == self.tasks[t].request.num_gpu
                        and u_speeds[s_model] / u_speeds[f_model] >= t_ratio):
                    return u_age - t_age, t, u, f_model, s_model
            return None
        return None

    def _swap_places(self, t: TaskRecord, t_to: str, u: TaskRecord, u_to: str,
                     sched: Scheduler) -> tuple[PlaceResult, PlaceResult] | None:
        """Where ``t`` would run on model ``t_to`` and then ``u`` on ``u_to`` once both
        stopped (on a copy of the state), or None when either finds no place. The copy
        starts from the state's scores (``place_on_copy``): it scores again the nodes the
        two tasks leave or take, not every node."""
        trial = self.state.copy()
        trial.release(t.task)
        trial.release(u.task)
        t_req = dataclasses.replace(self._told_speeds(t), gpu_models=(t_to,))
        t_at = place_on_copy(trial, self.state, sched, t_req, self.explain)
        if t_at.node < 0:
            return None
        trial.allocate(t.request, t_at.node, t_at.gpus)
        u_at = place_on_copy(trial, self.state, sched, dataclasses.replace(
            self._told_speeds(u), gpu_models=(u_to,)), self.explain)
        return None if u_at.node < 0 else (t_at, u_at)

    def _free_whole_gpus_by_model(self) -> dict[str, int]:
        """For each GPU model, the most wholly idle GPUs on one healthy node of it."""
        s = self.state
        n = s.n
        whole = (s.gpu_free[:n] >= MILLI_PER_GPU).sum(axis=1) * s.healthy[:n]
        out: dict[str, int] = {}
        for node in np.flatnonzero(whole).tolist():
            m = int(s.model[node])
            if m >= 0:
                name = s.model_names[m]
                out[name] = max(out.get(name, 0), int(whole[node]))
        return out

    def model_of(self, node: str) -> str:
        """The GPU model of a node of this cell ('' for none or an unknown node),
        remembered in the state's derived cache (which a new node clears): the move and
        swap passes ask it of every running task at every tick."""
        s = self.state
        cache: dict[str, str] = s.cache.setdefault("cell.node_models", {})  # type: ignore[assignment]
        known = cache.get(node)
        if known is None:
            i = s.node_index.get(node)
            m = -1 if i is None else int(s.model[i])
            known = s.model_names[m] if m >= 0 else ""
            if i is not None:
                cache[node] = known
        return known

    def _preempt_for_gang(self, rec: TaskRecord, sched: Scheduler, cause: str,
                          out: list[Outcome]) -> PlaceResult:
        """Shorter first for a gang at the head (``predict_runtimes``): stop much longer
        running tasks, whole, when that lets the gang start now and lowers the mean
        completion time by the predictions.

        Victims are those ``_shorter_first`` allows, largest first (a gang frees whole
        nodes: the fewest victims), until ``gang.plan`` finds the gang a place on the
        nodes as they would be; victims the plan does not need are then kept running.
        Starting now instead of at its reservation ends the gang ``wait`` earlier, where
        ``wait`` is how long its reservation is away (``_reserve_gang``, from the
        running tasks' expected ends), and ends each of the k victims about ``head left +
        restart`` later: the swap pays when ``wait`` exceeds k times that, and
        ``SIZE_PREEMPT_GAIN`` times it is asked for, as for one victim, since both sides
        are predictions. Without this, a short gang that needs many whole nodes waits
        behind long gangs that hold them for days while it would be done in minutes.
        """
        nothing = PlaceResult(-1, (), None)
        head_left = self._left_s(rec)
        if head_left is None:
            return nothing
        s, req = self.state, rec.request
        n = s.n
        ok = gang.model_mask(s, req, s.healthy[:n] & (s.cpu_cap[:n] >= req.cpu_milli)
                              & (s.mem_cap[:n] >= req.memory_mib))
        seen: set[str] = set()
        cands: list[tuple[int, float, int, TaskRecord]] = []
        for node in np.flatnonzero(ok).tolist():
            for t in self.on_node.get(s.node_names[node], {}):
                if t in seen:
                    continue
                seen.add(t)
                v = self.tasks[t]
                if not self._started_by_this_input(v) and self._shorter_first(rec, v):
                    left = self._left_s(v) or 0.0
                    cands.append((-v.request.num_gpu, -left, v.seq, v))
        if not cands:
            return nothing
        cands.sort(key=lambda c: c[:3])

        def trial_state() -> ClusterState:
            trial = copy.copy(s)  # shares the task tables; the free figures are its own
            trial.cpu_free, trial.mem_free = s.cpu_free.copy(), s.mem_free.copy()
            trial.gpu_free = s.gpu_free.copy()
            return trial

        def free(trial: ClusterState, v: TaskRecord) -> None:
            for node in _nodes_of(v):
                trial.return_resources(trial.slot_on(v.task, s.node_index[node]))

        def fits_without(stopped: list[TaskRecord]) -> bool:
            trial = trial_state()
            for v in stopped:
                free(trial, v)
            return gang.plan(trial, req) is not None

        chosen: list[TaskRecord] = []
        trial = trial_state()
        for *_, v in cands:
            chosen.append(v)
            if len(chosen) > self.preempt_budget:
                return nothing
            free(trial, v)
            if gang.plan(trial, req) is not None:
                break
        else:
            return nothing
        for v in list(chosen):  # smallest last taken first: keep what the gang does not need
            rest = [c for c in chosen if c is not v]
            if fits_without(rest):
                chosen = rest
        reservation = self._reserve_gang(rec)
        wait = math.inf if reservation is None else reservation.start_s - self.now_s
        if wait < SIZE_PREEMPT_GAIN * len(chosen) * (head_left + RESTART_S):
            return nothing
        for v in chosen:
            self._stop_victim(v, rec, True, out)
        self._reservation = None
        return self._place_uncached(req, sched)

    # ---- workflows ---------------------------------------------------------------------

    def _near_predecessor(self, req: TaskRequest, preds: tuple[str, ...]) -> TaskRequest:
        """Point a dependent task's input at its last predecessor's node (locality)."""
        if req.input_node is not None:
            return req
        for p in reversed(preds):
            rec = self.tasks.get(p)
            if rec is not None and rec.last_node:
                return dataclasses.replace(req, input_node=rec.last_node)
        return req

    def _release_dependents(self, rec: TaskRecord, cause: str) -> list[Outcome]:
        out: list[Outcome] = []
        for dep in self.dependents.pop(rec.task, []):
            d = self.tasks[dep]
            if d.status != WAITING:
                continue
            if not rec.ok:
                out.extend(self._fail_dependent(d, rec.task, cause))
                continue
            d.waiting_on = tuple(p for p in d.waiting_on if p != rec.task)
            self.dirty_tasks.add(dep)
            if not d.waiting_on:
                d.request = self._near_predecessor(d.request, d.meta.depends_on)
                if self._could_ever_fit(d.request):
                    self._enqueue(d)
                else:
                    out.extend(self._fail_dependent(d, "", cause))
        return out

    def _fail_dependent(self, rec: TaskRecord, pred: str, cause: str) -> list[Outcome]:
        """A predecessor failed (or the task can never fit): the task, and its own
        dependents, will never run."""
        self._unwait(rec)
        self._done(rec, False)
        self.dirty_tasks.add(rec.task)
        why = f"predecessor {pred} did not finish" if pred else "no node can ever host it"
        out: list[Outcome] = [Refused(Unschedulable(
            f"{cause}/{rec.task}", cause, rec.task, Verdict(
                "unschedulable_and_unresolvable", (why,), "workflow"), None), False)]
        for dep in self.dependents.pop(rec.task, []):
            d = self.tasks[dep]
            if d.status == WAITING:
                out.extend(self._fail_dependent(d, rec.task, cause))
        return out

    def _unwait(self, rec: TaskRecord) -> None:
        for p in rec.waiting_on:
            deps = self.dependents.get(p)
            if deps and rec.task in deps:
                deps.remove(rec.task)
                if not deps:
                    del self.dependents[p]
        rec.waiting_on = ()

    # ---- bookkeeping -------------------------------------------------------------------

    def _mark_running(self, rec: TaskRecord, decision: Placement) -> None:
        rec.status, rec.node, rec.gpus = RUNNING, decision.node, decision.gpus
        rec.members = decision.members
        rec.last_node = decision.node
        rec.started_s = self.now_s
        rec.place_seq = self.place_seq
        self.place_seq += 1
        for node in _nodes_of(rec):
            self.on_node.setdefault(node, {})[rec.task] = None
        self.queue.on_start(rec.meta.tenant, rec.request.gpu_total_milli)
        self.dirty_tasks.add(rec.task)

    def report_progress(self, task: str, node: str, rate: float,
                        now_s: float | None = None) -> None:
        """A running task's progress rate on its node (``TaskUsage`` v2): kept on its
        record until the run ends, when the speed book learns it.

        One measurement per run, its last: a rate from the start of a run includes
        loading and warm-up, and a long run reporting every half minute would otherwise
        outweigh every other run of its class. The class is the task's job name (what
        it runs), else its declared profile; fractional tasks teach nothing (their rate
        is their share's as much as the model's), nor tasks of neither."""
        self._at(now_s)
        rec = self.tasks.get(task)
        if (rec is None or rec.status != RUNNING or rec.node != node
                or rec.request.fractional or not rec.request.num_gpu
                or not (rec.meta.name or rec.meta.task_class)):
            return
        model = int(self.state.model[self.state.node_index[node]])
        if model < 0:
            return
        rec.run_rate = (self.state.model_names[model], rec.request.num_gpu, rate)
        self.dirty_tasks.add(task)

    def _learn_speed(self, rec: TaskRecord) -> None:
        """The run of ``rec`` ended: the speed book learns its last reported rate."""
        if rec.run_rate is None:
            return
        model, num_gpu, rate = rec.run_rate
        rec.run_rate = None
        row_class = rec.meta.name or rec.meta.task_class
        if self.speeds.observe(row_class, num_gpu, model, rate):
            rec.speed_runs += ((self.speed_seq, row_class, num_gpu, model, rate),)
            self.speed_seq += 1

    def _release(self, rec: TaskRecord) -> None:
        """Forget a running task's placement in the cell's indexes (not in the state);
        its run is over, so the speed book learns what the run reported."""
        self._learn_speed(rec)
        for node in _nodes_of(rec):
            tasks = self.on_node.get(node)
            if tasks is not None:
                tasks.pop(rec.task, None)
        rec.members = ()
        self.queue.on_stop(rec.meta.tenant, rec.request.gpu_total_milli)
        if self._reservation is not None and self._reservation.task == rec.task:
            self._reservation = None

    def _could_ever_fit(self, req: TaskRequest) -> bool:
        """True if some node of the cell could host ``req`` when empty and healthy.

        Remembered per request shape in the state's derived cache: it reads only
        capacities and models, which change only when a node is added, and that
        clears the cache.
        """
        cache: dict[tuple[Any, ...], bool] = self.state.cache.setdefault(  # type: ignore[assignment]
            "cell.ever_fit", {})
        key = (req.cpu_milli, req.memory_mib, req.num_gpu, req.gpu_models, req.nodes,
               req.gpus_per_node, req.mixed_models)
        known = cache.get(key)
        if known is None:
            known = cache[key] = (gang.never_fits(self.state, req) is None
                                  if self.is_gang(req) else self._fits_when_empty(req))
        return known

    def _fits_when_empty(self, req: TaskRequest) -> bool:
        s, n = self.state, self.state.n
        ok = (s.cpu_cap[:n] >= req.cpu_milli) & (s.mem_cap[:n] >= req.memory_mib)
        if req.num_gpu:
            ok &= s.gpu_count[:n] >= req.num_gpu
            if req.gpu_models:
                ids = [s.model_ids[m] for m in req.gpu_models if m in s.model_ids]
                ok &= np.isin(s.model[:n], np.array(ids, np.int64))
        return bool(ok.any())

    # ---- views ---------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """What a router needs to pick this cell: models, free whole GPUs, queue length."""
        s, n = self.state, self.state.n
        models: dict[str, dict[str, int]] = {}
        for i in range(n):
            count = int(s.gpu_count[i])
            if not count or s.model[i] < 0:
                continue
            entry = models.setdefault(s.model_names[int(s.model[i])], {"gpus": 0, "free": 0,
                                                                      "max_per_node": 0})
            entry["gpus"] += count
            entry["max_per_node"] = max(entry["max_per_node"], count)
            if s.healthy[i]:
                entry["free"] += int((s.gpu_free[i, :count] == MILLI_PER_GPU).sum())
        return {"nodes": n, "models": dict(sorted(models.items())), "queued": len(self.queue)}

    # ---- persistence ---------------------------------------------------------------

    def node_record(self, node: str) -> dict[str, Any]:
        rec = self.nodes[node]
        a = rec.added
        return {"seq": rec.seq, "event_id": a.event_id, "cpu_milli": a.cpu_milli,
                "memory_mib": a.memory_mib, "gpu_count": a.gpu_count, "gpu_model": a.gpu_model,
                "healthy": rec.healthy, "extra": rec.extra,
                **({"rack": a.rack} if a.rack is not None else {})}

    def task_record(self, task: str) -> dict[str, Any]:
        rec = self.tasks[task]
        r = rec.request
        out: dict[str, Any] = {"seq": rec.seq, "status": rec.status}
        if rec.submission:
            out["submission"] = rec.submission
        if rec.status != DONE:
            out["request"] = [r.cpu_milli, r.memory_mib, r.num_gpu, r.gpu_milli,
                              list(r.gpu_models), r.input_node]
            if r.nodes or r.mixed_models:
                out["request"] += [r.nodes, r.gpus_per_node, r.mixed_models]
            out["spec"] = rec.spec
            m = rec.meta
            out["meta"] = [m.tenant, m.priority, m.qos, m.expected_s, list(m.depends_on),
                           m.task_class, *([m.name] if m.name else [])]
            if m.elastic:
                out["elastic"] = list(m.elastic)
            out["times"] = [rec.enqueued_s, rec.started_s, rec.progress_s, rec.preemptions,
                            rec.kill_acks]
            out["waiting_on"] = list(rec.waiting_on)
            if rec.size_preemptions:
                out["size_preemptions"] = rec.size_preemptions
            if rec.moves:
                out["moves"] = rec.moves
            if rec.status == QUEUED:
                out["queued_seq"] = rec.queued_seq
                if rec.size_class:
                    out["size_class"] = rec.size_class
                if rec.age_class:
                    out["age_class"] = rec.age_class
        else:
            out["ok"] = rec.ok
            out["tenant"] = rec.meta.tenant  # who may learn of it (answer_taken_id)
            if rec.learned is not None:  # the predictor's memory, rebuilt by restore
                k = self.kind(rec)
                out["learned"] = [*rec.learned, k.name, k.task_class, k.num_gpu]
        if rec.speed_runs:  # the speed book's memory, rebuilt by restore
            out["speed_runs"] = [list(run) for run in rec.speed_runs]
        if rec.last_node is not None:
            out["last_node"] = rec.last_node
        if rec.status == RUNNING:
            out.update(node=rec.node, gpus=list(rec.gpus), place_seq=rec.place_seq)
            if rec.run_rate is not None:
                out["run_rate"] = list(rec.run_rate)
            if rec.members:
                out["members"] = [[node, list(gpus)] for node, gpus in rec.members]
        return out

    def meta_record(self) -> dict[str, Any]:
        return {"task_seq": self.task_seq, "place_seq": self.place_seq,
                "queue_pushes": self.queue_pushes, "tick_seq": self.tick_seq,
                "arrivals": self.state.arrivals,
                "now_s": self.now_s, "preempt_budget": self.preempt_budget,
                "preemptions": self.preemptions,
                **({"links": links} if (links := self.state.topology.record())["node"]
                   or links["rack"] else {}),
                **({"adapt": self.adapt.meta} if self.adapt.meta else {}),
                **({"reservation": kept} if (kept := self._reservation_record()) else {})}

    def _reservation_record(self) -> list[Any] | None:
        """The head's reservation while it is still the one ``_reserve`` would keep.

        It is state, not a memo: kept while its nodes are unchanged, it was worked out
        from the running tasks' expected ends at the time it was made, and those move
        with time (a task that outlives its predicted run is predicted again, a late
        one is expected to end now). A cell rebuilt without it would work out a new one
        and backfill differently from the cell that wrote the log (found by the short
        chaos run's replay with a restore every five inputs, once run times were
        predicted by default)."""
        r = self._reservation
        if r is None or not self._reservation_holds(r):
            return None
        return [r.task, list(r.nodes), r.start_s]

    def _reservation_holds(self, r: _Reservation) -> bool:
        """Are ``r``'s nodes as they were when it was worked out (``_reserve`` keeps it)?"""
        return tuple(int(self.state.version[n]) for n in r.nodes) == r.versions

    @classmethod
    def restore(cls, name: str, scheduler: Scheduler, meta: Mapping[str, Any] | None,
                nodes: Iterable[tuple[str, Mapping[str, Any]]],
                tasks: Iterable[tuple[str, Mapping[str, Any]]],
                config: QueueConfig | None = None,
                objectives: WeightSchedule | None = None) -> Cell:
        """Rebuild a cell from its records (any order in; sequence order applied).

        Queued tasks go back into the queue in the order they were pushed
        (``queued_seq``), not by submission: a bucket of the queue keeps its tasks in
        push order, and a task queued again (its node failed, it was preempted) keeps its
        submission number but goes behind the tasks queued before it. Restored by
        submission, such a task went first where the running cell served it last, and
        a worker that rebuilt the cell decided differently from the log's fold (found by
        the short chaos run's replay). Records written before ``queued_seq`` existed
        come first, by time queued and submission."""
        cell = cls(name, scheduler, config, objectives)
        for node, r in sorted(nodes, key=lambda kv: kv[1]["seq"]):
            added = NodeAdded(r["event_id"], node, r["cpu_milli"], r["memory_mib"],
                              r["gpu_count"], r["gpu_model"], rack=r.get("rack"))
            cell.state = evolve(cell.state, added)
            cell.queue.total_milli += added.gpu_count * MILLI_PER_GPU
            if not r["healthy"]:
                cell.state.set_health(cell.state.node_index[node], False)
            cell.nodes[node] = NodeRecord(r["seq"], added, r["healthy"], r["extra"])
        records = sorted(tasks, key=lambda kv: kv[1]["seq"])
        queued: list[tuple[tuple[Any, ...], TaskRecord]] = []
        learned: list[tuple[int, float, TaskKind]] = []
        speed_runs: list[tuple[int, str, int, str, float]] = []
        for task, r in records:
            runs = tuple((o, c, n, m, rate) for o, c, n, m, rate in r.get("speed_runs", ()))
            speed_runs += runs
            if r["status"] == DONE:
                req = TaskRequest(task, 0, 0)
                cell.tasks[task] = TaskRecord(task, r["seq"], req, None, DONE,
                                              ok=r.get("ok", True),
                                              last_node=r.get("last_node"),
                                              meta=TaskMeta(tenant=r.get("tenant", "")),
                                              submission=r.get("submission", ""))
                cell.tasks[task].speed_runs = runs
                if "learned" in r:
                    order, ran_s, name, task_class, num_gpu = r["learned"]
                    learned.append((order, ran_s, TaskKind(r.get("tenant", ""), name,
                                                           task_class, num_gpu)))
                    cell.tasks[task].learned = (order, ran_s)
                    cell.tasks[task].kind = learned[-1][2]
                continue
            cpu, mem, num_gpu, milli, models, input_node, *shape = r["request"]
            req = TaskRequest(task, cpu, mem, num_gpu, milli, tuple(models), input_node,
                              *shape)
            m = r.get("meta")
            tmeta = TaskMeta(m[0], m[1], m[2], m[3], tuple(m[4]), m[5],
                             m[6] if len(m) > 6 else "", tuple(r.get("elastic", ()))
                             ) if m else TaskMeta()
            rec = TaskRecord(task, r["seq"], req, r["spec"], r["status"], meta=tmeta,
                             last_node=r.get("last_node"), submission=r.get("submission", ""),
                             waiting_on=tuple(r.get("waiting_on", ())))
            times = r.get("times")
            if times:
                (rec.enqueued_s, rec.started_s, rec.progress_s, rec.preemptions,
                 rec.kill_acks) = times
            cell.tasks[task] = cell.unfinished[task] = rec
            if rec.meta.elastic:
                cell.elastic_unfinished.add(task)
            rec.speed_runs = runs
            rec.size_preemptions = r.get("size_preemptions", 0)
            rec.moves = r.get("moves", 0)
            if r["status"] == QUEUED:
                rec.queued_seq = r.get("queued_seq", -1)
                rec.size_class = r.get("size_class", 0)
                rec.age_class = r.get("age_class", 0)
                queued.append(((rec.queued_seq >= 0, rec.queued_seq, rec.enqueued_s, rec.seq),
                               rec))
            for p in rec.waiting_on:
                cell.dependents.setdefault(p, []).append(task)
        for order, ran_s, kind in sorted(learned, key=lambda e: e[0]):
            cell.predictor.learn(kind, ran_s)
            cell.predictor.learned = order + 1
        for order, row_class, num_gpu, model, rate in sorted(speed_runs):
            cell.speeds.observe(row_class, num_gpu, model, rate)
            cell.speed_seq = order + 1
        for _, rec in sorted(queued, key=lambda kr: kr[0]):
            cell.queue.push(rec.task, rec.seq, rec.meta, rec.request.gpu_total_milli,
                            rec.enqueued_s, rec.size_class, rec.request.key, rec.age_class)
        running = [(t, r) for t, r in records if r["status"] == RUNNING]
        for task, r in sorted(running, key=lambda kv: kv[1]["place_seq"]):
            rec = cell.tasks[task]
            rec.status, rec.node, rec.gpus = RUNNING, r["node"], tuple(r["gpus"])
            rec.place_seq = r["place_seq"]
            if r.get("run_rate"):
                model, num_gpu, rate = r["run_rate"]
                rec.run_rate = (model, num_gpu, rate)
            if r.get("members"):
                rec.members = tuple((m, tuple(g)) for m, g in r["members"])
                cell.state.allocate_gang(task, rec.request.cpu_milli, rec.request.memory_mib,
                                         [(cell.state.node_index[m], g) for m, g in rec.members])
            else:
                cell.state.allocate(rec.request, cell.state.node_index[r["node"]], rec.gpus)
            for node in _nodes_of(rec):
                cell.on_node.setdefault(node, {})[task] = None
            cell.queue.on_start(rec.meta.tenant, rec.request.gpu_total_milli)
        if meta:
            cell.task_seq = meta["task_seq"]
            cell.place_seq = cell.input_place_seq = meta["place_seq"]
            cell.queue_pushes = meta.get("queue_pushes", 0)
            cell.tick_seq = meta["tick_seq"]
            cell.state.arrivals = meta["arrivals"]
            cell.now_s = meta.get("now_s", 0.0)
            cell.preempt_budget = meta.get("preempt_budget", cell.preempt_budget)
            cell.preemptions = meta.get("preemptions", 0)
            cell.adapt.meta = dict(meta.get("adapt") or {})
            cell.state.topology.restore(meta.get("links"))
        after_restore(cell.state, cell.nodes)
        if meta and meta.get("reservation"):
            head, held, start_s = meta["reservation"]
            cell._reservation = _Reservation(head, tuple(held), start_s, tuple(
                int(cell.state.version[n]) for n in held))
        return cell


def _nodes_of(rec: TaskRecord) -> list[str]:
    """The nodes a running task holds: each member's of a gang, else its one node."""
    if rec.members:
        return [node for node, _ in rec.members]
    return [rec.node] if rec.node else []


def _state_of(rec: TaskRecord) -> str:
    """A task's state in words, for its own tenant (``Cell.answer_taken_id``)."""
    if rec.status == RUNNING:
        return f"running on {rec.node}"
    if rec.status == WAITING:
        return f"waiting for {', '.join(rec.waiting_on)}"
    if rec.status == DONE:
        return "finished" if rec.ok else "ended without finishing: failed, cancelled or refused"
    return "queued"


def _node_problems(event: NodeAdded) -> list[str]:
    problems = []
    if min(event.cpu_milli, event.memory_mib, event.gpu_count) < 0:
        problems.append("negative capacity")
    if event.gpu_count > MAX_GPUS_PER_NODE:
        problems.append(f"more than {MAX_GPUS_PER_NODE} GPUs")
    if event.gpu_count and not event.gpu_model:
        problems.append("GPUs without a model")
    return problems
