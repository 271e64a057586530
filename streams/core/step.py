"""``step(state, event) -> (state, decisions)``: decide, then evolve (event sourcing).

``decide(state, event, scheduler)`` judges an input against the state and
returns decisions; it never changes the logical state. ``evolve(state, fact)``
applies an accepted input or a decision without re-judging it, so replaying
a recorded log (fold ``evolve`` over inputs and recorded decisions) rebuilds
the state exactly, and re-running ``decide`` at each input checks that the
decisions are reproduced. No I/O, no clock, no unseeded randomness.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.core import gang
from streams.core.decisions import Decision, Placement, Rejected, Released, Unschedulable
from streams.core.events import (
    Event,
    LinkMeasured,
    NodeAdded,
    NodeHealthChanged,
    TaskArrived,
    TaskEnded,
)
from streams.core.policy import Verdict
from streams.core.request import MILLI_PER_GPU, TaskRequest
from streams.core.scheduler import Reason, Scheduler, place
from streams.core.state import ClusterState
from streams.core.topology import Link

MAX_GPUS_PER_NODE = 64


def _id(event_id: str, n: int = 0) -> str:
    return f"{event_id}/{n}"


def decide(state: ClusterState, event: Event, scheduler: Scheduler) -> list[Decision]:
    """Decisions for one input; see the module docstring."""
    if isinstance(event, TaskArrived):
        req = event.request
        if req.task in state.task_slot:
            return [Rejected(_id(event.event_id), event.event_id, f"task {req.task!r} is running")]
        if gang.is_gang(state, req):
            return _decide_gang(state, event, req)
        res = place(state, scheduler, req)
        if res.node < 0:
            verdict = res.verdict or Verdict("unschedulable", ("no feasible node",), "fit")
            return [Unschedulable(_id(event.event_id), event.event_id, req.task, verdict,
                                  res.reason)]
        return [Placement(
            decision_id=_id(event.event_id), cause_id=event.event_id, task=req.task,
            node=state.node_names[res.node], gpus=res.gpus,
            share_milli=req.gpu_milli if res.gpus else 0, cpu_milli=req.cpu_milli,
            memory_mib=req.memory_mib, fractional=req.fractional, reason=res.reason,
        )]
    if isinstance(event, TaskEnded):
        alloc = state.allocation(event.task)
        if alloc is None:
            return [Rejected(_id(event.event_id), event.event_id,
                             f"task {event.task!r} is not running")]
        return [Released(_id(event.event_id), event.event_id, event.task,
                         state.node_names[alloc.node], alloc.gpus)]
    if isinstance(event, NodeAdded):
        problems = []
        if event.node in state.node_index:
            problems.append(f"node {event.node!r} already registered")
        if min(event.cpu_milli, event.memory_mib, event.gpu_count) < 0:
            problems.append("negative capacity")
        if event.gpu_count > MAX_GPUS_PER_NODE:
            problems.append(f"more than {MAX_GPUS_PER_NODE} GPUs")
        if event.gpu_count and not event.gpu_model:
            problems.append("GPUs without a model")
        if problems:
            return [Rejected(_id(event.event_id), event.event_id, "; ".join(problems))]
        return []
    if isinstance(event, NodeHealthChanged):
        if event.node not in state.node_index:
            return [Rejected(_id(event.event_id), event.event_id, f"unknown node {event.node!r}")]
        return []
    if isinstance(event, LinkMeasured):
        if event.scope not in ("node", "rack") or min(event.bandwidth_gbps,
                                                      event.latency_us) < 0:
            return [Rejected(_id(event.event_id), event.event_id, "bad link measurement")]
        return []
    raise TypeError(f"not a core event: {type(event).__name__}")


def _decide_gang(state: ClusterState, event: TaskArrived, req: TaskRequest) -> list[Decision]:
    never = gang.never_fits(state, req)
    found = None if never else gang.plan(state, req)
    if found is None:
        verdict = (Verdict("unschedulable_and_unresolvable", (never,), "gang") if never
                   else Verdict("unschedulable", ("no set of nodes holds the whole gang now",),
                                "gang"))
        return [Unschedulable(_id(event.event_id), event.event_id, req.task, verdict, None)]
    return [gang_placement(state, req, found, _id(event.event_id), event.event_id, None)]


def gang_placement(state: ClusterState, req: TaskRequest, found: gang.GangPlan,
                   decision_id: str, cause_id: str, reason: Reason | None) -> Placement:
    """The one decision that places every member of a gang (rank 0 in node/gpus)."""
    members = tuple((state.node_names[n], g) for n, g in found.members)
    return Placement(decision_id=decision_id, cause_id=cause_id, task=req.task,
                     node=members[0][0], gpus=members[0][1], share_milli=MILLI_PER_GPU,
                     cpu_milli=req.cpu_milli, memory_mib=req.memory_mib, fractional=False,
                     reason=reason, members=members, why=found.why)


def evolve(state: ClusterState, fact: Event | Decision) -> ClusterState:
    """Apply one accepted input or decision (mutates and returns ``state``)."""
    if isinstance(fact, Placement) and fact.members:
        state.allocate_gang(fact.task, fact.cpu_milli, fact.memory_mib,
                            [(state.node_index[n], g) for n, g in fact.members])
    elif isinstance(fact, Placement):
        node = state.node_index[fact.node]
        req = TaskRequest(fact.task, fact.cpu_milli, fact.memory_mib,
                          num_gpu=len(fact.gpus), gpu_milli=fact.share_milli)
        state.allocate(req, node, fact.gpus)
    elif isinstance(fact, Released):
        state.release(fact.task)
    elif isinstance(fact, NodeAdded):
        state.add_node(fact.node, fact.cpu_milli, fact.memory_mib, fact.gpu_count,
                       fact.gpu_model, fact.tiebreak_rank)
        state.topology.add_node(fact.node, fact.rack)
    elif isinstance(fact, NodeHealthChanged):
        state.set_health(state.node_index[fact.node], fact.healthy)
    elif isinstance(fact, TaskArrived):
        state.arrivals += 1
    elif isinstance(fact, LinkMeasured):
        state.topology.set_link(fact.node, fact.peer, fact.scope,
                                Link(fact.bandwidth_gbps, fact.latency_us))
        state.touch_all()  # transfer prices changed: cached scores of every node are stale
    # TaskEnded is applied through its Released decision; Unschedulable/Rejected change nothing.
    return state


def step(state: ClusterState, event: Event,
         scheduler: Scheduler) -> tuple[ClusterState, list[Decision]]:
    """Decide on ``event``, then evolve by it (unless rejected) and by the decisions."""
    decisions = decide(state, event, scheduler)
    if not any(isinstance(d, Rejected) for d in decisions):
        state = evolve(state, event)
    for d in decisions:
        state = evolve(state, d)
    return state, decisions


def replay(state: ClusterState, log: Iterable[Event | Decision]) -> ClusterState:
    """Rebuild a state by folding ``evolve`` over a recorded log of inputs and decisions."""
    for fact in log:
        state = evolve(state, fact)
    return state
