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
    GpuFailed,
    GpuTelemetry,
    LinkMetrics,
    NodeDraining,
    NodeFailed,
    NodeHeartbeat,
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
    TaskSubmitted,
    TaskUnschedulable,
    TaskUsage,
    TaskUsageV2,
    Tick,
    make_event,
    message_model,
)
from schemas.events.decisions import NOT_PLACED_HERE, TASK_ID_IN_USE
from schemas.ids import derive_event_id
from schemas.signing import Refusal
from streams.core.adapt import engine as adapt
from streams.core.adapt.outcomes import Evicted, Migrated, Probed, Resized
from streams.core.adapt.probe import command_key
from streams.core.cell import Cell, Outcome, Preempted, Refused, ReportRefused, TaskIdTaken
from streams.core.decisions import Placement
from streams.core.engine_version import ENGINE_MARK, ENGINE_VERSION
from streams.core.events import LinkMeasured, NodeAdded, TaskArrived, TaskEnded
from streams.core.queue import PREDICTING_MARK, TaskMeta
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import Reason


def _message_cls(payload_cls: type[Event]) -> type[Envelope[Event]]:
    cls = message_model(payload_cls.EVENT_TYPE, payload_cls.EVENT_VERSION)
    assert cls is not None, payload_cls
    return cls


_MESSAGE = {cls: _message_cls(cls) for cls in (TaskPlaced, TaskPlacedV2, TaskUnschedulable)}
"""Message model (envelope + payload) of the decisions built as one document."""

ADAPT_EVENTS = (NodeHeartbeat, NodeDraining, NodeFailed, NodeLeft, GpuFailed, GpuTelemetry,
                TaskUsage)
RUN_OUTCOMES = (Placement, Probed, Resized, Migrated)
"""Outcomes after which the executor runs the task under the decision's id (issue 8)."""


def task_facts(payload: TaskSubmitted) -> dict[str, Any]:
    """What adaptation needs of a submission, kept in the task's spec (issue 8)."""
    e, f, x = payload.elastic, payload.features, payload.executor
    return {"qos": payload.qos, "cmd": command_key(payload.tenant, x.argv, x.image),
            "elastic": [e.min_gpus, e.max_gpus] if e else None, "kind": f.profile,
            "dur": f.expected_duration_s, "gpu_mem": payload.resources.gpu_memory_mib}


def task_request(payload: TaskSubmitted) -> TaskRequest:
    """The core's view of a submission (raises ValueError if the core refuses it)."""
    r = payload.resources
    located = [i.location for i in payload.inputs if i.location]
    return TaskRequest(
        task=payload.task_id, cpu_milli=r.cpu_milli, memory_mib=r.memory_mib,
        num_gpu=r.gpu_count, gpu_milli=r.gpu_share_milli if r.gpu_count else 0,
        gpu_models=tuple(r.gpu_models), input_node=located[0] if located else None,
        nodes=getattr(r, "nodes", None) or 0, gpus_per_node=getattr(r, "gpus_per_node", None) or 0,
        mixed_models=getattr(r, "mixed_models", False),
    )


def task_meta(payload: TaskSubmitted) -> TaskMeta:
    """What the queue needs beyond the shape: tenant, priority, QoS, runtime, dependencies,
    and the job's name (version 3), by which past runs predict the next one's."""
    return TaskMeta(tenant=payload.tenant, priority=payload.priority, qos=payload.qos,
                    expected_s=payload.features.expected_duration_s,
                    depends_on=tuple(payload.depends_on),
                    task_class=payload.features.profile or "",
                    name=getattr(payload, "job_name", None) or "")


def node_added(env: Envelope[Any]) -> tuple[NodeAdded, dict[str, Any]]:
    """The core's view of a registration; GPU model = the first GPU's (one model per node)."""
    p: NodeRegistered = env.payload
    gpus = sorted(p.gpus, key=lambda g: g.index)
    event = NodeAdded(env.event_id, p.node_id, p.cpu_milli, p.memory_mib, len(gpus),
                      gpus[0].model if gpus else None, rack=p.rack)
    extra = {"uuids": [g.uuid for g in gpus], "pool": p.pool}
    return event, extra


def outcomes(cell: Cell, env: Envelope[Any]) -> list[Outcome]:
    """Step ``cell`` by one input-log envelope (inputs that decide nothing yet: [])."""
    p = env.payload
    now_s = env.occurred_at.timestamp()
    if type(p) is GpuTelemetry:  # most of the input log (issue 11): straight to its step
        cell._at(now_s)
        steps = _telemetry(cell, env.event_id, p, now_s)
        return adapt.finish(cell, steps, now_s) if steps else steps
    if isinstance(p, TaskSubmitted):
        taken = cell.answer_taken_id(env.event_id, p.task_id, p.tenant)
        if taken is not None:
            return taken  # before anything of the submission touches the cell
        try:
            req = task_request(p)
            meta = task_meta(p)
        except ValueError:
            return []
        facts = task_facts(p)
        spec = {"executor": p.executor.model_dump(mode="json"),
                "correlation_id": env.correlation_id or env.event_id, "adapt": facts}
        req = adapt.prepare_submit(cell, req, facts)
        return adapt.finish(cell, cell.submit(TaskArrived(env.event_id, req), spec, meta, now_s),
                            now_s)
    if isinstance(p, TaskFailed) and p.reason == "killed" and adapt.is_kill_report(
            cell, p.task_id, p.decision_id):
        cell.ack_preempted(p.task_id)
        return []  # the executor confirms a preemption: the task is already queued again
    if isinstance(p, TaskFinished | TaskFailed) and adapt.is_stale(cell, p.task_id,
                                                                   p.decision_id):
        return []  # about a run the cell stopped or replaced (moved, re-placed after a failure)
    if isinstance(p, TaskFinished | TaskFailed):
        # Only the node the task runs on ends it, about that run (docs/security.md).
        refused = cell.refuse_report(p.task_id, p.node_id, p.decision_id, _run_of(cell, p.task_id))
        if refused is not None:
            return refused
    if isinstance(p, TaskFailed) and p.reason in adapt.RETRYABLE_FAILURES:
        return adapt.finish(cell, adapt.on_run_lost(cell, env.event_id, p.task_id, p.reason,
                                                     now_s), now_s)
    if isinstance(p, TaskFinished):
        adapt.on_task_end(cell, p.task_id, p.runtime_s)
    # A finish frees capacity and may place queued work: those placements pass
    # adapt.finish like any other, so a queued probe starts its window (issue 8).
    if isinstance(p, TaskFinished | TaskFailed):
        return adapt.finish(cell, cell.end(TaskEnded(env.event_id, p.task_id), now_s=now_s,
                                           failed=isinstance(p, TaskFailed)), now_s)
    if isinstance(p, TaskCancelled):
        return adapt.finish(cell, cell.end(TaskEnded(env.event_id, p.task_id, cancelled=True),
                                           p.reason, now_s), now_s)
    if isinstance(p, Tick):
        return adapt.on_tick(cell, env.event_id, p.seq, now_s)
    if isinstance(p, NodeRegistered):
        event, extra = node_added(env)
        out = cell.add_node(event, extra, now_s)
        adapt.on_registered(cell, p.node_id, now_s, p.agent_version is not None)
        return adapt.finish(cell, out, now_s)
    if isinstance(p, ADAPT_EVENTS):
        cell._at(now_s)  # event time is the cell's only clock
        return adapt.finish(cell, _adapt_outcomes(cell, env.event_id, p, now_s), now_s)
    if isinstance(p, LinkMetrics):
        return cell.link(LinkMeasured(env.event_id, p.node_id, p.peer_id, p.scope,
                                      p.bandwidth_gbps, p.latency_us), now_s)
    # Task start: logged in the input log for replay; nothing to decide.
    return []


def _run_of(cell: Cell, task: str) -> str | None:
    """The decision id of ``task``'s current run (``_note_runs``), None when not known."""
    rec = cell.tasks.get(task)
    spec = rec.spec if rec is not None else None
    run = spec.get("run") if isinstance(spec, dict) else None
    return run if isinstance(run, str) else None


def _adapt_outcomes(cell: Cell, cause: str, p: Any, now_s: float) -> list[Outcome]:
    """Node lifecycle, GPU health and usage events -> the adaptation engine (issue 8)."""
    if isinstance(p, NodeHeartbeat):
        return adapt.on_heartbeat(cell, cause, p.node_id, now_s, list(p.running_task_ids))
    if isinstance(p, NodeDraining):
        return adapt.on_draining(cell, cause, p.node_id, now_s)
    if isinstance(p, NodeFailed | NodeLeft):
        code = "node_left" if isinstance(p, NodeLeft) else f"node_failed_{p.reason}"
        return adapt.on_node_down(cell, cause, p.node_id, code)
    if isinstance(p, GpuFailed):
        return adapt.on_gpu_failed(cell, cause, p.node_id, p.gpu_index, p.reason)
    if isinstance(p, GpuTelemetry):
        return _telemetry(cell, cause, p, now_s)
    assert isinstance(p, TaskUsage)
    if isinstance(p, TaskUsageV2) and p.progress is not None and p.progress.rate_per_s:
        cell.report_progress(p.task_id, p.node_id, p.progress.rate_per_s, now_s)
    return adapt.on_usage(cell, cause, p.task_id, p.node_id, now_s,
                          [(g.gpu_index, g.gpu_util_pct, g.mem_used_mib) for g in p.gpus])


DecisionDocument = tuple[type[Envelope[Event]], dict[str, Any]]
"""A placed or unschedulable decision before validation: its message model and the
whole envelope document ``model_validate`` takes (see :func:`decision_document`)."""

Decided = Envelope[Event] | DecisionDocument
"""One decision of :func:`apply_documents`: an envelope, or a document not yet validated."""


def _telemetry(cell: Cell, cause: str, p: GpuTelemetry, now_s: float) -> list[Outcome]:
    # The payload's lists go in as they are: the step only reads them.
    return adapt.on_telemetry(
        cell, cause, p.node_id, p.gpu_index, now_s, temperature_c=p.temperature_c,
        throttle=p.throttle_reasons, mem_used_mib=p.mem_used_mib,
        mem_util_pct=p.mem_util_pct, xids=p.xid_errors, ecc_dbe=p.ecc_dbe_total,
        foreign_mem_mib=p.foreign_mem_mib)


def apply(cell: Cell, env: Envelope[Any]) -> list[Envelope[Event]]:
    """Decision envelopes for one input-log envelope (see the module docstring)."""
    steps = outcomes(cell, env)
    if not steps:
        return []  # most inputs (telemetry, heartbeats) decide nothing
    out = [decision_envelope(cell, env, n, o) for n, o in enumerate(steps)]
    _note_runs(cell, steps, [d.event_id for d in out], outcomes_of(out))
    return out


def apply_documents(cell: Cell, env: Envelope[Any]) -> list[Decided]:
    """:func:`apply` with the placed and unschedulable decisions left as documents.

    The same step and the same documents; only their validation is left to the
    caller (:func:`validated`). Audit replay uses it to skip validating a decision
    whose canonical bytes already equal the recorded ones
    (``streams.audit.canonical``).
    """
    steps = outcomes(cell, env)
    out = [decision_document(cell, env, n, o) for n, o in enumerate(steps)]
    _note_runs(cell, steps, [_event_id(d) for d in out], [_run_task(d) for d in out])
    return out


def validated(decided: Decided) -> Envelope[Event]:
    """The envelope of one of :func:`apply_documents`'s decisions (what :func:`apply` gives)."""
    if isinstance(decided, tuple):
        message_cls, doc = decided
        return message_cls.model_validate(doc)
    return decided


def _event_id(decided: Decided) -> str:
    return decided[1]["event_id"] if isinstance(decided, tuple) else decided.event_id


def _run_task(decided: Decided) -> str | None:
    if isinstance(decided, tuple):
        message_cls, doc = decided
        placed = message_cls is _MESSAGE[TaskPlaced] or message_cls is _MESSAGE[TaskPlacedV2]
        return doc["payload"]["task_id"] if placed else None
    return outcomes_of([decided])[0]


def _note_runs(cell: Cell, steps: list[Outcome], event_ids: list[str],
               runs: list[str | None]) -> None:
    """After a step: each (re)started task's run id, each preempted task's kill id.

    In decision order: one input may preempt a task and place it again elsewhere (it
    was queued again and fits now), and only the run started last is current. Noting
    every run first and every preemption after marked that new run stale, and the
    service then ignored its finish: the task stayed running and its GPUs stayed booked
    (found by tests/timesched/test_service_sim_same.py)."""
    for step, event_id, task in zip(steps, event_ids, runs, strict=True):
        if isinstance(step, Preempted) and (rec := cell.tasks.get(step.task)) is not None:
            adapt.on_preempted(rec, event_id)  # its kill report is known by this id
        elif task is not None:
            rec = cell.tasks.get(task)
            if rec is not None and isinstance(rec.spec, dict):
                rec.spec["run"] = event_id  # the executor's run id: stale reports differ


def outcomes_of(decisions: list[Envelope[Event]]) -> list[str | None]:
    """The task each decision (re)starts under its own id, or None."""
    return [d.payload.task_id if isinstance(d.payload, TaskPlaced | TaskProbe | TaskResized
                                                    | TaskMigrating) else None
            for d in decisions]


def decision_envelope(cell: Cell, cause: Envelope[Any], n: int,
                      outcome: Outcome) -> Envelope[Event]:
    """The decision envelope of ``outcome``, the ``n``-th decision caused by ``cause``."""
    return validated(decision_document(cell, cause, n, outcome))


def decision_document(cell: Cell, cause: Envelope[Any], n: int, outcome: Outcome) -> Decided:
    """:func:`decision_envelope`, with a placed or unschedulable decision left unvalidated."""
    did = derive_event_id(cause.occurred_at, f"{cause.event_id}/{n}")
    task = outcome.unschedulable.task if isinstance(outcome, Refused) else outcome.task
    rec = cell.tasks.get(task)
    spec = rec.spec if rec is not None and rec.spec is not None else {}
    corr = spec.get("correlation_id") or cause.correlation_id
    if isinstance(outcome, TaskIdTaken):
        # The rejected submission's own chain: the task holding the id is another's.
        corr = cause.correlation_id or cause.event_id
    elif isinstance(outcome, ReportRefused):
        # A chain of its own: a report names the chain of the task it claims to end, and
        # ``submit --wait`` takes a TaskRejected in its task's chain for its refusal.
        corr = cause.event_id
    doc: dict[str, Any] | None = None
    payload: Event
    if isinstance(outcome, Placement):
        share = outcome.share_milli or MILLI_PER_GPU
        doc = {
            "decision_id": did, "cause_event_id": cause.event_id, "task_id": task,
            "node_id": outcome.node,
            "gpus": _gpu_docs(cell, outcome.node, outcome.gpus, share),
            "cpu_milli": outcome.cpu_milli, "memory_mib": outcome.memory_mib,
            "executor": spec["executor"], "reason": _reason_doc(outcome.reason),
        }
        if outcome.members:
            doc["members"] = [{"rank": r, "node_id": node,
                               "gpus": _gpu_docs(cell, node, gpus, MILLI_PER_GPU)}
                              for r, (node, gpus) in enumerate(outcome.members)]
            doc["reason"] = {"code": "gang_placed", "message": outcome.why,
                             "metrics": {"members": float(len(outcome.members))}}
        if outcome.speed_vs_fastest is not None:
            reason = doc["reason"]
            reason["message"] = "; ".join(filter(None, (reason.get("message"),
                                                         outcome.speed)))
            reason.setdefault("metrics", {})["speed_vs_fastest"] = outcome.speed_vs_fastest
        if outcome.predicted_s is not None:
            reason = doc["reason"]
            reason["message"] = "; ".join(filter(None, (reason.get("message"),
                                                         outcome.prediction)))
            reason.setdefault("metrics", {})["predicted_s"] = outcome.predicted_s
        metrics = doc["reason"].setdefault("metrics", {})
        if cell.config.predict_runtimes:  # replay reads the queue setting from the log
            metrics[PREDICTING_MARK] = 1.0
        metrics[ENGINE_MARK] = float(ENGINE_VERSION)  # and the rules it was decided by
    elif isinstance(outcome, Refused):
        u = outcome.unschedulable
        code = "unschedulable" if outcome.resolvable else "unschedulable_and_unresolvable"
        doc = {
            "decision_id": did, "cause_event_id": cause.event_id, "task_id": task,
            "resolvable": outcome.resolvable,
            "verdicts": [{"policy": u.verdict.policy, "code": code,
                          "reasons": list(u.verdict.reasons), "nodes": cell.state.n}],
            "nodes_considered": cell.state.n,
            "message": "queued until capacity frees up" if outcome.resolvable
            else "no node of this cell can ever host the task",
        }
    elif isinstance(outcome, TaskIdTaken):
        payload = TaskRejected(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            reason=DecisionReason(code=TASK_ID_IN_USE, message=outcome.message))
    elif isinstance(outcome, ReportRefused):
        payload = TaskRejected(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            reason=DecisionReason(code=NOT_PLACED_HERE, message=_refused_message(
                cause.type, outcome)))
    elif isinstance(outcome, Probed | Resized | Migrated | Evicted):
        payload = _adapt_payload(cell, cause.event_id, did, spec, outcome)
    elif isinstance(outcome, Preempted):
        payload = TaskPreempted(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            node_id=outcome.node, by_task_id=outcome.by_task, requeue=True,
            reason=DecisionReason(code="preempted", message=(
                f"{outcome.why or 'best-effort task stopped for ' + outcome.by_task}; queued "
                f"again after "
                f"{outcome.progress_s:.0f} s of progress")))
    else:
        payload = TaskPreempted(
            decision_id=did, cause_event_id=cause.event_id, task_id=task,
            node_id=outcome.node, requeue=False,
            reason=DecisionReason(code="cancelled", message=outcome.reason),
        )
    if doc is not None:
        # The hot decisions (placed, unschedulable) are validated (``validated``) as one
        # nested document in a single pydantic-core call: the same validators and the
        # same model as building each part with its constructor, a fraction of the cost.
        payload_cls = (TaskUnschedulable if not isinstance(outcome, Placement)
                       else TaskPlacedV2 if outcome.members else TaskPlaced)
        return _MESSAGE[payload_cls], {
            "event_id": did, "type": payload_cls.EVENT_TYPE, "version": payload_cls.EVENT_VERSION,
            "source": f"scheduler/{cell.name}", "occurred_at": cause.occurred_at,
            "cell": cell.name, "causation_id": cause.event_id, "correlation_id": corr,
            "payload": doc}
    return make_event(payload, source=f"scheduler/{cell.name}", occurred_at=cause.occurred_at,
                      cell=cell.name, causation_id=cause.event_id, correlation_id=corr,
                      event_id=did)


def _refused_message(kind: str, outcome: ReportRefused) -> str:
    """What every node reading the decisions learns of a refused report: the task and
    the reporting node, never where the task is placed (that is for the dead letter)."""
    why = ("it names no decision of the task's placement"
           if outcome.node is not None and outcome.node == outcome.placed_on
           else f"the task is not placed on {outcome.node}")
    return f"{kind} of task {outcome.task} from node {outcome.node} ignored: {why}"


def refused_report(cell: Cell, decision: Envelope[Event], report: Envelope[Any]
                   ) -> Refusal | None:
    """For a decision just made of ``report``: the refusal the worker dead-letters the
    report with when the decision refused it (``not_placed_here``), else None.

    Unlike the decision, the dead letter (read by operators only) says where the task
    is placed and under which decision; the refusal left the cell as it was, so the
    cell tells it now.
    """
    p = decision.payload
    if not (isinstance(p, TaskRejected) and p.reason.code == NOT_PLACED_HERE):
        return None
    rec = cell.tasks.get(p.task_id)
    placed = (f"placed on node {rec.node} by decision {_run_of(cell, p.task_id)}"
              if rec is not None and rec.node is not None else "placed on no node")
    node = getattr(report.payload, "node_id", None)
    return Refusal(NOT_PLACED_HERE,
                   f"node {node} reported {report.type} of task {p.task_id} "
                   f"(decision {getattr(report.payload, 'decision_id', None)}), which is "
                   f"{placed}", "payload.node_id", None if node is None else str(node))


def _gpus(cell: Cell, node: str, gpus: tuple[int, ...], share: int) -> list[GpuAssignment]:
    extra = cell.nodes[node].extra if node in cell.nodes else None
    uuids = extra.get("uuids", []) if isinstance(extra, dict) else []
    return [GpuAssignment(index=g, uuid=uuids[g] if g < len(uuids) else None,
                          share_milli=share or MILLI_PER_GPU) for g in gpus]


def _adapt_payload(cell: Cell, cause: str, did: str, spec: dict[str, Any],
                   o: Probed | Resized | Migrated | Evicted) -> Event:
    """The schema decision of an adaptation outcome (issue 8)."""
    if isinstance(o, Probed):
        pl = o.placement
        return TaskProbe(
            decision_id=did, cause_event_id=cause, task_id=o.task, node_id=pl.node,
            gpus=_gpus(cell, pl.node, pl.gpus, pl.share_milli), cpu_milli=pl.cpu_milli,
            memory_mib=pl.memory_mib, probe_duration_s=o.duration_s,
            executor=ExecutorSpec.model_validate(spec["executor"]),
            reason=_reason(pl.reason).model_copy(update={
                "code": "probe", "message": "features unknown: probing on a small allocation"}))
    if isinstance(o, Resized):
        return TaskResized(
            decision_id=did, cause_event_id=cause, task_id=o.task, node_id=o.node,
            gpus=_gpus(cell, o.node, o.gpus, o.share_milli), direction=o.direction,  # type: ignore[arg-type]
            reason=DecisionReason(code=o.code, metrics=dict(o.metrics)))
    if isinstance(o, Migrated):
        return TaskMigrating(
            decision_id=did, cause_event_id=cause, task_id=o.task, from_node_id=o.from_node,
            from_gpus=_gpus(cell, o.from_node, o.from_gpus, o.share_milli),
            to_node_id=o.to_node, to_gpus=_gpus(cell, o.to_node, o.to_gpus, o.share_milli),
            executor=ExecutorSpec.model_validate(spec["executor"]),
            reason=DecisionReason(code=o.code, message=o.message, metrics=dict(o.metrics)))
    return TaskPreempted(
        decision_id=did, cause_event_id=cause, task_id=o.task, node_id=o.node,
        requeue=o.requeue, reason=DecisionReason(code=o.code, message=o.message))


def _gpu_docs(cell: Cell, node: str, gpus: tuple[int, ...], share: int) -> list[dict[str, Any]]:
    """``GpuAssignment`` documents of ``gpus`` on ``node``, with the UUIDs it registered."""
    extra = cell.nodes[node].extra
    uuids = extra.get("uuids", []) if extra else []
    return [{"index": g, "uuid": uuids[g] if g < len(uuids) else None, "share_milli": share}
            for g in gpus]


def _reason_doc(reason: Reason | None) -> dict[str, Any]:
    """``_reason`` as the plain document ``DecisionReason.model_validate`` takes."""
    if reason is None:
        return {"code": "best_score"}
    weights = reason.weights
    return {
        "code": "best_score",
        "message": f"profile {reason.profile}: best of {reason.feasible_nodes} feasible nodes",
        "candidates": [
            {"node_id": c.node, "gpu_indices": list(c.gpus), "score": float(c.total),
             "terms": {k: float(v) * float(weights.get(k, 1.0)) for k, v in c.terms.items()}}
            for c in reason.candidates
        ],
        "metrics": {"feasible_nodes": float(reason.feasible_nodes)},
    }


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
