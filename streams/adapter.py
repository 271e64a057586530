"""Schema events in, schema decisions out: the pure function a cell's log is folded with.

``apply(cell, envelope) -> [decision envelopes]`` maps one input-log envelope
to the cell's inputs (``streams.core.cell``), steps the cell, and turns each
outcome into a decision envelope. Everything about a decision is derived from
its cause, so replaying a cell's input log reproduces the decisions byte for
byte (audit replay, issue 9, and the service's own tests compare them):

* ``event_id`` = ``decision_id`` = ULID derived from the cause's
  ``occurred_at`` and ``"<cause event_id>/<n>"`` (n = position among the
  decisions of that cause);
* ``occurred_at`` = the cause's event time (the core has no other clock);
* ``causation_id`` = the cause; ``correlation_id`` = the task's submission
  chain; ``cell`` = the cell; ``source`` = ``scheduler/<cell>``.

No I/O and no clock here; the Faust processor is decode -> ``apply`` -> send.
"""

from __future__ import annotations

from typing import Any

from schemas.events import (
    Candidate,
    DecisionReason,
    Envelope,
    Event,
    ExecutorSpec,
    GpuAssignment,
    NodeDraining,
    NodeFailed,
    NodeLeft,
    NodeRegistered,
    PolicyVerdict,
    TaskCancelled,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskSubmitted,
    TaskUnschedulable,
    Tick,
    make_event,
)
from schemas.ids import derive_event_id
from streams.core.cell import Cell, Outcome, Preempted, Refused, Stopped
from streams.core.decisions import Placement
from streams.core.events import NodeAdded, NodeHealthChanged, TaskArrived, TaskEnded
from streams.core.queue import TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import Reason

UNHEALTHY_EVENTS = (NodeDraining, NodeFailed, NodeLeft)


def task_request(payload: TaskSubmitted) -> TaskRequest:
    """The core's view of a submission (raises ValueError if the core refuses it)."""
    r = payload.resources
    located = [i.location for i in payload.inputs if i.location]
    return TaskRequest(
        task=payload.task_id, cpu_milli=r.cpu_milli, memory_mib=r.memory_mib,
        num_gpu=r.gpu_count, gpu_milli=r.gpu_share_milli if r.gpu_count else 0,
        gpu_models=tuple(r.gpu_models), input_node=located[0] if located else None,
    )


def task_meta(payload: TaskSubmitted) -> TaskMeta:
    """What the queue needs beyond the shape: tenant, priority, QoS, runtime, dependencies."""
    return TaskMeta(tenant=payload.tenant, priority=payload.priority, qos=payload.qos,
                    expected_s=payload.features.expected_duration_s,
                    depends_on=tuple(payload.depends_on),
                    task_class=payload.features.profile or "")


def node_added(env: Envelope[Any]) -> tuple[NodeAdded, dict[str, Any]]:
    """The core's view of a registration; GPU model = the first GPU's (one model per node)."""
    p: NodeRegistered = env.payload
    gpus = sorted(p.gpus, key=lambda g: g.index)
    event = NodeAdded(env.event_id, p.node_id, p.cpu_milli, p.memory_mib, len(gpus),
                      gpus[0].model if gpus else None)
    extra = {"uuids": [g.uuid for g in gpus], "pool": p.pool}
    return event, extra


def outcomes(cell: Cell, env: Envelope[Any]) -> list[Outcome]:
    """Step ``cell`` by one input-log envelope (inputs that decide nothing yet: [])."""
    p = env.payload
    now_s = env.occurred_at.timestamp()
    if isinstance(p, TaskSubmitted):
        try:
            req = task_request(p)
            meta = task_meta(p)
        except ValueError:
            return []
        spec = {"executor": p.executor.model_dump(mode="json"),
                "correlation_id": env.correlation_id or env.event_id}
        return cell.submit(TaskArrived(env.event_id, req), spec, meta, now_s)
    if isinstance(p, TaskFailed) and p.reason == "killed" and cell.ack_preempted(p.task_id):
        return []  # the executor confirms a preemption: the task is already queued again
    if isinstance(p, TaskFinished | TaskFailed):
        return cell.end(TaskEnded(env.event_id, p.task_id), now_s=now_s,
                        failed=isinstance(p, TaskFailed))
    if isinstance(p, TaskCancelled):
        return cell.end(TaskEnded(env.event_id, p.task_id, cancelled=True), p.reason, now_s)
    if isinstance(p, Tick):
        return cell.tick(env.event_id, p.seq, now_s)
    if isinstance(p, NodeRegistered):
        event, extra = node_added(env)
        return cell.add_node(event, extra, now_s)
    if isinstance(p, UNHEALTHY_EVENTS):
        return cell.set_health(NodeHealthChanged(env.event_id, p.node_id, False), now_s)
    # Heartbeats, telemetry, link metrics, GPU failures, task start/usage: logged in the
    # input log for replay; the placement core does not act on them yet (issues 6-8).
    return []


def apply(cell: Cell, env: Envelope[Any]) -> list[Envelope[Event]]:
    """Decision envelopes for one input-log envelope (see the module docstring)."""
    return [decision_envelope(cell, env, n, o) for n, o in enumerate(outcomes(cell, env))]


def decision_envelope(cell: Cell, cause: Envelope[Any], n: int,
                      outcome: Outcome) -> Envelope[Event]:
    did = derive_event_id(cause.occurred_at, f"{cause.event_id}/{n}")
    task = outcome.task if isinstance(outcome, Stopped | Placement | Preempted) else (
        outcome.unschedulable.task)
    rec = cell.tasks.get(task)
    spec = rec.spec if rec is not None and rec.spec is not None else {}
    payload: Event
    if isinstance(outcome, Placement):
        uuids = cell.nodes[outcome.node].extra.get("uuids", []) if cell.nodes[
            outcome.node].extra else []
        share = outcome.share_milli or MILLI_PER_GPU
        payload = TaskPlaced(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            node_id=outcome.node,
            gpus=[GpuAssignment(index=g, uuid=uuids[g] if g < len(uuids) else None,
                                share_milli=share) for g in outcome.gpus],
            cpu_milli=outcome.cpu_milli, memory_mib=outcome.memory_mib,
            executor=ExecutorSpec.model_validate(spec["executor"]),
            reason=_reason(outcome.reason),
        )
    elif isinstance(outcome, Refused):
        u = outcome.unschedulable
        code = "unschedulable" if outcome.resolvable else "unschedulable_and_unresolvable"
        payload = TaskUnschedulable(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            resolvable=outcome.resolvable,
            verdicts=[PolicyVerdict(policy=u.verdict.policy, code=code,
                                    reasons=list(u.verdict.reasons), nodes=cell.state.n)],
            nodes_considered=cell.state.n,
            message="queued until capacity frees up" if outcome.resolvable
            else "no node of this cell can ever host the task",
        )
    elif isinstance(outcome, Preempted):
        payload = TaskPreempted(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            node_id=outcome.node, by_task_id=outcome.by_task, requeue=True,
            reason=DecisionReason(code="preempted", message=(
                f"best-effort task stopped for {outcome.by_task}; queued again after "
                f"{outcome.progress_s:.0f} s of progress")))
    else:
        payload = TaskPreempted(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            node_id=outcome.node, requeue=False,
            reason=DecisionReason(code="cancelled", message=outcome.reason),
        )
    corr = spec.get("correlation_id") or cause.correlation_id
    return make_event(payload, source=f"scheduler/{cell.name}", occurred_at=cause.occurred_at,
                      cell=cell.name, causation_id=cause.event_id, correlation_id=corr,
                      event_id=did)


def _reason(reason: Reason | None) -> DecisionReason:
    if reason is None:
        return DecisionReason(code="best_score")
    weights = reason.weights
    return DecisionReason(
        code="best_score",
        message=f"profile {reason.profile}: best of {reason.feasible_nodes} feasible nodes",
        candidates=[
            Candidate(node_id=c.node, gpu_indices=list(c.gpus), score=float(c.total),
                      terms={k: float(v) * float(weights.get(k, 1.0))
                             for k, v in c.terms.items()})
            for c in reason.candidates
        ],
        metrics={"feasible_nodes": float(reason.feasible_nodes)},
    )
