"""What one record of a task's story says, as ``explain`` prints it: a summary line and
the lines of its reason.

Works on raw JSON payloads, like ``explain``: every shape the schemas allow (a
failure's ``reason`` is a code string, a decision's is an object; a usage
report's GPUs carry ``gpu_index``, a placement's ``index``; optional fields are
absent or null) and, without raising, shapes this build does not know (a newer
version's record, a field of another type). Explaining is what an operator
reaches for when something went wrong, so it must not fail on the records of
exactly those tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Payload = dict[str, Any]


def _field(p: Payload, name: str, default: Any = "") -> Any:
    """``p[name]``, or ``default`` when absent or null."""
    value = p.get(name)
    return default if value is None else value


def _dicts(value: Any) -> list[Payload]:
    """The objects of a list field (none when it is not a list)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _assigned(gpus: Any) -> str:
    """A decision's GPUs (``GpuAssignment``: ``index``, share in milli)."""
    return ",".join(f"{_field(g, 'index', '?')}({_field(g, 'share_milli', 1000)}m)"
                    for g in _dicts(gpus))


def _placed(p: Payload) -> str:
    members = p.get("members")
    if isinstance(members, list) and members:  # a gang (TaskPlaced v2): every member
        parts = [f"rank {_field(m, 'rank', '?')} on {_field(m, 'node_id', '?')} GPUs "
                 f"[{_assigned(m.get('gpus'))}]" for m in members if isinstance(m, dict)]
        return (f"gang of {len(members)} members: {'; '.join(parts)}; "
                f"cpu {_field(p, 'cpu_milli', '-')}m on each")
    return (f"on {_field(p, 'node_id', '?')} GPUs [{_assigned(p.get('gpus'))}] "
            f"cpu {_field(p, 'cpu_milli', '-')}m")


def _probe(p: Payload) -> str:
    return f"{_placed(p)} for {_field(p, 'probe_duration_s', '?')} s"


def _resized(p: Payload) -> str:
    return f"{_field(p, 'direction', '?')}: on {_field(p, 'node_id', '?')} GPUs " \
           f"[{_assigned(p.get('gpus'))}]"


def _migrating(p: Payload) -> str:
    return (f"{_field(p, 'from_node_id', '?')} [{_assigned(p.get('from_gpus'))}] -> "
            f"{_field(p, 'to_node_id', '?')} [{_assigned(p.get('to_gpus'))}]")


def _preempted(p: Payload) -> str:
    by_task = p.get("by_task_id")
    # A task stopped "for itself" is moving to another GPU model (streams.core.cell).
    by = ("" if not by_task else " to move" if by_task == p.get("task_id")
          else f" for {by_task}")
    then = "back to the queue" if _field(p, "requeue", True) else "not requeued"
    return f"on {_field(p, 'node_id', '?')}{by}, {then}"


def _unschedulable(p: Payload) -> str:
    how = "waits in the queue" if p.get("resolvable") else "can never run in this cell"
    return f"{how}; {_field(p, 'nodes_considered', 0)} nodes considered"


def _rejected(p: Payload) -> str:
    reason = p.get("reason")
    if isinstance(reason, dict) and reason.get("code") == "not_placed_here":
        return "this status report is ignored: the task is not placed on its node"
    return "this submission is ignored: its task id is in use"


def _submitted(p: Payload) -> str:
    r = p.get("resources")
    r = r if isinstance(r, dict) else {}
    return (f"tenant {_field(p, 'tenant', '?')} asks {_field(r, 'gpu_count', 0)} GPU x "
            f"{_field(r, 'gpu_share_milli', 1000)}m models {r.get('gpu_models') or 'any'}")


def _started(p: Payload) -> str:
    indices = p.get("gpu_indices")
    gpus = ",".join(map(str, indices)) if isinstance(indices, list) else ""
    return f"on {_field(p, 'node_id', '?')} GPUs [{gpus}]"


def _usage(p: Payload) -> str:
    """A usage report's GPUs (``GpuUsage``: ``gpu_index``, utilisation, memory)."""
    gpus = ", ".join(f"{_field(g, 'gpu_index', '?')}: {_field(g, 'gpu_util_pct', '?')} % "
                     f"{_field(g, 'mem_used_mib', '?')} MiB" for g in _dicts(p.get("gpus")))
    window = _number(p.get("window_s"))
    over = f" over {window:.3g} s" if window is not None else ""
    return f"on {_field(p, 'node_id', '?')}{over}: GPUs [{gpus}]{_progress(p.get('progress'))}"


def _progress(progress: object) -> str:
    """A version 2 usage report's progress (the task's own count and its rate)."""
    if not isinstance(progress, dict):
        return ""
    units, rate = _number(progress.get("units")), _number(progress.get("rate_per_s"))
    if units is None:
        return ""
    pace = f" at {rate:.4g}/s" if rate is not None else ""
    return f"; progress {units:.6g} units{pace}"


def _over_use(p: Payload) -> str:
    return (f"on {_field(p, 'node_id', '?')} GPU {_field(p, 'gpu_index', '?')}: "
            f"{_field(p, 'observed_mib', '?')} MiB used, {_field(p, 'booked_mib', '?')} MiB "
            "booked")


def _finished(p: Payload) -> str:
    runtime = _number(p.get("runtime_s"))
    took = f" after {runtime:g} s" if runtime is not None else ""
    return f"on {_field(p, 'node_id', '?')}{took}, exit {_field(p, 'exit_code', 0)}"


def _failed(p: Payload) -> str:
    """A failure's node and run may be null (a launch that never ran); its ``reason``
    (a code string, not an object) is the line under it."""
    node = p.get("node_id")
    where = f"on {node}" if node else "on no node"
    exit_code = p.get("exit_code")
    code = f", exit {exit_code}" if exit_code is not None else ""
    retry = ", retryable" if p.get("retryable") else ""
    return f"{where}{code}{retry}"


def _cancelled(p: Payload) -> str:
    by = p.get("requested_by")
    return f"by {by}" if by else ""


def _default(p: Payload) -> str:
    node = p.get("node_id")
    return f"on {node}" if node else ""


SUMMARIES: dict[str, Callable[[Payload], str]] = {
    "TaskPlaced": _placed, "TaskProbe": _probe, "TaskResized": _resized,
    "TaskMigrating": _migrating, "TaskPreempted": _preempted,
    "TaskUnschedulable": _unschedulable, "TaskSubmitted": _submitted,
    "TaskStarted": _started, "TaskUsage": _usage, "TaskOverUse": _over_use,
    "TaskFinished": _finished, "TaskFailed": _failed, "TaskCancelled": _cancelled,
    "TaskRejected": _rejected,
}
"""One summary per record type that names a task; any other type: its node, if any."""


def summary(event_type: Any, p: Payload) -> str:
    """One line on what the record says (never raises, whatever the payload's shape)."""
    describe = SUMMARIES.get(event_type, _default) if isinstance(event_type, str) else _default
    try:
        return describe(p)
    except (TypeError, ValueError, AttributeError):  # a field of a type no schema gives it
        return _default(p)


def reason_lines(p: Payload, top: int) -> list[str]:
    """The lines under the summary: the policies' verdicts; the reason, a decision's
    object (code, sentence, candidates) or a failure's code or a cancellation's text;
    and the message a failure or an unschedulable decision carries."""
    out = [f"    {_field(v, 'policy', '?')}: {_field(v, 'code', '?')}: "
           f"{'; '.join(map(str, _field(v, 'reasons', [])))}" for v in _dicts(p.get("verdicts"))]
    reason = p.get("reason")
    if isinstance(reason, dict):
        if reason.get("message"):
            out.append(f"    reason: {_field(reason, 'code', '?')}: {reason['message']}")
        out += _candidates(_dicts(reason.get("candidates")), top)
    elif isinstance(reason, str) and reason:
        out.append(f"    reason: {reason}")
    message = p.get("message")
    if isinstance(message, str) and message:
        out.append(f"    message: {message}")
    return out


def _candidates(cands: list[Payload], top: int) -> list[str]:
    """The table of the candidates the policies compared, best first."""
    if not cands:
        return []
    if top == 0:
        return [f"      {len(cands)} candidates (--top to list them)"]
    terms = sorted({str(t) for c in cands if isinstance(c.get("terms"), dict)
                    for t in c["terms"]})
    head = ["node", "GPUs", "score", *terms]
    table = [[str(_field(c, "node_id", "?")), _indices(c.get("gpu_indices")),
              _fixed(c.get("score")), *(_fixed(_terms(c).get(t, 0.0)) for t in terms)]
             for c in cands[:top]]
    widths = [max(len(r[i]) for r in [head, *table]) for i in range(len(head))]
    out = ["      " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True))
           for r in [head, *table]]
    if len(cands) > top:
        out.append(f"      ... {len(cands) - top} more candidates")
    return out


def _terms(c: Payload) -> dict[str, Any]:
    terms = c.get("terms")
    return terms if isinstance(terms, dict) else {}


def _indices(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else ""


def _fixed(value: Any) -> str:
    number = _number(value)
    return f"{number:.4f}" if number is not None else "?"
