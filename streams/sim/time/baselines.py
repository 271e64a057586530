"""Research baselines for ``simulate --mode time``: Tiresias (2D-LAS) and an SRTF oracle.

Why not the ``Cell``: the cell orders its queue by priority, fair share and
aging, and preempts only best-effort work for latency-sensitive tasks; it has
no notion of a running task's *attained service* that moves it between
queues, nor of preempting a running gang for a waiting one. Expressing
least-attained-service through it would change the service's queue, so these
baselines are a small event-driven whole-GPU scheduler of their own that
reuses the simulator's event loop (``Simulator.push``/``run``), the same job
list and node list, and the same ``Recorder``: every start is a ``Placement``
and every preemption a ``Preempted`` outcome, so the metrics (waits, JCT,
allocation, preemptions per job) are counted exactly as for the other
policies.

Common to both (whole GPUs, as their sources schedule):

* a fractional request takes one whole GPU (as ``static`` does); CPU and
  memory are not scheduled (Tiresias' and Lucid's simulators count GPUs
  only; in the mixed and Helios workloads no node runs out of CPU or memory
  before GPUs);
* placement is consolidated, as Tiresias does for skewed models and as
  Lucid's ``consolidate`` placer: a job of at most one node's GPUs goes on
  one node (best fit: the node with the fewest idle GPUs that hold it, then
  the lowest node index); a larger job is a gang over whole idle nodes of one
  GPU model and node size plus one node for the remainder (best fit), placed
  all at once or not at all (no rack or link preference: kept simple);
* preemption checkpoints the job (no work is lost) and charges a restart cost
  when it runs again: ``RESTART_S`` = 40 s for jobs of at most 8 GPUs, 60 s
  above, Lucid's ``Policy.ckpt_overhead`` (S-Lab-System-Group/Lucid,
  simulation/policy/policy.py, "an optimistic estimation" against the 62 s
  average preemption overhead Tiresias measured, its Section 5.2.4). The time
  is added to the job's remaining run time, and the job holds its GPUs for it;
* dispatch walks the waiting jobs in the policy's priority order, skipping a
  job that does not fit (fit-first, as both sources do); a waiting job that
  does not fit preempts running jobs that rank strictly below it, lowest
  first, when that makes it fit; victims whose GPUs the job then does not
  take keep running (they are never stopped for nothing);
* workflows: a job with ``depends_on`` waits until its predecessors finished.

``tiresias``: discretized two-dimensional least-attained-service (2D-LAS),
Gu et al., NSDI'19, as its public simulator runs it (SymbioticLab/Tiresias,
``simulator/run_sim.py`` ``dlas_sim_jobs(gputime=True, solve_starvation)``):

* attained service = GPUs x seconds held since the job last entered the top
  queue; queues Q0..Q(K-1) with thresholds ``TIRESIAS_THRESHOLDS_GPU_S``
  (K = 2, one threshold of 3,600 GPU-seconds: the simulator README's two-queue
  example and its per-GPU-count ``g_job`` queues; its ``dlas-gpu`` default is
  three queues at 3,250 and 7,200 GPU-s, Lucid runs two at 18,000 on Helios);
  a new job enters Q0, a running job moves down when it crosses its queue's
  threshold;
* within a queue jobs are FIFO by arrival, and running jobs keep their place
  ahead of waiting ones (the simulator moves waiting jobs behind running ones
  after each pass): preemption happens only across queues, when a job was
  demoted below waiting jobs of a higher queue that need its GPUs;
* starvation: a waiting job of a lower queue that has run since its last
  promotion goes back to Q0 with its attained service reset when the time it
  waited since then reaches ``PROMOTE_KNOB`` x the time it ran since then
  (the simulator's ``solve_starvation`` knob, ``last_pending_time >=
  executed_time x knob``). ``PROMOTE_KNOB`` = 8: the simulator's ``dlas-gpu``
  runs without promotion and ships the knob as variants 0.5 .. 1000; 8 is the
  largest of its 1-2-4-8 sweep (``sim_runs.sh``) below the values that all
  but disable it.

``srtf-oracle``: preemptive shortest-remaining-time-first on the TRUE
remaining run time (Lucid's ``srtf`` policy, event-driven here): a waiting
job preempts running jobs whose remaining time is longer than its own. It
knows what no scheduler knows, so it is a reference bound, not a competitor.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from streams.core.cell import Preempted, Refused
from streams.core.decisions import Placement, Unschedulable
from streams.core.policy import Verdict
from streams.core.queue import QueueConfig
from streams.core.request import MILLI_PER_GPU
from streams.core.scheduler import Scheduler
from streams.sim.time.cell_options import cell_only_flags
from streams.sim.time.engine import Handler, SimPolicy, Simulator
from streams.sim.time.jobs import Job, job_restart_s
from streams.sim.time.metrics import Recorder
from streams.sim.traces import NodeSpec

TIRESIAS, SRTF = "tiresias", "srtf-oracle"
NAMES = (TIRESIAS, SRTF)
TIRESIAS_THRESHOLDS_GPU_S: tuple[float, ...] = (3600.0,)  # K = 2 queues; see module docstring
PROMOTE_KNOB = 8.0  # promote when waited >= knob x ran since last promotion; 0 disables

WAITING, PENDING, RUNNING, DONE = "waiting", "queued", "running", "done"




@dataclass(frozen=True)
class BaselinePolicy(SimPolicy):
    """A ``SimPolicy`` run by its own whole-GPU simulator (``runner``), not the cell."""

    thresholds_gpu_s: tuple[float, ...] = TIRESIAS_THRESHOLDS_GPU_S
    promote_knob: float = PROMOTE_KNOB


def make_baseline(name: str, scheduler: Scheduler,
                  thresholds_gpu_s: tuple[float, ...] = TIRESIAS_THRESHOLDS_GPU_S,
                  promote_knob: float = PROMOTE_KNOB) -> BaselinePolicy:
    """``tiresias`` or ``srtf-oracle``; ``scheduler`` only builds the recorder's cluster
    state (capacity, GPU models), it places nothing."""
    runner: type[Simulator] = TiresiasSim if name == TIRESIAS else SrtfSim
    return BaselinePolicy(name, scheduler, QueueConfig(), runner=runner,
                          thresholds_gpu_s=tuple(sorted(thresholds_gpu_s)),
                          promote_knob=promote_knob)


def unsupported(names: Sequence[str], args: Any) -> str | None:
    """Why these options cannot run with the baselines asked for (None: they can): the
    adaptation and fault layer (issue 8) drives the cell, which the baselines do not use."""
    asked = [n for n in names if n in NAMES]
    flags = cell_only_flags(args)
    if asked and flags:
        return (f"{', '.join(flags)} need the cell; {', '.join(asked)} run their own "
                "whole-GPU simulator (drop the option or the policy)")
    return None


# ---- the whole-GPU cluster ------------------------------------------------------------


class _Group:
    """Nodes of one GPU model and one size: idle-GPU buckets for best fit and gangs."""

    __slots__ = ("by_free", "cap", "idle", "model", "nodes")

    def __init__(self, model: str, cap: int) -> None:
        self.model, self.cap = model, cap
        self.nodes: list[int] = []
        self.by_free: list[set[int]] = [set() for _ in range(cap + 1)]
        self.idle = 0


class _Cluster:
    """Idle GPU indices per node, grouped by (model, size); pure bookkeeping."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        self.names = [n.name for n in nodes]
        self.free: list[list[int]] = []
        self.group_of: list[_Group | None] = []
        groups: dict[tuple[str, int], _Group] = {}
        for i, n in enumerate(nodes):
            self.free.append(list(range(n.gpu_count - 1, -1, -1)))  # pop() gives GPU 0 first
            if n.gpu_count <= 0:
                self.group_of.append(None)
                continue
            g = groups.setdefault((n.gpu_model or "", n.gpu_count),
                                  _Group(n.gpu_model or "", n.gpu_count))
            g.nodes.append(i)
            g.by_free[n.gpu_count].add(i)
            g.idle += n.gpu_count
            self.group_of.append(g)
        self.groups = [groups[k] for k in sorted(groups)]
        self._allowed: dict[tuple[str, ...], tuple[_Group, ...]] = {}

    def allowed(self, models: tuple[str, ...]) -> tuple[_Group, ...]:
        known = self._allowed.get(models)
        if known is None:
            known = self._allowed[models] = tuple(
                g for g in self.groups if not models or g.model in models)
        return known

    def take(self, node: int, k: int) -> tuple[int, ...]:
        free = self.free[node]
        g = self.group_of[node]
        assert g is not None and len(free) >= k
        g.by_free[len(free)].discard(node)
        ids = tuple(free.pop() for _ in range(k))
        g.by_free[len(free)].add(node)
        g.idle -= k
        return ids

    def take_ids(self, node: int, ids: tuple[int, ...]) -> bool:
        """Take exactly these GPUs back (a victim that keeps running); False if one is used."""
        free = self.free[node]
        if any(i not in free for i in ids):
            return False
        g = self.group_of[node]
        assert g is not None
        g.by_free[len(free)].discard(node)
        for i in ids:
            free.remove(i)
        g.by_free[len(free)].add(node)
        g.idle -= len(ids)
        return True

    def give(self, node: int, ids: tuple[int, ...]) -> None:
        free = self.free[node]
        g = self.group_of[node]
        assert g is not None
        g.by_free[len(free)].discard(node)
        free.extend(ids)
        free.sort(reverse=True)
        g.by_free[len(free)].add(node)
        g.idle += len(ids)

    def find(self, gpus: int, groups: tuple[_Group, ...],
             gang: bool) -> list[tuple[int, int]] | None:
        """Where ``gpus`` whole GPUs go now: [(node, count)], or None (see module docstring)."""
        if not gang:
            best: tuple[int, int] | None = None
            for g in groups:
                if g.cap < gpus or g.idle < gpus:
                    continue
                for k in range(gpus, g.cap + 1):
                    if g.by_free[k]:
                        cand = (k, min(g.by_free[k]))
                        if best is None or cand < best:
                            best = cand
                        break
            return None if best is None else [(best[1], gpus)]
        for g in groups:
            if g.idle < gpus:
                continue
            whole, rest = divmod(gpus, g.cap)
            idle_nodes = g.by_free[g.cap]
            if len(idle_nodes) < whole:
                continue
            chosen = sorted(idle_nodes)[:whole]
            out = [(n, g.cap) for n in chosen]
            if rest:
                extra = None
                for k in range(rest, g.cap + 1):
                    pool = g.by_free[k] if k < g.cap else idle_nodes.difference(chosen)
                    if pool:
                        extra = min(pool)
                        break
                if extra is None:
                    continue
                out.append((extra, rest))
            return out
        return None


# ---- per-job state --------------------------------------------------------------------


class _Rec:
    """One job's scheduling state (``enqueued_s`` is what the Recorder reads)."""

    __slots__ = (
        "arrival_s",
        "done_preds",
        "end_s",
        "enqueued_s",
        "executed_s",
        "factor",
        "gang",
        "gen",
        "gpus",
        "groups",
        "job",
        "level",
        "members",
        "overhead_s",
        "pend_since",
        "preds",
        "prio",
        "remaining_s",
        "run_from",
        "seq",
        "started_s",
        "starve_s",
        "status",
        "task",
        "token",
        "work_s",
    )

    def __init__(self, job: Job, seq: int, gpus: int, groups: tuple[_Group, ...],
                 gang: bool) -> None:
        self.job, self.task, self.seq = job, job.job_id, seq
        self.arrival_s = job.arrival_s
        self.gpus, self.groups, self.gang = gpus, groups, gang
        self.status = WAITING
        self.enqueued_s = self.started_s = self.end_s = 0.0
        self.remaining_s = job.duration_s  # run time still needed, restart time included
        self.overhead_s = 0.0  # the part of remaining_s that is restart time
        self.work_s = job.duration_s  # remaining_s less overhead_s, kept apart (issue 35)
        self.factor = 1.0  # speed of the current run against duration_s (issue 35)
        self.run_from = 0.0  # when the current run's restart ends and the job runs
        self.gen = 0
        self.token = 0
        self.members: list[tuple[int, tuple[int, ...]]] = []
        self.prio: tuple[float, ...] = ()
        self.preds: set[str] = set()
        self.done_preds = 0
        self.level = 0
        self.executed_s = 0.0  # Tiresias: seconds run since the last promotion to Q0
        self.starve_s = 0.0  # Tiresias: seconds waited since then, after having run
        self.pend_since = -1.0


class _Queue:
    """What the Recorder's samples read of ``cell.queue``: its length."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0


class _CellView:
    """The parts of a ``Cell`` the ``Recorder`` and ``Simulator.active`` read."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.tasks: dict[str, _Rec] = {}
        self.queue = _Queue()
        self.on_node: dict[str, dict[str, None]] = {}


# ---- the simulator --------------------------------------------------------------------


class WholeGpuSim(Simulator):
    """Event-driven whole-GPU scheduler with preemption (see the module docstring).

    Subclasses give the waiting order (``_prio``), the running jobs a waiting
    job may preempt, lowest first (``_victims``), and hooks on start and stop.
    """

    def __init__(self, policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                 horizon_s: float | None = None, **kw: Any) -> None:
        super().__init__(policy, nodes, jobs, horizon_s, **kw)
        self.view = _CellView(self.cell.state)
        self.cell = self.view  # type: ignore[assignment]  # the recorder reads the view
        self.cluster = _Cluster(nodes)
        self.handlers.update({"arrive": cast(Handler, WholeGpuSim._on_arrive),
                              "finish": cast(Handler, WholeGpuSim._on_finish),
                              "tick": cast(Handler, WholeGpuSim._on_tick_noop),
                              "pass": cast(Handler, WholeGpuSim._on_pass)})
        self._buckets: dict[tuple[Any, ...], list[tuple[tuple[float, ...], int, int, _Rec]]] = {}
        self._dependents: dict[str, list[_Rec]] = {}
        self._pass_due = False
        self._seqno = 0
        self._tokens = 0
        self.preemptions = 0
        self._last_s = 0.0

    def run(self) -> Recorder:
        """As ``Simulator.run``; the run ends at its last arrival or end, not at a stale
        queue move left in the event heap."""
        rec = super().run()
        rec.close(self._last_s)
        return rec

    # ---- policy hooks --------------------------------------------------------------------

    def _prio(self, rec: _Rec) -> tuple[float, ...]:
        raise NotImplementedError

    def _bucket(self, rec: _Rec) -> tuple[Any, ...]:
        return (rec.gpus, rec.gang, rec.groups)

    def _victims(self, rec: _Rec) -> Iterator[_Rec]:
        raise NotImplementedError

    def _could_preempt(self, rec: _Rec, idle: int) -> bool:
        """A cheap necessary condition for ``_preempt_for`` (default: always try)."""
        return True

    def _started(self, rec: _Rec) -> None:
        """Hook: ``rec`` started running (running indexes updated by the subclass)."""

    def _stopped(self, rec: _Rec, preempted: bool) -> None:
        """Hook: ``rec`` stopped running (finished or preempted)."""

    # ---- events --------------------------------------------------------------------------

    def _on_tick_noop(self, t: float, _: Any) -> None:
        """No clock ticks: every decision follows an arrival, an end or a queue move."""

    def _on_arrive(self, t: float, job: Job) -> None:
        self._last_s = t
        self.recorder.arrived(t, job)
        req = job.request
        gpus = req.num_gpu if req.gpu_milli >= MILLI_PER_GPU else min(req.num_gpu, 1)
        groups = self.cluster.allowed(tuple(req.gpu_models))
        largest = max((g.cap for g in groups), default=0)
        rec = _Rec(job, self._seqno, gpus, groups, gpus > largest)
        self._seqno += 1
        self.view.tasks[rec.task] = rec
        if gpus and (not groups or max(g.cap * len(g.nodes) for g in groups) < gpus):
            rec.status = DONE
            why = (f"{gpus} whole GPUs of {'/'.join(req.gpu_models) or 'any model'}: "
                   "more than the cluster has")
            self._emit(Refused(Unschedulable(f"a/{rec.task}/0", f"a/{rec.task}", rec.task,
                                             Verdict("unschedulable_and_unresolvable", (why,),
                                                     self.policy.name), None), False))
            return
        pending = [p for p in job.meta.depends_on
                   if p not in self.view.tasks or self.view.tasks[p].status != DONE]
        if pending:
            rec.preds = set(pending)
            for p in pending:
                self._dependents.setdefault(p, []).append(rec)
            return
        self._enqueue(rec)
        if not self._pass_due:
            self._try_start(rec)

    def _on_finish(self, t: float, payload: tuple[str, int]) -> None:
        task, gen = payload
        rec = self.view.tasks[task]
        if rec.gen != gen or rec.status != RUNNING:
            return
        self._last_s = t
        self.recorder.finished(t, task)
        self._release(rec)
        self._unindex(rec)
        rec.status = DONE
        self._stopped(rec, False)
        for dep in self._dependents.pop(task, []):
            dep.preds.discard(task)
            if not dep.preds and dep.status == WAITING:
                self._enqueue(dep)
        self._request_pass()

    def _on_pass(self, t: float, _: Any) -> None:
        self._pass_due = False
        self._dispatch()

    def _request_pass(self) -> None:
        if not self._pass_due:
            self._pass_due = True
            self.push(self.now_s, "pass", None)

    # ---- queue ---------------------------------------------------------------------------

    def _enqueue(self, rec: _Rec) -> None:
        rec.status = PENDING
        rec.enqueued_s = self.now_s
        self._tokens += 1
        rec.token = self._tokens
        rec.prio = self._prio(rec)
        heapq.heappush(self._buckets.setdefault(self._bucket(rec), []),
                       (rec.prio, rec.seq, rec.token, rec))
        self.view.queue.n += 1

    def _requeue(self, rec: _Rec) -> None:
        """Re-file a waiting job whose order changed (the old entry goes stale); it has
        been waiting since it was queued, not since now."""
        since = rec.enqueued_s
        self.view.queue.n -= 1
        self._enqueue(rec)
        rec.enqueued_s = since

    def _head(self, bucket: tuple[Any, ...]) -> _Rec | None:
        heap = self._buckets.get(bucket)
        while heap:
            _, _, token, rec = heap[0]
            if rec.status == PENDING and rec.token == token:
                return rec
            heapq.heappop(heap)
        self._buckets.pop(bucket, None)
        return None

    def _dispatch(self) -> None:
        """One pass: waiting jobs in priority order, each placed or preempting, else skipped
        together with every later job of its shape (they cannot fit either)."""
        heads: list[tuple[tuple[float, ...], int, tuple[Any, ...]]] = []
        for b in list(self._buckets):
            rec = self._head(b)
            if rec is not None:
                heads.append((rec.prio, rec.seq, b))
        heapq.heapify(heads)
        while heads:
            _, _, b = heapq.heappop(heads)
            rec = self._head(b)
            if rec is None or not self._try_start(rec):
                continue
            nxt = self._head(b)
            if nxt is not None:
                heapq.heappush(heads, (nxt.prio, nxt.seq, b))

    def _try_start(self, rec: _Rec) -> bool:
        if self.now_s > self.horizon_s + self.max_drain_s:
            return False  # given up, as the cell's simulator does (``Simulator.active``)
        where = self.cluster.find(rec.gpus, rec.groups, rec.gang) if rec.gpus else []
        if where is not None:
            self._start(rec, [(n, self.cluster.take(n, k)) for n, k in where], None)
            return True
        idle = sum(g.idle for g in rec.groups)
        if not self._could_preempt(rec, idle):
            return False
        return self._preempt_for(rec, idle)

    def _preempt_for(self, rec: _Rec, idle: int) -> bool:
        """Stop running jobs below ``rec``, lowest first, until ``rec`` fits; keep those
        whose GPUs it does not take. Undo everything when it cannot fit."""
        allowed = {id(g) for g in rec.groups}
        group_of = self.cluster.group_of
        victims = (v for v in self._victims(rec)
                   if any(id(group_of[n]) in allowed for n, _ in v.members))
        released: list[_Rec] = []
        freed = idle
        for v in victims:  # by count first: nothing is touched unless enough could be freed
            released.append(v)
            freed += v.gpus
            if freed >= rec.gpus:
                break
        if freed < rec.gpus:
            return False
        for v in released:
            self._release(v)
        where = self.cluster.find(rec.gpus, rec.groups, rec.gang)
        if where is None:  # enough GPUs, not where they are needed: free more, one at a time
            for v in victims:
                self._release(v)
                released.append(v)
                where = self.cluster.find(rec.gpus, rec.groups, rec.gang)
                if where is not None:
                    break
        if where is None:
            for v in reversed(released):
                for n, ids in v.members:
                    ok = self.cluster.take_ids(n, ids)
                    assert ok
            return False
        members = [(n, self.cluster.take(n, k)) for n, k in where]
        stopped = []
        for v in reversed(released):
            if all(self._free_ids(n, ids) for n, ids in v.members):
                for n, ids in v.members:
                    self.cluster.take_ids(n, ids)
            else:
                stopped.append(v)
        for v in reversed(stopped):  # lowest priority first, as chosen
            self._preempt(v, rec)
        self._start(rec, members, None)
        return True

    def _free_ids(self, node: int, ids: tuple[int, ...]) -> bool:
        free = self.cluster.free[node]
        return all(i in free for i in ids)

    # ---- start / stop --------------------------------------------------------------------

    def _start(self, rec: _Rec, members: list[tuple[int, tuple[int, ...]]],
               cause: str | None) -> None:
        self._buckets_drop(rec)
        rec.status = RUNNING
        rec.members = members
        rec.started_s = self.now_s
        rec.factor = self._factor(rec, members)
        if rec.factor == 1.0:  # bit for bit as before speeds existed
            rec.end_s = self.now_s + rec.remaining_s
        else:  # work_s, not remaining_s - overhead_s: that difference loses digits
            rec.end_s = self.now_s + rec.overhead_s + rec.work_s / rec.factor
        rec.run_from = self.now_s + rec.overhead_s
        rec.gen += 1
        self.push(rec.end_s, "finish", (rec.task, rec.gen))
        names = self.cluster.names
        for n, _ in members:
            self.view.on_node.setdefault(names[n], {})[rec.task] = None
        req = rec.job.request
        if not members:  # CPU-only: runs at once on the first node, holds no GPU
            node, share = names[0], 0
            gpus: tuple[int, ...] = ()
            gang: tuple[tuple[str, tuple[int, ...]], ...] = ()
        else:
            node, share = names[members[0][0]], MILLI_PER_GPU
            gpus = members[0][1]
            gang = tuple((names[n], ids) for n, ids in members) if len(members) > 1 else ()
        self._started(rec)
        self._emit(Placement(f"p/{rec.task}/{rec.gen}", cause or f"p/{rec.task}", rec.task,
                             node, gpus, share, req.cpu_milli, req.memory_mib, False, None,
                             gang))

    def _factor(self, rec: _Rec, members: list[tuple[int, tuple[int, ...]]]) -> float:
        """The job's true speed on its GPUs' model against its ``duration_s`` (issue 35:
        its ``speeds``); 1 without speeds. ``remaining_s`` is in seconds at ``duration_s``'s
        speed, so a run on a model twice as fast takes half of it."""
        if rec.job.speeds is None or not members:
            return 1.0
        group = self.cluster.group_of[members[0][0]]
        assert group is not None
        return self._model_factor(rec, group.model)

    @staticmethod
    def _model_factor(rec: _Rec, model: str) -> float:
        """``_factor`` of a run of ``rec`` on ``model`` (its ``speeds`` are set)."""
        speeds = rec.job.speeds
        assert speeds is not None
        if not speeds.runs_on(model):  # gpu_models keep the job off such models
            raise AssertionError(f"{rec.task} placed on {model}, where its row gives "
                                 "no run time")
        return rec.job.duration_s * speeds.rate(model)

    def _true_left_s(self, rec: _Rec, model: str) -> float:
        """Wall-clock seconds ``rec`` still needs on a run on ``model`` (restart due
        included): ``remaining_s`` without speeds (or at speed 1), the work left at the
        model's true speed else (issue 35). What an oracle compares, in the units of the
        running jobs' ``end_s``."""
        if rec.job.speeds is None:
            return rec.remaining_s
        factor = self._model_factor(rec, model)
        if factor == 1.0:
            return rec.remaining_s
        return rec.overhead_s + rec.work_s / factor

    def _best_left_s(self, rec: _Rec) -> float:
        """``_true_left_s`` on the fastest model ``rec`` may run on: the least it can still
        take (``remaining_s`` for a job without speeds)."""
        if rec.job.speeds is None or not rec.groups:
            return rec.remaining_s
        return min(self._true_left_s(rec, g.model) for g in rec.groups)

    def _buckets_drop(self, rec: _Rec) -> None:
        """``rec`` leaves the waiting jobs (its heap entry goes stale)."""
        self.view.queue.n -= 1
        rec.token = 0

    def _release(self, rec: _Rec) -> None:
        for n, ids in rec.members:
            self.cluster.give(n, ids)

    def _unindex(self, rec: _Rec) -> None:
        names = self.cluster.names
        for n, _ in rec.members:
            self.view.on_node[names[n]].pop(rec.task, None)
        rec.members = []

    def _preempt(self, victim: _Rec, by: _Rec) -> None:
        """``victim``'s GPUs are already released: requeue it with its progress."""
        node = self.cluster.names[victim.members[0][0]]
        self._unindex(victim)
        victim.gen += 1
        left = max(victim.end_s - self.now_s, 0.0)
        restart = job_restart_s(victim.job)
        overhead = max(victim.run_from - self.now_s, 0.0)
        work_left = left  # as before speeds existed: the restart still due counts as work
        if victim.factor != 1.0:  # the work left, in seconds at duration_s's speed
            ran = max(self.now_s - victim.run_from, 0.0)
            work_left = max(victim.work_s - ran * victim.factor, 0.0)
            left = overhead + work_left
            victim.work_s = work_left
        else:
            victim.work_s = max(left - overhead, 0.0)
        victim.overhead_s = overhead + restart
        victim.remaining_s = left + restart
        victim.status = PENDING  # for the hook; _enqueue sets it again
        self._stopped(victim, True)
        self._enqueue(victim)
        self.preemptions += 1
        self._request_pass()  # GPUs of the victim the preemptor did not take are free now
        self._emit(Preempted(victim.task, node, by.task,
                             max(victim.job.duration_s - work_left, 0.0)))

    def _emit(self, o: Any) -> None:
        self.recorder.outcome(self.now_s, o)
        for obs in self.observers:
            obs(self, self.now_s, o)


class TiresiasSim(WholeGpuSim):
    """Discretized 2D-LAS (see the module docstring)."""

    def __init__(self, policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                 horizon_s: float | None = None, **kw: Any) -> None:
        super().__init__(policy, nodes, jobs, horizon_s, **kw)
        self.thresholds: tuple[float, ...] = getattr(policy, "thresholds_gpu_s",
                                                     TIRESIAS_THRESHOLDS_GPU_S)
        self.knob: float = getattr(policy, "promote_knob", PROMOTE_KNOB)
        levels = len(self.thresholds) + 1
        self.running: list[list[tuple[float, int, _Rec]]] = [[] for _ in range(levels)]
        self.running_gpus = [0] * levels
        self.promotions = 0
        self.handlers.update({"demote": cast(Handler, TiresiasSim._on_demote),
                              "promote": cast(Handler, TiresiasSim._on_promote)})

    def _prio(self, rec: _Rec) -> tuple[float, ...]:
        return (rec.level, rec.arrival_s)

    def _bucket(self, rec: _Rec) -> tuple[Any, ...]:
        return (rec.level, rec.gpus, rec.gang, rec.groups)

    def _could_preempt(self, rec: _Rec, idle: int) -> bool:
        return idle + sum(self.running_gpus[rec.level + 1:]) >= rec.gpus

    def _victims(self, rec: _Rec) -> Iterator[_Rec]:
        for level in range(len(self.running) - 1, rec.level, -1):
            for _, _, v in reversed(self.running[level]):
                yield v

    def _index(self, rec: _Rec) -> None:
        bisect.insort(self.running[rec.level], (rec.arrival_s, rec.seq, rec))
        self.running_gpus[rec.level] += rec.gpus

    def _drop(self, rec: _Rec) -> None:
        lst = self.running[rec.level]
        lst.pop(bisect.bisect_left(lst, (rec.arrival_s, rec.seq), key=lambda e: e[:2]))
        self.running_gpus[rec.level] -= rec.gpus

    def _started(self, rec: _Rec) -> None:
        if rec.pend_since >= 0 and rec.executed_s > 0:
            rec.starve_s += self.now_s - rec.pend_since
        rec.pend_since = -1.0
        self._index(rec)
        self._schedule_demotion(rec)

    def _schedule_demotion(self, rec: _Rec) -> None:
        if rec.level < len(self.thresholds) and rec.gpus:
            left = self.thresholds[rec.level] / rec.gpus - rec.executed_s
            at = max(self.now_s, rec.run_from) + max(left, 0.0)
            self.push(at, "demote", (rec.task, rec.gen, rec.level))

    def _stopped(self, rec: _Rec, preempted: bool) -> None:
        self._drop(rec)
        rec.executed_s += max(self.now_s - max(rec.started_s, rec.run_from), 0.0)
        if not preempted:
            return
        rec.pend_since = self.now_s
        if self.knob > 0 and rec.level > 0 and rec.executed_s > 0:
            due = rec.executed_s * self.knob - rec.starve_s
            self.push(self.now_s + max(due, 0.0), "promote", (rec.task, rec.gen))

    def _on_demote(self, t: float, payload: tuple[str, int, int]) -> None:
        task, gen, level = payload
        rec = self.view.tasks[task]
        if rec.status != RUNNING or rec.gen != gen or rec.level != level:
            return
        self._drop(rec)
        rec.executed_s += t - max(rec.started_s, rec.run_from)  # up to now, keep running
        rec.started_s = t
        rec.level += 1
        self._index(rec)
        self._schedule_demotion(rec)
        self._request_pass()

    def _on_promote(self, t: float, payload: tuple[str, int]) -> None:
        task, gen = payload
        rec = self.view.tasks[task]
        if rec.status != PENDING or rec.gen != gen or rec.level == 0:
            return
        rec.level, rec.executed_s, rec.starve_s = 0, 0.0, 0.0
        self.promotions += 1
        self._requeue(rec)
        if not self._pass_due:
            self._try_start(rec)


class SrtfSim(WholeGpuSim):
    """Preemptive shortest-remaining-time-first on true durations (a reference bound)."""

    def __init__(self, policy: SimPolicy, nodes: Sequence[NodeSpec], jobs: Sequence[Job],
                 horizon_s: float | None = None, **kw: Any) -> None:
        super().__init__(policy, nodes, jobs, horizon_s, **kw)
        self.running: list[tuple[float, int, _Rec]] = []  # by projected end

    def _prio(self, rec: _Rec) -> tuple[float, ...]:
        return (self._best_left_s(rec), rec.arrival_s)

    def _victims(self, rec: _Rec) -> Iterator[_Rec]:
        """Running jobs that end later than ``rec`` would on their GPUs, latest first.

        Both sides in wall-clock seconds on the victim's model (issue 35: with speeds,
        ``remaining_s`` is in ``duration_s``'s seconds, and comparing it with ``end_s``
        made two jobs preempt each other forever at one instant). ``rec`` then ends
        before the victim would have, so the victim, requeued with a restart to pay,
        cannot preempt it back."""
        limit = self.now_s + self._best_left_s(rec)
        speeds = rec.job.speeds is not None
        group_of = self.cluster.group_of
        for end, _, v in reversed(self.running):
            if end <= limit:
                return
            if speeds and v.members:
                group = group_of[v.members[0][0]]
                if (group is not None and any(g is group for g in rec.groups)
                        and end <= self.now_s + self._true_left_s(rec, group.model)):
                    continue  # rec would run slower there than the victim has left
            yield v

    def _could_preempt(self, rec: _Rec, idle: int) -> bool:
        return (bool(self.running)
                and self.running[-1][0] > self.now_s + self._best_left_s(rec))

    def _started(self, rec: _Rec) -> None:
        bisect.insort(self.running, (rec.end_s, rec.seq, rec))

    def _stopped(self, rec: _Rec, preempted: bool) -> None:
        i = bisect.bisect_left(self.running, (rec.end_s, rec.seq), key=lambda e: e[:2])
        self.running.pop(i)
