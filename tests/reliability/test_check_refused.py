"""``check`` counts a dead-lettered submission as refused, with its reason, not as lost.

The router dead-letters a submission that claims another tenant, is unsigned, comes
from an unknown principal or does not validate; it never reaches a cell's log, and
``check --settled`` (reading submissions, reports, the log and the decisions) called
it ``task_lost``. Now check reads the dead-letter topic too: such a task is
``refused``, counted by reason, and ``task_lost`` means lost.
"""

from __future__ import annotations

import base64

from reliability_builders import PREFIX, append, event

from schemas.codec import encode, encode_deadletter
from schemas.deadletter import DeadLetter, FieldError
from schemas.events import TaskSubmitted
from schemas.signing import Refusal
from schemas.topics import DEADLETTER, INPUT_LOG, TASKS
from streams.audit.records import Record
from streams.check import findings as f
from streams.check.invariants import CHECKED_TOPICS, check

EXECUTOR = {"kind": "simulated", "simulated": {"duration_s": 1.0, "gpu_util_pct": 50.0,
                                                "gpu_mem_used_mib": 100}}


def _submission(task: str, tenant: str) -> TaskSubmitted:
    return TaskSubmitted.model_validate({"task_id": task, "tenant": tenant,
                                         "resources": {"gpu_count": 1}, "executor": EXECUTOR})


def _letter(records: list[Record], letter: DeadLetter) -> None:
    offset = sum(r.topic == PREFIX + DEADLETTER for r in records)
    records.append(Record(PREFIX + DEADLETTER, 0, offset, None, None,
                          encode_deadletter(letter)))


def test_a_dead_lettered_submission_is_refused_with_its_reason_not_lost() -> None:
    records: list[Record] = []
    forged = event(_submission("forged-1", "nlp"), "forged", cell=None)
    append(records, TASKS, forged)
    raw = encode(forged)
    _letter(records, Refusal("tenant_forged", "principal 'alice' submits for tenant "
                             "'vision', message claims 'nlp'", "payload.tenant", "nlp")
            .dead_letter(raw, topic=PREFIX + TASKS, event_type=forged.type,
                         event_id=forged.event_id))
    # A body that does not validate: the checker cannot read the submission either.
    bad = b'{"type":"TaskSubmitted","version":1,"payload":{"task_id":"bad-1","tenant":7}}'
    records.append(Record(PREFIX + TASKS, 0, 1, None, None, bad))
    _letter(records, DeadLetter(reason="validation_failed", message="payload invalid",
                                errors=[FieldError(field="payload.tenant", value=7,
                                                   error="Input should be a valid string")],
                                source_topic=PREFIX + TASKS,
                                original_b64=base64.b64encode(bad).decode()))
    # A submission that was logged and never decided is still lost.
    lost = event(_submission("lost-1", "vision"), "lost")
    append(records, TASKS, lost.model_copy(update={"cell": None}))
    append(records, INPUT_LOG, lost)

    report = check(records, PREFIX, settled=True)
    assert report.task_states == {"forged-1": "refused", "lost-1": "lost", "bad-1": "refused"}
    assert dict(report.refused_reasons) == {"tenant_forged": 1,
                                            "validation_failed (payload.tenant)": 1}
    assert [(v.invariant, v.task_id) for v in report.violations] == [(f.LOST_TASK, "lost-1")]
    doc = report.to_json()
    assert doc["tasks"]["refused"] == 2 and doc["tasks"]["lost"] == 1
    assert doc["refused_reasons"]["tenant_forged"] == 1
    assert "refused by reason: tenant_forged 1" in report.render()


def test_a_task_whose_other_submission_went_through_is_not_refused() -> None:
    records: list[Record] = []
    forged = event(_submission("task-1", "nlp"), "forged", cell=None)
    own = event(_submission("task-1", "vision"), "own")
    append(records, TASKS, forged)
    append(records, TASKS, own.model_copy(update={"cell": None}))
    append(records, INPUT_LOG, own)
    _letter(records, Refusal("tenant_forged", "forged", "payload.tenant", "nlp").dead_letter(
        encode(forged), topic=PREFIX + TASKS, event_id=forged.event_id))
    report = check(records, PREFIX, settled=True)
    assert report.task_states == {"task-1": "lost"}  # its accepted submission was never decided
    assert not report.refused_reasons


def test_the_check_of_a_cluster_reads_the_dead_letters() -> None:
    assert DEADLETTER in CHECKED_TOPICS


def test_refusals_and_dead_letters_are_counted_each_not_just_seen() -> None:
    """Two forged submissions of one reason are two refusals and two dead letters (a
    count set to 1 instead of added to passed the one-refusal test above)."""
    records: list[Record] = []
    for n in (1, 2):
        forged = event(_submission(f"forged-{n}", "nlp"), f"forged-{n}", cell=None)
        append(records, TASKS, forged)
        _letter(records, Refusal("tenant_forged", "forged", "payload.tenant", "nlp")
                .dead_letter(encode(forged), topic=PREFIX + TASKS, event_type=forged.type,
                             event_id=forged.event_id))
    report = check(records, PREFIX, settled=True)
    assert dict(report.refused_reasons) == {"tenant_forged": 2}
    assert report.counts[DEADLETTER] == 2
