"""The decisions-topic checks the recovery tests rely on, on hand-made decisions.

``check_decisions`` claims at most one decision per submission; a check that built
its count and never asserted it let a submission decided twice (a worker that
restarts and decides its in-flight input again under new ids) pass.
"""

from __future__ import annotations

from typing import Any

import pytest
from service_builders import at, finished, task
from service_checks import check_decisions

from schemas.codec import encode
from schemas.events import (
    DecisionReason,
    GpuAssignment,
    PolicyVerdict,
    TaskPlaced,
    TaskUnschedulable,
    make_event,
)
from schemas.ids import derive_event_id

EXECUTOR = {"kind": "simulated", "simulated": {"duration_s": 1.0, "gpu_util_pct": 50.0,
                                                "gpu_mem_used_mib": 1024}}


def _decision(cause: Any, payload_kind: type, n: int, **fields: Any) -> bytes:
    did = derive_event_id(at(0), f"{cause.event_id}/{n}")
    payload = payload_kind(decision_id=did, cause_event_id=cause.event_id, **fields)
    return encode(make_event(payload, source="scheduler/cell-0", occurred_at=at(0),
                             cell="cell-0", causation_id=cause.event_id, event_id=did))


def _placed(cause: Any, task_id: str, n: int = 0, gpu: int = 0) -> bytes:
    return _decision(cause, TaskPlaced, n, task_id=task_id, node_id="node-0",
                     gpus=[GpuAssignment(index=gpu)], executor=EXECUTOR,
                     reason=DecisionReason(code="test"))


def _waits(cause: Any, task_id: str, n: int = 0) -> bytes:
    return _decision(cause, TaskUnschedulable, n, task_id=task_id, resolvable=True,
                     verdicts=[PolicyVerdict(policy="fit", code="unschedulable",
                                             reasons=["no free GPU"])])


def test_a_submission_decided_once_and_placed_later_by_another_cause_passes() -> None:
    a, b = task("a", 1), task("b", 1)
    done = finished("a", "node-0", "0" * 26)
    raw = [_placed(a, "a"), _waits(b, "b"), _placed(done, "b", gpu=1)]
    assert set(check_decisions(raw, [a, b])) == {"a", "b"}


def test_a_submission_decided_twice_is_reported() -> None:
    a = task("a", 1)
    raw = [_waits(a, "a", n=0), _placed(a, "a", n=1)]
    with pytest.raises(AssertionError, match="a submission was decided more than once"):
        check_decisions(raw, [a])


def test_decisions_that_name_no_submission_as_their_cause_are_reported() -> None:
    a, other = task("a", 1), task("a", 1, seed="other run/")
    with pytest.raises(AssertionError, match="no decision names its task's submission"):
        check_decisions([_placed(other, "a")], [a])
