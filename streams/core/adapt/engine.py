"""Adaptation glue: the one module that applies the adapt policies to a ``Cell``.

Entry points (the adapter calls them with the input's event time ``now_s``):

* ``prepare_submit`` before ``Cell.submit``: probe or not, task facts in ``spec``;
* ``on_heartbeat``, ``on_node_down``, ``on_draining``, ``on_registered``,
  ``on_gpu_failed``, ``on_telemetry``, ``on_usage``, ``on_task_end``;
* ``on_tick``: heartbeat timeouts, queue retry, probe ends, elastic resizing,
  migration off draining, throttled and hot nodes (in that order);
* ``finish`` on every outcome list: stamps placement time, turns probe
  placements into ``Probed``.

Task facts live in ``spec["adapt"]`` and node facts in the node record's
``extra["adapt"]``, so they are persisted with the records the cell already
saves and ``restore.after_restore`` rebuilds what the numpy state needs (failed GPUs,
phantom bookings). Iteration follows task and node insertion order (the log's
order) and nothing reads a clock: replay reproduces every outcome.
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from streams.core.adapt import (
    elastic,
    membership,
    migration,
    probe,
    reconcile,
    speed,
    thermal,
)
from streams.core.adapt.energy import HOST_IDLE_W, IDLE_SHARE, perf_per_watt
from streams.core.adapt.outcomes import Evicted, Migrated, Probed, Resized
from streams.core.decisions import Placement
from streams.core.events import NodeHealthChanged, TaskEnded
from streams.core.preemption import empty_fit_mask, fits_after
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import place

if TYPE_CHECKING:
    from collections.abc import Sequence

    from streams.core.cell import Cell, Outcome, TaskRecord
    from streams.core.scheduler import Scheduler

RUNNING, QUEUED, DONE = "running", "queued", "done"  # streams.core.cell's statuses
RETRYABLE_FAILURES = frozenset({"gpu_failed", "node_failed", "lost"})
"""Executor-reported failures that are the node's fault, not the task's: re-queue."""


# ---- records ----------------------------------------------------------------------------

def _node(cell: Cell, node: str) -> dict[str, Any] | None:
    rec = cell.nodes.get(node)
    if rec is None:
        return None
    if not isinstance(rec.extra, dict):
        rec.extra = {}
    ns: dict[str, Any] = rec.extra.setdefault("adapt", {})
    return ns


def _task(rec: TaskRecord) -> dict[str, Any]:
    if not isinstance(rec.spec, dict):
        return {}
    facts: dict[str, Any] = rec.spec.setdefault("adapt", {})
    return facts


def _running_on(cell: Cell, node: str) -> list[TaskRecord]:
    out = [cell.tasks[t] for t in cell.on_node.get(node, {})]
    return sorted((r for r in out if r.status == RUNNING), key=lambda r: r.place_seq)


def _refresh_health(cell: Cell, node: str, cause: str) -> list[Outcome]:
    ns = _node(cell, node)
    if ns is None:
        return []
    want = not (ns.get("lost") or ns.get("drain") or ns.get("down") or ns.get("hot"))
    cell.dirty_nodes.add(node)
    return cell.set_health(NodeHealthChanged(cause, node, want))


def _evacuate(cell: Cell, node: str, cause: str, code: str, message: str,
              gpus: set[int] | None = None) -> list[Outcome]:
    """Re-queue the tasks on ``node`` (on ``gpus`` only, if given); tell the node to stop them."""
    victims = [r for r in _running_on(cell, node) if gpus is None or gpus & set(r.gpus)]
    out: list[Outcome] = [Evicted(r.task, node, code, message, True) for r in victims]
    for r in victims:
        _forget_run(r)
        cell.requeue(r.task, cause)
        cell.adapt.count("requeued")
    return out


# ---- submissions ------------------------------------------------------------------------

def prepare_submit(cell: Cell, req: TaskRequest, facts: dict[str, Any]) -> TaskRequest:
    """The request to place first: a small probe when the task's kind is unknown."""
    cfg = cell.adapt.config
    learnt = _learnt(cell, facts.get("cmd", ""))
    if facts.get("kind") is None and learnt is not None and learnt.kind is not None:
        facts["kind"] = learnt.kind
        facts["class"] = "learnt"
        cell.adapt.count("probe_skipped_learnt")
    if facts.get("kind") is not None or req.num_gpu == 0 or cfg.probe_s <= 0:
        return req
    if cell.is_gang(req):
        return req  # a gang runs whole or not at all: never on a one-GPU probe
    facts["probe"] = {"full": [req.num_gpu, req.gpu_milli], "s": None}
    if 0 < cfg.probe_in_place_gpus <= req.num_gpu:
        return req  # probed on its full request: classified in place, no second placement
    share = min(cfg.probe_share_milli, req.gpu_milli)
    return replace(req, num_gpu=1, gpu_milli=share)


def finish(cell: Cell, outcomes: list[Outcome], now_s: float) -> list[Outcome]:
    """Stamp placement times; a placement of a probing task becomes ``Probed``."""
    out: list[Outcome] = []
    for o in outcomes:
        if isinstance(o, Placement):
            rec = cell.tasks[o.task]
            facts = _task(rec)
            facts["placed_s"] = now_s
            pr = facts.get("probe")
            if pr is not None:
                pr["s"] = now_s + cell.adapt.config.probe_s
                cell.adapt.count("probes")
                o = Probed(o, cell.adapt.config.probe_s)
        out.append(o)
    return out


# ---- membership -------------------------------------------------------------------------

def on_registered(cell: Cell, node: str, now_s: float, by_agent: bool) -> None:
    """After ``Cell.add_node``: a node registered by an agent is tracked for liveness
    from now (it may die before its first heartbeat); a re-registration is a fresh
    inventory, so failure and thermal marks are forgotten, and the capacity that failed
    GPUs and phantom bookings kept out is given back (what ``restore.after_restore`` leaves a
    cell rebuilt from the records, which no longer carry them)."""
    ns = _node(cell, node)
    if ns is None:
        return
    _give_back_marks(cell, node, ns)
    for key in ("lost", "drain", "down", "hot", "bad", "phantom"):
        ns.pop(key, None)
    if by_agent:
        ns["seen"] = now_s
    cell.dirty_nodes.add(node)


def _give_back_marks(cell: Cell, node: str, ns: dict[str, Any]) -> None:
    """Undo what ``on_gpu_failed`` and ``_set_phantom`` took from ``node``'s GPUs."""
    bad, phantom = ns.get("bad"), ns.get("phantom")
    if not bad and not phantom:
        return
    state = cell.state
    i = state.node_index[node]
    for g in bad or ():
        # A failed GPU was emptied and set to 0; its share is whatever is booked there now.
        booked = sum(int(state.t_share[slot]) for slot in state.task_slot.values()
                     if state.t_node[slot] == i and g in state.t_gpus[slot])
        state.gpu_free[i, g] = MILLI_PER_GPU - booked
    for g, milli in (phantom or {}).items():
        if not bad or int(g) not in bad:  # a failed GPU's phantom was dropped when it failed
            state.gpu_free[i, int(g)] += int(milli)
    state._touch(i)


def on_heartbeat(cell: Cell, cause: str, node: str, now_s: float,
                 running: list[str]) -> list[Outcome]:
    """Liveness; a node coming back is reconciled with the tasks its executor runs."""
    ns = _node(cell, node)
    if ns is None:
        return []
    ns["seen"] = now_s
    cell.dirty_nodes.add(node)
    if not ns.get("lost"):
        return []
    ns["lost"] = False
    cell.adapt.count("nodes_returned")
    out: list[Outcome] = []
    for task in sorted(running):
        rec = cell.tasks.get(task)
        if rec is None or rec.status != RUNNING or rec.node != node:
            out.append(Evicted(task, node, "reconcile",
                               "the node came back running a task scheduled elsewhere", False))
    return out + _refresh_health(cell, node, cause)


def on_node_down(cell: Cell, cause: str, node: str, code: str) -> list[Outcome]:
    """The node failed or left: no new work, its tasks re-queued and placed again."""
    ns = _node(cell, node)
    if ns is None or ns.get("down"):
        return []
    ns["down"] = True
    out = _evacuate(cell, node, cause, code, f"node {node} is gone ({code})")
    return out + _refresh_health(cell, node, cause) + cell._drain(cause)


def on_draining(cell: Cell, cause: str, node: str, now_s: float) -> list[Outcome]:
    ns = _node(cell, node)
    if ns is None or ns.get("drain"):
        return []
    ns["drain"] = True
    return _refresh_health(cell, node, cause) + _move_off(cell, node, cause, now_s, True)


def on_gpu_failed(cell: Cell, cause: str, node: str, gpu: int, why: str) -> list[Outcome]:
    """Take one GPU out: its tasks re-queued, its capacity never offered again."""
    ns = _node(cell, node)
    if ns is None:
        return []
    i = cell.state.node_index[node]
    bad: list[int] = ns.setdefault("bad", [])
    if gpu in bad or gpu >= int(cell.state.gpu_count[i]):
        return []
    out = _evacuate(cell, node, cause, "gpu_failed", f"GPU {gpu} of {node}: {why}", {gpu})
    _set_phantom(cell, node, gpu, 0)
    bad.append(gpu)
    bad.sort()
    cell.state.gpu_free[i, gpu] = 0
    cell.state._touch(i)
    cell.dirty_nodes.add(node)
    cell.adapt.count("gpus_failed")
    return out + cell._drain(cause)


# ---- telemetry --------------------------------------------------------------------------

def on_telemetry(cell: Cell, cause: str, node: str, gpu: int, now_s: float, *,
                 temperature_c: float, throttle: Sequence[str], mem_used_mib: int,
                 mem_util_pct: float | None, xids: Sequence[int], ecc_dbe: int,
                 foreign_mem_mib: int | None = None) -> list[Outcome]:
    """Failures (fatal XID, ECC), thermal headroom and unaccounted or foreign GPU memory
    of one GPU (``foreign_mem_mib``: held by processes of no task, as the node saw it).

    Most samples change nothing the core acts on (same temperature side of the band, no
    new error, memory as booked), and telemetry is most of the input log (issue 11): each
    step is checked before it is taken, and the node is marked dirty (its record written
    again) only when its record changed. ``tests/adapt/test_telemetry_step.py`` pins
    outcomes, records and free capacity against the straightforward version."""
    rec = cell.nodes.get(node)
    if rec is None:
        return []
    changed = not isinstance(rec.extra, dict) or "adapt" not in rec.extra
    ns = _node(cell, node)
    assert ns is not None
    state = cell.state
    i = state.node_index[node]
    if gpu >= int(state.gpu_count[i]):
        return []
    g = str(gpu)
    dbe: dict[str, int] | None = ns.get("dbe")
    if dbe is None:
        dbe = ns.setdefault("dbe", {})
        changed = True
    known = dbe.get(g, _ABSENT)
    fatal = membership.fatal_gpu_signal(xids, ecc_dbe, ecc_dbe if known is _ABSENT else known) \
        if xids or (known is not _ABSENT and ecc_dbe > known) else None
    dbe[g] = ecc_dbe
    changed = changed or not _same(known, ecc_dbe)
    if mem_util_pct is not None:
        bw: dict[str, float] | None = ns.get("bw")
        if bw is None:
            bw = ns.setdefault("bw", {})
            changed = True
        changed = changed or not _same(bw.get(g, _ABSENT), mem_util_pct)
        bw[g] = mem_util_pct
    if fatal is not None:
        cell.dirty_nodes.add(node)
        return on_gpu_failed(cell, cause, node, gpu, fatal)
    model = int(state.model[i])
    spec = state.catalog.get(state.model_names[model]) if model >= 0 else None
    if spec is None:
        if changed:
            cell.dirty_nodes.add(node)
        return []
    out: list[Outcome] = []
    margin = cell.adapt.config.thermal_margin_c
    hot: list[int] | None = ns.get("hot")
    if thermal.is_hot(temperature_c, throttle, spec.throttle_temp_c, margin):
        if hot is None:
            hot = ns.setdefault("hot", [])
        if gpu not in hot:
            hot.append(gpu)
            hot.sort()
            cell.adapt.count("thermal_alerts")
            changed = True
    elif hot is not None and gpu in hot and thermal.is_cool(
            temperature_c, throttle, spec.throttle_temp_c, margin):
        hot.remove(gpu)
        changed = True
    if hot is not None and not hot:
        ns.pop("hot")
        changed = True
    if rec.healthy != (not (ns.get("lost") or ns.get("drain") or ns.get("down")
                            or ns.get("hot"))):
        out += _refresh_health(cell, node, cause)
    cfg = cell.adapt.config
    milli = reconcile.share_of(reconcile.to_reserve(reconcile.unaccounted_mib(
        mem_used_mib, _booked_on(cell, node, gpu, spec.memory_mib), cfg.overuse_tolerance,
        reconcile.driver_reserve_mib(spec.memory_mib, cfg.gpu_reserved_pct)),
        foreign_mem_mib), spec.memory_mib)
    phantom: dict[str, int] | None = ns.get("phantom")
    if phantom is None:
        phantom = ns.setdefault("phantom", {})
        changed = True
    if milli != phantom.get(g, 0) or state.gpu_free[i, gpu] < 0:
        _set_phantom(cell, node, gpu, milli)
    if changed:
        cell.dirty_nodes.add(node)
    return out


_ABSENT: Any = object()


def _same(old: Any, new: Any) -> bool:
    """``new`` would be stored as ``old`` is (so the record does not change)."""
    return type(old) is type(new) and old == new


def _booked_on(cell: Cell, node: str, gpu: int, gpu_mem_mib: int) -> float:
    """Memory the running tasks on ``gpu`` of ``node`` booked, summed in placement order
    (the order ``_running_on`` gives, so the float sum is the same)."""
    on = cell.on_node.get(node)
    if not on:
        return 0
    tasks = cell.tasks
    recs = [r for t in on if (r := tasks[t]).status == RUNNING and gpu in r.gpus]
    if not recs:
        return 0
    if len(recs) > 1:
        recs.sort(key=_PLACE_SEQ)
    # ``_booked_mib`` inlined (the same expressions, so the same floats); ``sum`` kept.
    mib: list[float] = []
    for r in recs:
        spec = r.spec
        if isinstance(spec, dict):
            facts = spec.get("adapt")
            if facts is None:
                facts = spec.setdefault("adapt", {})  # as ``_task`` does
            declared = facts.get("gpu_mem")
            if declared:
                mib.append(float(declared))
                continue
        mib.append(gpu_mem_mib * r.request.gpu_milli / MILLI_PER_GPU)
    return sum(mib)


_PLACE_SEQ = attrgetter("place_seq")


def _booked_mib(cell: Cell, rec: TaskRecord, gpu_mem_mib: int) -> float:
    declared = _task(rec).get("gpu_mem")
    if declared:
        return float(declared)
    return gpu_mem_mib * rec.request.gpu_milli / MILLI_PER_GPU


def _set_phantom(cell: Cell, node: str, gpu: int, milli: int) -> None:
    """Reserve ``milli`` of ``gpu`` for memory no booking explains (never below 0 free)."""
    ns = _node(cell, node)
    assert ns is not None
    i = cell.state.node_index[node]
    phantom: dict[str, int] = ns.setdefault("phantom", {})
    old = phantom.get(str(gpu), 0)
    new = min(milli, int(cell.state.gpu_free[i, gpu]) + old)
    if new == old:
        return
    cell.state.gpu_free[i, gpu] += old - new
    cell.state._touch(i)
    if new:
        phantom[str(gpu)] = new
        cell.adapt.count("phantom_reservations")
    else:
        phantom.pop(str(gpu), None)
    cell.dirty_nodes.add(node)


def on_usage(cell: Cell, cause: str, task: str, node: str, now_s: float,
             gpus: list[tuple[int, float, int]]) -> list[Outcome]:
    """A task's observed use: feeds its windows; an over-use is handled by policy."""
    rec = cell.tasks.get(task)
    if rec is None or rec.status != RUNNING or rec.node != node or not gpus:
        return []
    ns = _node(cell, node) or {}
    w = cell.adapt.task_windows(task)
    util = sum(g[1] for g in gpus) / len(gpus)
    bw = [float(ns.get("bw", {}).get(str(g[0]), 0.0)) for g in gpus]
    mem = max(g[2] for g in gpus)
    w.util.add(now_s, util)
    w.mem_util.add(now_s, sum(bw) / len(bw))
    w.mem_mib.add(now_s, float(mem))
    i = cell.state.node_index[node]
    if cell.state.model[i] < 0:
        return []
    spec = cell.state.catalog.get(cell.state.model_names[int(cell.state.model[i])])
    if spec is None or _task(rec).get("probe") is not None:
        return []
    cfg = cell.adapt.config
    excess = reconcile.overuse_mib(mem, _booked_mib(cell, rec, spec.memory_mib),
                                   cfg.overuse_tolerance)
    if not excess:
        return []
    cell.adapt.count("overuse")
    if cfg.overuse_policy == "stop":
        _forget_run(rec)
        return cell.end(TaskEnded(cause, task, cancelled=True),
                        f"overuse: {mem} MiB of GPU memory, above its booking", now_s)
    need = reconcile.share_of(mem, spec.memory_mib)
    if cfg.overuse_policy == "rebook" and rec.request.fractional:
        g = rec.gpus[0]
        grow = need - rec.request.gpu_milli
        if 0 < grow <= int(cell.state.gpu_free[i, g]):
            _rebind(cell, rec, i, rec.gpus, replace(rec.request, gpu_milli=need))
            cell.adapt.count("rebooked")
        return []
    if cfg.overuse_policy == "move" and rec.request.fractional:
        bigger = replace(rec.request, gpu_milli=need)
        return _move(cell, rec, cause, now_s, "overuse", forced=True, request=bigger)
    return []  # warn: counted above and visible in the cell's counters


def on_run_lost(cell: Cell, cause: str, task: str, why: str, now_s: float) -> list[Outcome]:
    """The executor lost the run to its GPU or node: queue the task again, not fail it."""
    rec = cell.tasks.get(task)
    if rec is None or rec.status != RUNNING:
        return []
    _forget_run(rec)
    cell.requeue(task, cause)
    cell.adapt.count("requeued")
    return cell._drain(cause)


def on_task_end(cell: Cell, task: str, runtime_s: float | None) -> None:
    """A finished run teaches its (tenant, command) the duration."""
    rec = cell.tasks.get(task)
    cell.adapt.windows.pop(task, None)
    if rec is None or runtime_s is None:
        return
    cmd = _task(rec).get("cmd")
    if cmd:
        learnt = _learnt(cell, cmd) or probe.Learnt()
        learnt.learn_duration(runtime_s)
        _save_learnt(cell, cmd, learnt)


def _forget_run(rec: TaskRecord) -> None:
    """The current run is being stopped by us: its later reports are stale."""
    if isinstance(rec.spec, dict) and rec.spec.get("run"):
        stale: list[str] = rec.spec.setdefault("stale_runs", [])
        stale.append(rec.spec.pop("run"))
        del stale[:-4]  # a few are enough: reports arrive soon after the stop


def on_preempted(rec: TaskRecord, decision_id: str) -> None:
    """A preemption (``decision_id``) stopped the task's run: that run's later reports
    are stale, and the executor's ``TaskFailed(killed)`` answering the preemption
    (under ``decision_id``) only confirms the stop (``is_kill_report``)."""
    _forget_run(rec)
    if isinstance(rec.spec, dict):
        kills: list[str] = rec.spec.setdefault("kills", [])
        kills.append(decision_id)
        del kills[:-4]


def is_kill_report(cell: Cell, task: str, decision_id: str | None) -> bool:
    """The executor's report that it stopped the run a preemption named."""
    rec = cell.tasks.get(task)
    return (rec is not None and decision_id is not None and isinstance(rec.spec, dict)
            and decision_id in rec.spec.get("kills", ()))


def is_stale(cell: Cell, task: str, decision_id: str | None) -> bool:
    """A status report about a run the cell already stopped or replaced (moved, re-placed)."""
    rec = cell.tasks.get(task)
    if rec is None or decision_id is None or not isinstance(rec.spec, dict):
        return False
    if decision_id in rec.spec.get("stale_runs", ()):
        return True
    run = rec.spec.get("run")
    return run is not None and run != decision_id


# ---- ticks ------------------------------------------------------------------------------

def on_tick(cell: Cell, cause: str, seq: int, now_s: float) -> list[Outcome]:
    """Periodic work, in a fixed order (see the module docstring)."""
    if seq <= cell.tick_seq:
        return []
    cfg = cell.adapt.config
    out: list[Outcome] = []
    seen = {n: float(ns["seen"]) for n in cell.nodes
            if (ns := _node(cell, n)) is not None and ns.get("seen") is not None}
    lost = [n for n in seen if (_node(cell, n) or {}).get("lost")]
    for node in membership.expired(seen, lost, now_s, cfg.heartbeat_timeout_s):
        ns = _node(cell, node)
        assert ns is not None
        ns["lost"] = True
        cell.adapt.count("nodes_lost")
        out += _evacuate(cell, node, cause, "heartbeat_timeout",
                         f"no heartbeat from {node} for {now_s - seen[node]:.1f}s")
        out += _refresh_health(cell, node, cause)
    out += cell.tick(cause, seq, now_s)
    out += _probe_ends(cell, cause, now_s)
    resized = _elastic(cell, cause, now_s)
    out += resized
    if any(isinstance(r, Resized) and r.direction == "down" for r in resized):
        out += cell._drain(cause)  # a shrink frees GPUs for the tasks that wait
    for node in list(cell.nodes):
        ns = _node(cell, node) or {}
        if ns.get("drain") and not ns.get("down"):
            out += _move_off(cell, node, cause, now_s, True)
        elif ns.get("hot") and not ns.get("down") and not ns.get("lost"):
            out += _move_off(cell, node, cause, now_s, False)
    out += _hot_spots(cell, cause, now_s)
    if cfg.consolidate_pct > 0:
        out += _consolidate(cell, cause, now_s)
    if cfg.defrag and cell.queue:
        moved = _defrag(cell, cause, now_s)
        out += moved
        if moved:
            out += cell._drain(cause)  # the freed GPUs go to the task they were freed for
    return finish(cell, out, now_s)


def _unfinished(cell: Cell) -> list[TaskRecord]:
    """The cell's tasks in submission order, less the finished ones, for a tick's scans.

    A finished task (``DONE``) never runs again (a repeated submission is rejected),
    so the scans below, which pass over anything not running, pass over it too.
    ``Cell.unfinished`` holds exactly these, so a tick costs what the tasks that can
    still matter cost, not every task the cell ever saw (a list: the scans change it).
    """
    return list(cell.unfinished.values())


def _probe_ends(cell: Cell, cause: str, now_s: float) -> list[Outcome]:
    cfg = cell.adapt.config
    out: list[Outcome] = []
    for rec in _unfinished(cell):
        facts = _task(rec) if rec.status == RUNNING else {}
        pr = facts.get("probe")
        if pr is None or pr.get("s") is None or pr["s"] > now_s:
            continue
        w = cell.adapt.task_windows(rec.task)
        if "class" not in facts:
            dur = facts.get("dur")
            learnt = _learnt(cell, facts.get("cmd", ""))
            if dur is None and learnt is not None:
                dur = learnt.duration_s
            c = probe.classify(w.util.values(now_s, cfg.probe_s),
                               w.mem_util.values(now_s, cfg.probe_s),
                               w.mem_mib.values(now_s, cfg.probe_s), dur, cfg)
            facts["kind"], facts["class"] = c.kind, c.label
            facts["class_metrics"] = {"gpu_util_pct": c.util_pct, "mem_util_pct": c.mem_util_pct,
                                      "gpu_mem_mib": c.mem_mib}
            cmd = facts.get("cmd")
            if cmd:
                learnt = learnt or probe.Learnt()
                learnt.kind, learnt.bursty = c.kind, c.bursty
                _save_learnt(cell, cmd, learnt)
            cell.adapt.count(f"classified_{c.kind}")
        num_gpu, milli = pr["full"]
        full = replace(rec.request, num_gpu=num_gpu, gpu_milli=milli)
        if full.key == rec.request.key:
            del facts["probe"]
            cell.dirty_tasks.add(rec.task)
            continue
        moved = _move(cell, rec, cause, now_s, "probe_classified", forced=True, request=full,
                      kind=facts["kind"], message=str(facts["class"]),
                      metrics=facts.get("class_metrics", {}))
        if moved:
            del facts["probe"]
        out += moved
        cell.dirty_tasks.add(rec.task)
    return out


def _elastic(cell: Cell, cause: str, now_s: float) -> list[Outcome]:
    s = cell.state
    out: list[Outcome] = []
    headroom = cell.adapt.config.elastic_headroom_nodes
    keep_slots = cell.adapt.config.elastic_keep_slots
    idle_by_model: dict[int, int] = {}
    if headroom > 0:  # wholly idle healthy nodes per GPU model (growth competes within one)
        n = s.n
        idle = ((s.gpu_free[:n] == MILLI_PER_GPU).sum(axis=1) == s.gpu_count[:n])
        idle &= s.healthy[:n] & (s.gpu_count[:n] > 0)
        for i in np.flatnonzero(idle).tolist():
            idle_by_model[int(s.model[i])] = idle_by_model.get(int(s.model[i]), 0) + 1
    for rec in _unfinished(cell):
        if rec.status != RUNNING or rec.node is None or rec.members:
            continue  # a gang keeps its shape
        facts = _task(rec)
        bounds = facts.get("elastic")
        if not bounds or facts.get("probe") is not None or rec.request.gpu_milli < MILLI_PER_GPU:
            continue
        i = s.node_index[rec.node]
        count = int(s.gpu_count[i])
        may_grow = headroom <= 0 or idle_by_model.get(int(s.model[i]), 0) >= headroom
        free = [g for g in range(count) if s.gpu_free[i, g] == MILLI_PER_GPU] if (
            s.healthy[i] and may_grow) else []
        if keep_slots and not elastic.keeps_slots(len(free)):
            free = []  # every free GPU here completes a pair or quad an arrival may want
        if "base_gpus" not in facts:  # what it asked for, before any resize; persisted
            facts["base_gpus"] = len(rec.gpus)
            cell.dirty_tasks.add(rec.task)
        base = int(facts["base_gpus"])
        needed = True
        if keep_slots and cell.queue and len(rec.gpus) > base:
            needed = _queued_fits(cell, i, len(rec.gpus) - base, now_s)
        view = elastic.ElasticView(len(rec.gpus), bounds[0], bounds[1], facts.get("resized_s"),
                                   len(free), bool(cell.queue), base, needed)
        e = cell.adapt.config.elastic_for(str(facts.get("qos", "burstable")))
        w = cell.adapt.task_windows(rec.task)
        direction = elastic.decide(view, w.util, now_s, e)
        if direction is None:
            continue
        util = w.util.last() or 0.0
        if direction == "up":
            gpus = tuple(sorted((*rec.gpus, free[0])))
        elif direction == "reclaim":  # every borrowed GPU at once: the queue is waiting
            gpus = rec.gpus[:base]
        else:
            gpus = rec.gpus[:-1]
        _rebind(cell, rec, i, gpus, replace(rec.request, num_gpu=len(gpus)))
        facts["resized_s"] = now_s
        w.util.clear()
        cell.adapt.count(f"resized_{direction}")
        code = {"up": "util_high", "down": "util_low", "reclaim": "reclaim"}[direction]
        out.append(Resized(rec.task, rec.node, gpus, MILLI_PER_GPU,
                           "up" if direction == "up" else "down", code,
                           {"gpu_util_pct": util, "window_s": e.window_s,
                            "gpus_before": float(view.gpus)}))
    return out


RECLAIM_SCAN = 8
"""Queued tasks (in queue order) a reclaim looks at: the head and those that may backfill."""


def _queued_fits(cell: Cell, node: int, borrowed: int, now_s: float) -> bool:
    """Would one of the first queued tasks fit on ``node`` once ``borrowed`` whole GPUs
    of it are given back? Reclaim only then."""
    s = cell.state
    if not s.healthy[node]:
        return False
    count = int(s.gpu_count[node])
    free = s.gpu_free[node, :count]
    whole = int((free == MILLI_PER_GPU).sum())
    m = int(s.model[node])
    for k, entry in enumerate(cell.queue.ordered(now_s)):
        if k >= RECLAIM_SCAN:
            break
        req = cell.tasks[entry.task].request
        if not req.num_gpu or cell.queue.over_quota(entry):
            continue
        if req.gpu_models and (m < 0 or s.model_names[m] not in req.gpu_models):
            continue
        if int(s.cpu_free[node]) < req.cpu_milli or int(s.mem_free[node]) < req.memory_mib:
            continue
        if req.fractional or req.num_gpu <= whole + borrowed:
            return True
    return False


# ---- migration --------------------------------------------------------------------------

def _move_off(cell: Cell, node: str, cause: str, now_s: float, forced: bool) -> list[Outcome]:
    out: list[Outcome] = []
    code = "node_draining" if forced else "thermal_throttled"
    for rec in _running_on(cell, node):
        if _task(rec).get("probe") is not None:
            continue
        out += _move(cell, rec, cause, now_s, code, forced=forced)
    return out


def _move(cell: Cell, rec: TaskRecord, cause: str, now_s: float, code: str, *, forced: bool,
          request: TaskRequest | None = None, kind: str | None = None, message: str = "",
          metrics: dict[str, float] | None = None, source_speed: float | None = None,
          avoid: tuple[int, ...] = ()) -> list[Outcome]:
    """Move ``rec`` (optionally re-shaped to ``request``) if a destination and the case exist.

    ``source_speed`` is the task's relative speed where it is (default: a throttled
    GPU's); ``avoid`` lists nodes the destination must not be (e.g. a hot spot, which
    after the release would otherwise look like the best place again).
    """
    cfg = cell.adapt.config
    s = cell.state
    assert rec.node is not None
    if rec.members:  # a gang moves whole: stopped and placed again, or not at all
        if not forced:
            return []
        node = rec.node
        _forget_run(rec)
        cell.requeue(rec.task, cause)
        cell.adapt.count("requeued")
        return [Evicted(rec.task, node, code, f"{message or code}: the gang is stopped "
                        "on all its nodes and queued again whole", True)]
    src = s.node_index[rec.node]
    budget_moves = migration.prune(cell.adapt.meta.get("moves", []), now_s, cfg)
    if not forced and migration.budget_left(budget_moves, now_s, cfg) == 0:
        cell.adapt.count("migrations_over_budget")
        return []
    req = request or rec.request
    old_req, old_gpus = rec.request, rec.gpus
    s.release(rec.task)
    if cfg.model_speed:
        factor = (1.0 - cfg.throttle_slowdown if source_speed is None else source_speed)
        found = _speed_target(cell, rec, req, kind, src, now_s, forced, factor, avoid)
        if found is None:
            s.allocate(old_req, src, old_gpus, rec.task)
            return []
        dest_node, dest_gpus, verdict = found
        s.allocate(req, dest_node, dest_gpus, rec.task)
        return [_relocated(cell, rec, req, dest_node, dest_gpus, code, now_s, verdict,
                           message, metrics)]
    with _avoiding(cell, avoid):
        dest_node, dest_gpus = _place_preferring(cell, req, kind)
    if dest_node < 0:
        s.allocate(old_req, src, old_gpus, rec.task)
        return []
    verdict = None
    if not forced:
        src_speed = 1.0 - cfg.throttle_slowdown if source_speed is None else source_speed
        verdict = migration.judge(_state_mib(cell, rec), _remaining_s(cell, rec, now_s),
                                  src_speed, 1.0, cfg)
        if not verdict.go:
            s.allocate(old_req, src, old_gpus, rec.task)
            cell.adapt.count("migrations_refused")
            return []
    s.allocate(req, dest_node, dest_gpus, rec.task)
    return [_relocated(cell, rec, req, dest_node, dest_gpus, code, now_s, verdict, message,
                       metrics)]


def _speed_target(cell: Cell, rec: TaskRecord, req: TaskRequest, kind: str | None, src: int,
                  now_s: float, forced: bool, factor: float, avoid: tuple[int, ...]
                  ) -> tuple[int, tuple[int, ...], migration.Verdict | None] | None:
    """With model speed: the first destination, in the order of the hour's trade-off
    between run time and energy per unit of work (``speed.ranked``), that exists and,
    unless ``forced``, pays: the time saved at the destination's speed against the
    source's (``factor`` of its model's speed: throttled, hot) exceeds the move's cost.
    A slower model saves nothing, so a move onto it is never made for speed. ``rec`` is
    released; None when nothing fits or pays (refusals counted)."""
    cfg = cell.adapt.config
    s = cell.state
    wk = _work_kind(rec, req, kind)
    src_speed = speed.speed_of(s, src, wk, req.gpu_models)
    remaining = _remaining_at(cell, rec, now_s, src_speed)
    sched = cell._active_scheduler()
    groups: list[tuple[str, ...] | None] = [
        *speed.ranked(s, wk, req.gpu_models, speed.energy_share(sched)), None]
    rates = speed.speeds(s, wk, req.gpu_models)
    refused = False
    with _avoiding(cell, avoid):
        for group in groups:
            if not forced and group is not None and max(
                    rates.get(m, 1.0) for m in group) <= factor * src_speed:
                refused = True  # no model of the group runs it faster than where it is
                continue
            res = place(s, sched, req if group is None else replace(req, gpu_models=group),
                        False)
            if res.node < 0:
                continue
            if forced:
                return res.node, res.gpus, None
            dst_speed = speed.speed_of(s, res.node, wk, req.gpu_models)
            verdict = migration.judge(_state_mib(cell, rec), remaining, factor * src_speed,
                                      dst_speed, cfg)
            if verdict.go:
                return res.node, res.gpus, verdict
            refused = True
    if refused:
        cell.adapt.count("migrations_refused")
    return None


def _work_kind(rec: TaskRecord, req: TaskRequest, kind: str | None = None) -> str:
    """The task's kind of work for model speed (``speed.work_kind``)."""
    return speed.work_kind(kind or _task(rec).get("kind"), req.input_node is not None)


def _remaining_at(cell: Cell, rec: TaskRecord, now_s: float, rate: float) -> float:
    """Run time left at ``rate`` (the model's speed against the one its declared duration
    was measured on), as if it had run there since placement; ``_remaining_s`` at 1."""
    if rate >= 1.0 or rate <= 0.0:
        return _remaining_s(cell, rec, now_s)
    facts = _task(rec)
    dur = facts.get("dur")
    if dur is None:
        dur = rec.meta.expected_s
    if not dur:
        return cell.adapt.config.default_remaining_s
    elapsed = now_s - facts.get("placed_s", now_s)
    return max(0.0, dur - elapsed * rate) / rate


def _state_mib(cell: Cell, rec: TaskRecord) -> float:
    """Checkpoint size of a move: host memory booked plus GPU memory last observed."""
    return rec.request.memory_mib + (cell.adapt.task_windows(rec.task).mem_mib.last() or 0.0)


def _remaining_s(cell: Cell, rec: TaskRecord, now_s: float) -> float:
    """Declared (or assumed) runtime left, from the task's facts."""
    facts = _task(rec)
    placed = facts.get("placed_s", now_s)
    dur = facts.get("dur")
    if dur is None:
        dur = rec.meta.expected_s
    remaining = (dur - (now_s - placed)) if dur else cell.adapt.config.default_remaining_s
    return max(0.0, remaining)


def _relocated(cell: Cell, rec: TaskRecord, req: TaskRequest, dest_node: int,
               dest_gpus: tuple[int, ...], code: str, now_s: float,
               verdict: migration.Verdict | None, message: str = "",
               metrics: dict[str, float] | None = None) -> Migrated:
    """Book-keeping of a move whose destination is already allocated in the state."""
    cfg = cell.adapt.config
    s = cell.state
    old_gpus = rec.gpus
    from_node = rec.node
    assert from_node is not None
    cell.on_node.get(from_node, {}).pop(rec.task, None)
    _account(cell, rec, req)
    rec.request, rec.node, rec.gpus = req, s.node_names[dest_node], dest_gpus
    rec.last_node = rec.node
    cell.on_node.setdefault(rec.node, {})[rec.task] = None
    cell.dirty_tasks.add(rec.task)
    if code != "probe_classified":
        budget_moves = migration.prune(cell.adapt.meta.get("moves", []), now_s, cfg)
        budget_moves.append(now_s)
        cell.adapt.meta["moves"] = budget_moves
        cell.adapt.count("migrations")
        cell.adapt.count(f"migrations_{code}")
        cost = migration.cost_s(rec.request.memory_mib, cfg)
        cell.adapt.count("migration_cost_s", verdict.cost_s if verdict else cost)
    m = dict(metrics or {})
    if verdict is not None:
        m.update(cost_s=verdict.cost_s, benefit_s=verdict.benefit_s)
    share = req.gpu_milli if dest_gpus else 0
    return Migrated(rec.task, from_node, old_gpus, rec.node, dest_gpus, share, code, message, m)


class _avoiding:
    """Context: ``nodes`` look unhealthy to placement, then get their health back.

    The cell's dispatch pass masks a reserved node the same way; health is restored
    exactly (a node that was unhealthy stays so), and each toggle bumps the node's
    version so cached scores are recomputed.
    """

    def __init__(self, cell: Cell, nodes: tuple[int, ...]) -> None:
        self.state = cell.state
        self.nodes = [i for i in nodes if self.state.healthy[i]]

    def __enter__(self) -> None:
        for i in self.nodes:
            self.state.set_health(i, False)

    def __exit__(self, *exc: object) -> None:
        for i in self.nodes:
            self.state.set_health(i, True)


# ---- hot spots, consolidation, defragmentation -------------------------------------------

def gpu_util_pct(cell: Cell, node: str) -> list[float]:
    """Each GPU's utilisation on ``node`` from its tasks' last usage samples.

    A task reports utilisation as a share of what it booked (100 = its whole
    booking busy); a GPU's figure sums its tasks' shares (whole-GPU percent).
    """
    i = cell.state.node_index[node]
    util = [0.0] * int(cell.state.gpu_count[i])
    for rec in _running_on(cell, node):
        w = cell.adapt.windows.get(rec.task)
        last = w.util.last() if w is not None else None
        if last is None:
            continue
        for g in rec.gpus:
            util[g] += last * rec.request.gpu_milli / MILLI_PER_GPU
    return util


def _hot_spots(cell: Cell, cause: str, now_s: float) -> list[Outcome]:
    """A node whose every GPU runs above ``hot_util_pct`` for two or more tasks while two
    whole nodes idle (one stays free for a whole-node task): move its longest task away
    if the contention it escapes (shared host, PCIe, power cap: ``hot_slowdown``) pays
    for the move."""
    cfg = cell.adapt.config
    s, n = cell.state, cell.state.n
    if not cell.adapt.windows:
        return []  # no usage reported: nothing is known to be hot
    idle = (s.gpu_free[:n] == MILLI_PER_GPU).sum(axis=1) == s.gpu_count[:n]
    idle &= s.healthy[:n] & (s.gpu_count[:n] > 0)
    if int(idle.sum()) < 2:
        return []  # keep the last idle node for a whole-node task that may arrive
    out: list[Outcome] = []
    for node in list(cell.nodes):
        i = s.node_index[node]
        if not s.healthy[i] or idle[i] or not s.gpu_count[i]:
            continue
        running = [r for r in _running_on(cell, node) if _task(r).get("probe") is None]
        if len(running) < 2:
            continue  # one task alone contends with nobody: moving it relieves nothing
        util = gpu_util_pct(cell, node)
        if not util or min(util) < cfg.hot_util_pct:
            continue
        cell.adapt.count("hot_spots")
        running.sort(key=lambda r: (-_remaining_s(cell, r, now_s), r.place_seq))
        avoid = (i,) if cfg.hot_spot_onto_idle else (i, *np.flatnonzero(idle).tolist())
        for rec in running[:1]:
            out += _move(cell, rec, cause, now_s, "hot_spot", forced=False,
                         source_speed=1.0 - cfg.hot_slowdown, avoid=avoid)
    return out


def _consolidate(cell: Cell, cause: str, now_s: float) -> list[Outcome]:
    """Off-peak: empty the least-loaded busy node onto other busy nodes (never onto idle
    ones, which may then stay powered down). All of its tasks move or none does; each
    move must leave the task enough runtime to repay its cost and fit the budget."""
    cfg = cell.adapt.config
    s, n = cell.state, cell.state.n
    if cell.queue or n == 0:
        return []
    healthy = s.healthy[:n] & (s.gpu_count[:n] > 0)
    cap = int((s.gpu_count[:n] * healthy).sum()) * MILLI_PER_GPU
    used_per_node = (s.gpu_count[:n] * MILLI_PER_GPU - s.gpu_free[:n].sum(axis=1)) * healthy
    if cap == 0 or 100.0 * float(used_per_node.sum()) / cap >= cfg.consolidate_pct:
        return []
    busy = [i for i in range(n) if used_per_node[i] > 0]
    if len(busy) < 2:
        return []
    budget = migration.budget_left(
        migration.prune(cell.adapt.meta.get("moves", []), now_s, cfg), now_s, cfg)
    idle = tuple(i for i in range(n) if healthy[i] and used_per_node[i] == 0)
    for src in sorted(busy, key=lambda i: (int(used_per_node[i]), int(s.rank[i]))):
        tasks = _running_on(cell, s.node_names[src])
        if not tasks or len(tasks) > budget:
            continue
        if any(_task(r).get("probe") is not None or r.members for r in tasks):
            continue  # probes finish where they are; a gang moves only whole
        verdicts = [migration.judge(_state_mib(cell, r), _remaining_s(cell, r, now_s), 0.0,
                                    1.0, cfg) for r in tasks]
        if not all(v.go for v in verdicts):
            continue
        plan = _plan_moves(cell, tasks, (src, *idle))
        if plan is None:
            continue
        if not _consolidation_pays(cell, src, tasks, plan, verdicts, now_s):
            for r in tasks:  # undo: the destinations burn more than the node saves
                s.release(r.task)
                s.allocate(r.request, src, r.gpus, r.task)
            cell.adapt.count("consolidations_refused_energy")
            continue
        cell.adapt.count("consolidations")
        return [_relocated(cell, r, r.request, d, g, "consolidate", now_s, v,
                           f"off-peak: emptying {s.node_names[src]}")
                for r, (d, g), v in zip(tasks, plan, verdicts, strict=True)]
    return []


def _consolidation_pays(cell: Cell, src: int, tasks: list[TaskRecord],
                       plan: list[tuple[int, tuple[int, ...]]],
                       verdicts: list[migration.Verdict], now_s: float) -> bool:
    """Energy gate of a consolidation (per-model power model, ``energy.py``): the source
    server's idle draw, saved until its tasks would have ended anyway, must exceed the
    extra dynamic power of running them on hungrier GPUs plus the energy of redoing
    each move's lost time."""
    s = cell.state

    def tdp(i: int) -> float:
        m = int(s.model[i])
        return float(s.model_tdp_w[m]) if m >= 0 else 0.0

    horizon = max(_remaining_s(cell, r, now_s) for r in tasks)
    saved_w = HOST_IDLE_W + int(s.gpu_count[src]) * IDLE_SHARE * tdp(src)
    extra_j = 0.0
    model_speed = cell.adapt.config.model_speed
    for r, (dest, _), v in zip(tasks, plan, verdicts, strict=True):
        w = cell.adapt.windows.get(r.task)
        util = ((w.util.last() if w is not None else None) or 100.0) / 100.0
        gpus = r.request.gpu_total_milli / MILLI_PER_GPU * util
        dyn = (1.0 - IDLE_SHARE) * gpus
        if model_speed:  # energy per unit of work: a slower model runs the rest longer
            wk = _work_kind(r, r.request)
            v_src = speed.speed_of(s, src, wk, r.request.gpu_models)
            v_dst = speed.speed_of(s, dest, wk, r.request.gpu_models)
            left = min(_remaining_at(cell, r, now_s, v_src), horizon)
            extra_j += dyn * (tdp(dest) * v_src / v_dst - tdp(src)) * left
        else:
            extra_j += dyn * (tdp(dest) - tdp(src)) * min(_remaining_s(cell, r, now_s),
                                                           horizon)
        extra_j += v.cost_s * (IDLE_SHARE + dyn) * tdp(dest)
    return saved_w * horizon > cell.adapt.config.migration_min_gain * extra_j


def _plan_moves(cell: Cell, tasks: list[TaskRecord],
                avoid: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]] | None:
    """Destinations for all ``tasks`` away from ``avoid``, allocated in the state; None
    (and the state as it was) when one of them has nowhere to go."""
    s = cell.state
    olds = [(r, s.node_index[r.node or ""], r.gpus, r.request) for r in tasks]
    for r in tasks:
        s.release(r.task)
    plan: list[tuple[int, tuple[int, ...]]] = []
    sched = cell._active_scheduler()  # the hour's objectives (e.g. energy off peak) apply
    alpha = speed.energy_share(sched) if cell.adapt.config.model_speed else 0.0
    with _avoiding(cell, avoid):
        for r in tasks:
            if cell.adapt.config.model_speed:
                node, gpus = _ranked_place(cell, sched, r.request, _work_kind(r, r.request),
                                           alpha)
            else:
                res = place(s, sched, r.request)
                node, gpus = res.node, res.gpus
            if node < 0:
                break
            s.allocate(r.request, node, gpus, r.task)
            plan.append((node, gpus))
    if len(plan) == len(tasks):
        return plan
    for r, _ in zip(tasks, plan, strict=False):
        s.release(r.task)
    for r, i, gpus, req in olds:
        s.allocate(req, i, gpus, r.task)
    return None


def _ranked_place(cell: Cell, sched: Scheduler, req: TaskRequest, kind: str,
                  alpha: float) -> tuple[int, tuple[int, ...]]:
    """With model speed: the first placement among the models in ``speed.ranked`` order
    (run time against energy per unit of work by ``alpha``), else anywhere it fits."""
    s = cell.state
    for group in speed.ranked(s, kind, req.gpu_models, alpha):
        res = place(s, sched, replace(req, gpu_models=group), False)
        if res.node >= 0:
            return res.node, res.gpus
    res = place(s, sched, req, False)
    return res.node, res.gpus


def _slowdown_gpu_s(cell: Cell, tasks: list[TaskRecord], plan: list[tuple[int, tuple[int, ...]]],
                    now_s: float) -> float:
    """With model speed: GPU-seconds of run time the moved ``tasks`` lose on slower models
    of their ``plan`` (a faster destination counts 0, not a gain: the move is not made
    for it). Each task's sources are its records' nodes (not yet moved)."""
    s = cell.state
    lost = 0.0
    for r, (dest, _) in zip(tasks, plan, strict=True):
        wk = _work_kind(r, r.request)
        v_src = speed.speed_of(s, s.node_index[r.node or ""], wk, r.request.gpu_models)
        v_dst = speed.speed_of(s, dest, wk, r.request.gpu_models)
        if v_dst >= v_src or v_dst <= 0:
            continue
        left = _remaining_at(cell, r, now_s, v_src)
        lost += left * (v_src / v_dst - 1.0) * r.request.gpu_total_milli / MILLI_PER_GPU
    return lost


def _defrag(cell: Cell, cause: str, now_s: float) -> list[Outcome]:
    """Free whole GPUs for a waiting multi-GPU task that fits nowhere now, by moving the
    fractional tasks that share its GPUs elsewhere on the cell; only when the GPU-time
    the task would otherwise wait exceeds the moves' cost by ``migration_min_gain``."""
    cfg = cell.adapt.config
    s = cell.state
    budget = migration.budget_left(
        migration.prune(cell.adapt.meta.get("moves", []), now_s, cfg), now_s, cfg)
    if budget == 0:
        return []
    scanned = 0
    for entry in cell.queue.ordered(cell.now_s):
        rec = cell.tasks[entry.task]
        req = rec.request
        if req.num_gpu < 2 or req.gpu_milli < MILLI_PER_GPU or cell.queue.over_quota(entry):
            continue
        scanned += 1
        if scanned > cfg.defrag_scan:
            break
        if place(s, cell.scheduler, req, False).node >= 0:
            continue  # it can start without help (the dispatch pass will place it)
        reservation = cell._reserve(rec)
        wait_s = (reservation.start_s - now_s) if reservation is not None else (
            cfg.default_remaining_s)
        best: tuple[int, int, list[TaskRecord]] | None = None
        for i in np.flatnonzero(empty_fit_mask(s, req)).tolist():
            victims = _defrag_victims(cell, i, req.num_gpu)
            if victims is None or not victims or len(victims) > budget:
                continue
            if best is None or (len(victims), int(s.rank[i])) < (len(best[2]), best[1]):
                best = (i, int(s.rank[i]), victims)
        if best is None:
            continue
        node, _, victims = best
        verdicts = [migration.judge(_state_mib(cell, v), 0.0, 1.0, 1.0, cfg) for v in victims]
        cost = sum(v.cost_s * r.request.gpu_total_milli / MILLI_PER_GPU
                   for v, r in zip(verdicts, victims, strict=True))
        gain = wait_s * req.num_gpu
        if gain <= cfg.migration_min_gain * cost:
            cell.adapt.count("defrag_refused")
            continue
        plan = _plan_moves(cell, victims, (node,))
        if plan is None:
            continue
        slower = _slowdown_gpu_s(cell, victims, plan, now_s) if cfg.model_speed else 0.0
        if slower and gain <= cfg.migration_min_gain * (cost + slower):
            for r in victims:  # undo: the victims would lose more on slower GPUs
                s.release(r.task)
                s.allocate(r.request, s.node_index[r.node or ""], r.gpus, r.task)
            cell.adapt.count("defrag_refused_speed")
            continue
        if not fits_after(s, node, req, []):
            for r in victims:  # undo: it would not help
                s.release(r.task)
                s.allocate(r.request, s.node_index[r.node or ""], r.gpus, r.task)
            continue
        cell.adapt.count("defrags")
        m = {"wait_saved_s": wait_s, "gpus_freed_for": float(req.num_gpu)}
        return [_relocated(cell, r, r.request, d, g, "defragment", now_s,
                           migration.Verdict(True, v.cost_s, gain, "frees whole GPUs"),
                           f"frees GPUs of {s.node_names[node]} for {rec.task}", m)
                for r, (d, g), v in zip(victims, plan, verdicts, strict=True)]
    return []


def _defrag_victims(cell: Cell, node: int, need: int) -> list[TaskRecord] | None:
    """The fewest fractional tasks to move off ``node`` so it has ``need`` free whole
    GPUs (None if whole-GPU tasks or probes stand in the way)."""
    s = cell.state
    count = int(s.gpu_count[node])
    free_whole = sum(1 for g in range(count) if s.gpu_free[node, g] == MILLI_PER_GPU)
    if free_whole >= need:
        return []
    by_gpu: dict[int, list[TaskRecord]] = {}
    for rec in _running_on(cell, s.node_names[node]):
        for g in rec.gpus:
            by_gpu.setdefault(g, []).append(rec)
    options = []
    for g, recs in sorted(by_gpu.items()):
        if any(not r.request.fractional or _task(r).get("probe") is not None for r in recs):
            continue
        options.append((len(recs), g, recs))
    options.sort(key=lambda o: (o[0], o[1]))
    short = need - free_whole
    if len(options) < short:
        return None
    return [r for _, _, recs in options[:short] for r in recs]


def _place_preferring(cell: Cell, req: TaskRequest,
                      kind: str | None) -> tuple[int, tuple[int, ...]]:
    """Place ``req``; for a classified task try its most energy-efficient models first."""
    s = cell.state
    if kind is not None and req.num_gpu and not req.gpu_models and len(s.model_names) > 1:
        eff = []
        for m in s.model_names:
            spec = s.catalog.get(m)
            if spec is not None:
                eff.append((-perf_per_watt(spec.fp32_tflops, spec.mem_bandwidth_gbps,
                                           spec.tdp_w, kind), m))
        best = [m for _, m in sorted(eff)[: max(1, (len(eff) + 1) // 2)]]
        res = place(s, cell.scheduler, replace(req, gpu_models=tuple(sorted(best))))
        if res.node >= 0:
            return res.node, res.gpus
    res = place(s, cell.scheduler, req)
    return res.node, res.gpus


def _rebind(cell: Cell, rec: TaskRecord, node: int, gpus: tuple[int, ...],
            req: TaskRequest) -> None:
    cell.state.release(rec.task)
    cell.state.allocate(req, node, gpus, rec.task)
    _account(cell, rec, req)
    rec.request, rec.gpus = req, gpus
    cell.dirty_tasks.add(rec.task)


def _account(cell: Cell, rec: TaskRecord, req: TaskRequest) -> None:
    """Keep the fair-share queue's per-tenant usage in step with a re-shaped booking."""
    if req.gpu_total_milli != rec.request.gpu_total_milli:
        cell.queue.on_stop(rec.meta.tenant, rec.request.gpu_total_milli)
        cell.queue.on_start(rec.meta.tenant, req.gpu_total_milli)


# ---- learnt profiles --------------------------------------------------------------------

def _learnt(cell: Cell, cmd: str) -> probe.Learnt | None:
    raw = cell.adapt.meta.get("learnt", {}).get(cmd)
    return None if raw is None else probe.Learnt.from_json(raw)


def _save_learnt(cell: Cell, cmd: str, learnt: probe.Learnt) -> None:
    cell.adapt.meta.setdefault("learnt", {})[cmd] = learnt.to_json()


def free_whole_gpus(cell: Cell) -> int:
    """Idle whole GPUs on healthy nodes (for reports)."""
    s, n = cell.state, cell.state.n
    return int(((s.gpu_free[:n] == MILLI_PER_GPU) & s.healthy[:n, None]).sum())

