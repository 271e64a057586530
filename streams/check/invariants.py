"""The scheduler's safety invariants, checked by folding its log. Pure: records in, report out.

Why from the log: the per-cell input log and the decisions topic are the
source of truth (docs/auditing.md), so a check over them needs no access to a
worker's memory and works the same on a live cluster and on an exported file.
The fold here is deliberately *independent* of ``streams.core``: it books GPU
shares from the decisions themselves, so a bug in the core's bookkeeping shows
up as a violation instead of being reproduced.

Per cell, input-log events are taken in log order and each is followed by the
decisions it caused (``causation_id``), which is the order the worker produced
them in. Invariants (names in :mod:`streams.check.findings`):

* ``gpu_over_commit``: no GPU's booked share exceeds 1000 milli at any point.
  A booking starts with ``TaskPlaced``/``TaskProbe``/``TaskMigrating`` (to)/
  ``TaskResized`` and ends with ``TaskFinished``/``TaskFailed``/``TaskCancelled``
  in the input log or a ``TaskPreempted`` decision -- the moments the core
  frees resources.
* ``task_placed_twice``: no placement of a task that still holds a booking.
* ``task_lost``: every submission (``hetsched.tasks`` when read, else the
  input log) ends queued, running, finished, failed (with the executor's
  reason), cancelled, unschedulable (with the policies' verdicts) or refused
  (dead-lettered by the router: ``hetsched.deadletter``, with its reason, see
  :mod:`streams.check.refusals`). Without ``settled`` a submission not yet logged
  or decided is ``in_flight``.
* ``decision_applied_twice``: at most one ``TaskStarted`` (distinct event ids;
  a producer retry of the same event is not a second application) per
  ``decision_id`` and node -- the executors' at-most-once promise (a gang's one
  placement starts once on each member's node).
* ``start_without_decision``: a ``TaskStarted`` naming a decision id that is
  not on the decisions topic.
* ``decision_to_absent_node``: no placement or migration to a node that is not
  registered in the cell, or whose failure, drain or departure was logged
  before the decision's cause (until it re-registers).
* ``duplicate_decision``: one decision id at two positions (exactly-once broken).
* ``task_ended_by_other_node``: a finish or failure report ended (or requeued) a
  placed task although it came from another node than the placement's, or named no
  decision of it, and the cell did not refuse it (``TaskRejected``
  ``not_placed_here`` caused by the report). The placement's node never reported it:
  the task still runs there, so its booking is kept, and a placement on its GPUs
  shows as an over-commit too.
* ``gang_malformed``: a gang's placement (``TaskPlaced`` v2) books every member at
  once, each on its own node, whole GPUs, ranks 0..n-1 with rank 0 in ``node_id``;
  a report from any member's node may end it. No member is booked before or
  without the others, so a half gang shows as this or as an over-commit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from schemas.codec import decode
from schemas.deadletter import DeadLetter
from schemas.events import (
    Envelope,
    NodeDraining,
    NodeFailed,
    NodeLeft,
    NodeRegistered,
    TaskCancelled,
    TaskFailed,
    TaskFinished,
    TaskMigrating,
    TaskPlaced,
    TaskPlacedV2,
    TaskPreempted,
    TaskProbe,
    TaskRejected,
    TaskResized,
    TaskStarted,
    TaskSubmitted,
    TaskUnschedulable,
)
from schemas.events.decisions import NOT_PLACED_HERE
from schemas.topics import DEADLETTER, DECISIONS, INPUT_LOG, TASK_STATUS, TASKS
from streams.audit.records import Record, logical_topic
from streams.check import findings as f
from streams.check.findings import Report
from streams.check.refusals import RefusedSubmission, refused_submission
from streams.check.task_runs import TaskRuns

GPU_MILLI = 1000
Env = Envelope[Any]
CHECKED_TOPICS = (TASKS, TASK_STATUS, INPUT_LOG, DECISIONS, DEADLETTER)
"""What a check of a cluster reads: submissions, executor reports, the cells' logs,
decisions, and the dead letters that tell which submissions were refused (catalog
names)."""


@dataclass
class _Cell:
    """The checker's own ledger for one cell."""

    name: str
    members: dict[str, str] = field(default_factory=dict)
    """node id -> "up", "draining", "failed" or "left"."""
    booked: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    """(node, GPU index) -> booked share in milli."""
    holds: dict[str, list[tuple[str, list[tuple[int, int]]]]] = field(default_factory=dict)
    """task -> [(node, [(GPU index, share)])] while it holds a booking: one entry, or one
    per member of a gang."""
    seen: set[str] = field(default_factory=set)
    """The event ids of its inputs folded so far."""
    runs: TaskRuns = field(default_factory=TaskRuns)
    """Each task's run, to tell the reports that end it from stale ones."""
    report: Report = field(default_factory=Report)
    """Its findings, failure reasons and highest booking, merged by ``check``."""


def check(records: Iterable[Record], prefix: str = "", *, settled: bool = False) -> Report:
    """Fold the records (any order; any subset of tasks, task-status, input log,
    decisions) and report every invariant. ``settled``: the cluster was quiet when
    the records were read, so an undecided submission is lost, not in flight.

    Reads ``records`` twice, holding the input log's records only when they are out of
    (topic, partition, offset) order: the first pass decodes the other topics and the
    second folds the input log as it goes. A list or an audit file (``LogFile``) is
    read twice as it is; an iterator is taken into a list first.
    """
    if iter(records) is records:
        records = list(records)
    report = Report()
    by_topic, inputs_in_order, refusals = _decode_others(records, prefix, report)
    submitted = [e.payload.task_id for e in by_topic[TASKS]
                 if isinstance(e.payload, TaskSubmitted)]
    decisions = _index_decisions(by_topic[DECISIONS], report)
    cells: dict[str, _Cell] = {}
    states: dict[str, str] = {}
    logged: set[str] = set()
    started_in_log: list[Env] = []  # the starts, when no task-status record was read
    inputs = (r for r in records if logical_topic(r.topic, prefix) == INPUT_LOG)
    for env in _decoded_inputs(inputs if inputs_in_order else sorted(inputs, key=_position),
                               report):
        cell = cells.get(env.cell or "")
        if cell is None:
            cell = cells[env.cell or ""] = _Cell(env.cell or "")
        _fold_input(cell, env, decisions, states, logged)
        if isinstance(env.payload, TaskStarted) and not by_topic[TASK_STATUS]:
            started_in_log.append(env)
    for name in sorted(cells):  # each cell's findings together, cells by name
        cell_report = cells[name].report
        report.violations += cell_report.violations
        report.failure_reasons.update(cell_report.failure_reasons)
        report.counts.update(cell_report.counts)
        report.max_share_milli = max(report.max_share_milli, cell_report.max_share_milli)
    report.counts["orphan_decisions"] = sum(len(v) for v in decisions.values())
    if not submitted:
        submitted = sorted(logged)
    refused = _refused_tasks(by_topic[TASKS], refusals)
    for task in dict.fromkeys([*submitted, *sorted(logged), *refused]):
        state = states.get(task, "in_flight")
        if state == "in_flight" and task in refused:
            state = "refused"
            report.refused_reasons[refused[task]] += 1
        if state == "in_flight" and settled:
            where = "the input log" if task not in logged else "any decision"
            report.add(f.LOST_TASK, f"task {task} was submitted but never reached {where}",
                       task_id=task)
            state = "lost"
        report.task_states[task] = state
    _check_starts(by_topic[TASK_STATUS] or started_in_log, by_topic[DECISIONS], report)
    return report


def _position(r: Record) -> tuple[str, int, int]:
    return (r.topic, r.partition, r.offset)


def _refused_tasks(submissions: list[Env],
                   refusals: list[RefusedSubmission]) -> dict[str, str]:
    """task id -> why, for the tasks whose every submission read was dead-lettered
    (a task also submitted in a record that went through is that record's)."""
    letters = {r.event_id for r in refusals}
    went_through = {e.payload.task_id for e in submissions
                    if isinstance(e.payload, TaskSubmitted) and e.event_id not in letters}
    return {r.task_id: r.reason for r in refusals if r.task_id not in went_through}


def _decode_others(records: Iterable[Record], prefix: str, report: Report
                   ) -> tuple[dict[str, list[Env]], bool, list[RefusedSubmission]]:
    """The decoded envelopes of the topics other than the input log, per catalog topic
    in (partition, offset) order, each record once; whether the input log's records
    come in (topic, partition, offset) order (a file ``export`` wrote); and the refused
    submissions the dead letters tell of."""
    out: dict[str, list[Env]] = {TASKS: [], TASK_STATUS: [], DECISIONS: []}
    refusals: list[RefusedSubmission] = []
    others: list[tuple[tuple[str, int, int], str, Record]] = []  # (position, topic, record)
    in_order, last = True, None
    for r in records:
        topic = logical_topic(r.topic, prefix)
        if topic == INPUT_LOG:
            key = _position(r)
            in_order = in_order and (last is None or last <= key)
            last = key
        elif topic in out or topic == DEADLETTER:
            others.append((_position(r), topic, r))
    seen: set[tuple[str, int, int]] = set()
    for key, topic, r in sorted(others, key=itemgetter(0)):
        if key in seen or r.value is None:
            continue
        seen.add(key)
        if topic == DEADLETTER:
            report.counts[DEADLETTER] += 1
            refusal = refused_submission(r.value, prefix)
            if refusal is not None:
                refusals.append(refusal)
            continue
        env = _decoded(r, topic, report)
        if env is not None:
            out[topic].append(env)
    return out, in_order, refusals


def _decoded_inputs(inputs: Iterable[Record], report: Report) -> Iterator[Env]:
    """The input log's envelopes, in the order given (sorted), each position once."""
    last = None
    for r in inputs:
        key = _position(r)
        if r.value is None or key == last:
            continue
        last = key
        env = _decoded(r, INPUT_LOG, report)
        if env is not None:
            yield env


def _decoded(r: Record, topic: str, report: Report) -> Env | None:
    """The record's envelope (the key's cell when an input or decision names none), or
    None, counted, when it does not decode."""
    assert r.value is not None
    env = decode(r.value, topic=topic, partition=r.partition, offset=r.offset)
    if isinstance(env, DeadLetter):
        report.counts[f"undecodable:{topic}"] += 1
        return None
    if topic in (INPUT_LOG, DECISIONS) and not env.cell:
        env = env.model_copy(update={"cell": r.cell})
    report.counts[topic] += 1
    return env


def _index_decisions(envs: list[Env], report: Report) -> dict[tuple[str, str], list[Env]]:
    """(cell, cause event id) -> decisions in log order; repeats of one id reported."""
    out: dict[tuple[str, str], list[Env]] = defaultdict(list)
    seen: set[str] = set()
    for env in envs:
        did = getattr(env.payload, "decision_id", env.event_id)
        if did in seen:
            report.add(f.DUPLICATE_DECISION, f"decision {did} ({env.type} of task "
                       f"{env.payload.task_id}) appears twice", env.cell, env.payload.task_id)
            continue
        seen.add(did)
        out[(env.cell or "", env.causation_id or "")].append(env)
        report.counts["decisions"] += 1
    return out


def _fold_input(cell: _Cell, env: Env, decisions: dict[tuple[str, str], list[Env]],
                states: dict[str, str], logged: set[str]) -> None:
    """One input of the cell, then the decisions it caused."""
    if env.event_id in cell.seen:
        return  # a repeated input: the cell ignores it too
    cell.seen.add(env.event_id)
    caused = decisions.pop((cell.name, env.event_id), [])
    if _refused_report(env.payload, caused):
        cell.report.counts["reports_refused"] += 1  # the cell changed nothing
    else:
        _apply_input(cell, env.payload, states, logged, cell.report)
    for d in caused:
        _apply_decision(cell, d, states, cell.report)


def _refused_report(p: Any, caused: list[Env]) -> bool:
    """Whether the cell refused the finish or failure report ``p`` (its decision says so)."""
    return isinstance(p, TaskFinished | TaskFailed) and any(
        isinstance(d.payload, TaskRejected) and d.payload.reason.code == NOT_PLACED_HERE
        and d.payload.task_id == p.task_id for d in caused)


def _apply_input(cell: _Cell, p: Any, states: dict[str, str], logged: set[str],
                 report: Report) -> None:
    if isinstance(p, TaskSubmitted):
        logged.add(p.task_id)
        states.setdefault(p.task_id, "in_flight")
    elif isinstance(p, NodeRegistered):
        cell.members[p.node_id] = "up"
    elif isinstance(p, NodeFailed | NodeLeft | NodeDraining):
        status = {NodeFailed: "failed", NodeLeft: "left", NodeDraining: "draining"}[type(p)]
        if p.node_id in cell.members:
            cell.members[p.node_id] = status
    elif isinstance(p, TaskFinished | TaskFailed):
        _apply_report(cell, p, states, report)
    elif (isinstance(p, TaskCancelled)
          and states.get(p.task_id) in ("running", "queued", "in_flight")):
        _release(cell, p.task_id)
        states[p.task_id] = "cancelled"


def _apply_report(cell: _Cell, p: TaskFinished | TaskFailed, states: dict[str, str],
                  report: Report) -> None:
    """An executor's finish or failure, as the cell takes it (:mod:`task_runs`): it ends
    the task, queues it again, or is about a run already stopped (ignored)."""
    task = p.task_id
    outcome = cell.runs.outcome(task, p.decision_id,
                                p.reason if isinstance(p, TaskFailed) else None, p.node_id)
    report.counts[f"reports_{outcome}"] += 1
    if outcome == "not_placed_here":
        run, nodes = cell.runs.current[task], cell.runs.nodes[task]
        why = (f"names no decision of its placement {run} there" if p.node_id in nodes
               else f"its placement {run} is on {', '.join(nodes)}, which had not reported it")
        report.add(f.ENDED_BY_OTHER_NODE, f"{type(p).__name__} from {p.node_id} (decision "
                   f"{p.decision_id}) was taken for task {task}, but {why}", cell.name, task)
        return  # the task still runs where it is placed: its booking stays
    if outcome == "requeues" and states.get(task) == "running":
        _release(cell, task)
        cell.runs.stop(task)
        states[task] = "queued"
    elif outcome == "ends" and states.get(task) in ("running", "queued", "in_flight"):
        _release(cell, task)
        if isinstance(p, TaskFailed):
            states[task] = "failed"
            report.failure_reasons[p.reason] += 1
        else:
            states[task] = "finished"


def _apply_decision(cell: _Cell, env: Env, states: dict[str, str], report: Report) -> None:
    p = env.payload
    task = p.task_id
    if isinstance(p, TaskPlaced | TaskProbe):
        members = [(m.node_id, m.gpus) for m in p.members] if isinstance(
            p, TaskPlacedV2) else [(p.node_id, p.gpus)]
        if isinstance(p, TaskPlacedV2):
            _check_gang(cell, p, env, report)
        for node, _ in members:
            _check_member(cell, node, env, report)
        if task in cell.holds:
            report.add(f.DOUBLE_PLACEMENT, f"task {task} placed on {p.node_id} by {p.decision_id}"
                       f" while it still holds GPUs on {cell.holds[task][0][0]}", cell.name,
                       task)
            _release(cell, task)
        for node, gpus in members:
            _book(cell, task, node, [(g.index, g.share_milli) for g in gpus], env, report)
        cell.runs.started(task, p.decision_id, *(node for node, _ in members))
        states[task] = "running"
    elif isinstance(p, TaskMigrating):
        _check_member(cell, p.to_node_id, env, report)
        _release(cell, task)
        _book(cell, task, p.to_node_id, [(g.index, g.share_milli) for g in p.to_gpus], env,
              report)
        cell.runs.started(task, p.decision_id, p.to_node_id)
        states[task] = "running"
    elif isinstance(p, TaskResized):
        _release(cell, task)
        _book(cell, task, p.node_id, [(g.index, g.share_milli) for g in p.gpus], env, report)
        cell.runs.started(task, p.decision_id, p.node_id)
    elif isinstance(p, TaskPreempted):
        _release(cell, task)
        cell.runs.preempted(task, p.decision_id)
        if states.get(task) not in ("finished", "failed"):  # a gang's stop after its end
            states[task] = "queued" if p.requeue else "cancelled"
    elif isinstance(p, TaskUnschedulable):
        states[task] = "queued" if p.resolvable else "unschedulable"


def _check_member(cell: _Cell, node: str, env: Env, report: Report) -> None:
    status = cell.members.get(node)
    if status != "up":
        why = "never registered in this cell" if status is None else f"{status}"
        report.add(f.MEMBERSHIP, f"{env.type} {env.payload.decision_id} of task "
                   f"{env.payload.task_id} targets node {node}: {why}", cell.name,
                   env.payload.task_id)


def _check_gang(cell: _Cell, p: TaskPlacedV2, env: Env, report: Report) -> None:
    """A gang's one decision names each member once, on distinct nodes, whole GPUs, rank 0
    in ``node_id``/``gpus``: anything else is a gang split or stacked by the scheduler."""
    nodes = [m.node_id for m in p.members]
    problems = []
    if [m.rank for m in p.members] != list(range(len(p.members))):
        problems.append("ranks are not 0..n-1 in order")
    if len(set(nodes)) != len(nodes):
        problems.append("two members on one node")
    if (p.members[0].node_id, p.members[0].gpus) != (p.node_id, p.gpus):
        problems.append("node_id/gpus are not rank 0's")
    if any(g.share_milli != GPU_MILLI for m in p.members for g in m.gpus):
        problems.append("a member shares a GPU")
    if problems:
        report.add(f.GANG_MALFORMED, f"gang placement {p.decision_id} of task {p.task_id}: "
                   f"{'; '.join(problems)}", cell.name, p.task_id)


def _book(cell: _Cell, task: str, node: str, gpus: list[tuple[int, int]], env: Env,
          report: Report) -> None:
    cell.holds.setdefault(task, []).append((node, gpus))
    for index, share in gpus:
        cell.booked[(node, index)] += share
        total = cell.booked[(node, index)]
        report.max_share_milli = max(report.max_share_milli, total)
        if total > GPU_MILLI:
            report.add(f.OVER_COMMIT, f"GPU {index} of {node} booked {total} milli after "
                       f"{env.type} {env.payload.decision_id} of task {task}", cell.name, task)


def _release(cell: _Cell, task: str) -> None:
    for node, gpus in cell.holds.pop(task, ()):
        for index, share in gpus:
            cell.booked[(node, index)] -= share


def _check_starts(statuses: list[Env], decisions: list[Env], report: Report) -> None:
    """At most one start per decision id and node (a gang's placement starts once on each
    member's node); every start answers a recorded decision."""
    known = {getattr(d.payload, "decision_id", d.event_id) for d in decisions}
    starts: dict[tuple[str, str], set[str]] = defaultdict(set)
    for env in statuses:
        p = env.payload
        if not isinstance(p, TaskStarted):
            continue
        starts[(p.decision_id, p.node_id)].add(env.event_id)
        if env.causation_id != p.decision_id:
            report.counts["start_causation_mismatch"] += 1
    report.counts["starts"] = sum(len(v) for v in starts.values())
    for (did, node), events in sorted(starts.items()):
        if len(events) > 1:
            report.add(f.DUPLICATE_APPLY, f"decision {did} was started {len(events)} times "
                       f"on {node} (events {', '.join(sorted(events))})")
        if known and did not in known:
            report.add(f.PHANTOM_START, f"TaskStarted names decision {did}, not on the "
                       "decisions topic")
