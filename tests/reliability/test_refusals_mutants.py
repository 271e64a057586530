"""Which dead letters tell of a refused submission, read as ``streams/check/refusals.py`` says.

``./dev mutate`` found that the checker's tests only fed it dead letters of the
submissions topic that carried their event id and type: nothing held that a dead
letter of another topic or without a source topic is no refusal, that the envelope's
own event id is used when the letter has none, that a cancellation is no refusal
even when the letter does not name its type, that a body naming no task (or an
empty or non-string task id) is none either, or that a field error counts as a
security code only when the message starts with it.
"""

from __future__ import annotations

import base64

import orjson
from reliability_builders import PREFIX, event

from schemas.codec import encode, encode_deadletter
from schemas.deadletter import DeadLetter, FieldError
from schemas.events.task import TaskCancelled
from schemas.signing import Refusal
from schemas.topics import TASKS, TELEMETRY
from streams.check.refusals import RefusedSubmission, refusal_reason, refused_submission
from tests.reliability.test_check_refused import _submission


def letter_of(raw: bytes, **kw) -> bytes:
    return encode_deadletter(DeadLetter(reason=kw.pop("reason", "validation_failed"),
                                        message=kw.pop("message", "bad"),
                                        original_b64=base64.b64encode(raw).decode(), **kw))


FORGED = event(_submission("forged-1", "nlp"), "forged", cell=None)


def test_only_dead_letters_of_the_submissions_topic_are_refusals():
    raw = encode(FORGED)
    assert refused_submission(letter_of(raw, source_topic=PREFIX + TASKS), PREFIX) == (
        RefusedSubmission("forged-1", FORGED.event_id, "validation_failed"))
    assert refused_submission(letter_of(raw, source_topic=PREFIX + TELEMETRY), PREFIX) is None
    assert refused_submission(letter_of(raw), PREFIX) is None  # no source topic
    assert refused_submission(b"not a dead letter", PREFIX) is None


def test_a_readable_envelope_gives_its_own_event_id():
    raw = encode(FORGED)
    got = refused_submission(letter_of(raw, source_topic=PREFIX + TASKS), PREFIX)
    assert got is not None and got.event_id == FORGED.event_id


def test_a_refused_cancellation_ends_nothing_even_when_the_letter_names_no_type():
    cancel = event(TaskCancelled(task_id="forged-1"), "cancel", cell=None)
    raw = encode(cancel)
    assert refused_submission(letter_of(raw, source_topic=PREFIX + TASKS), PREFIX) is None
    dl = Refusal("tenant_forged", "tenant_forged: forged", "payload.tenant", "nlp").dead_letter(
        raw, topic=PREFIX + TASKS)
    assert refused_submission(encode_deadletter(dl), PREFIX) is None


def unreadable(payload: object) -> bytes:
    return orjson.dumps({"type": "TaskSubmitted", "version": 1, "payload": payload})


def test_an_unreadable_body_counts_only_with_a_task_id_and_a_submission_type():
    tasks = PREFIX + TASKS
    got = refused_submission(letter_of(unreadable({"task_id": "bad-1", "tenant": 7}),
                                       source_topic=tasks, event_id="ev-9"), PREFIX)
    assert got == RefusedSubmission("bad-1", "ev-9", "validation_failed")
    got = refused_submission(letter_of(unreadable({"task_id": "bad-1", "tenant": 7}),
                                       source_topic=tasks, event_type="TaskSubmitted"), PREFIX)
    assert got == RefusedSubmission("bad-1", None, "validation_failed")
    assert refused_submission(letter_of(unreadable({"task_id": "bad-1", "tenant": 7}),
                                        source_topic=tasks, event_type="TaskCancelled"),
                              PREFIX) is None
    for payload in ({"tenant": 7}, {"task_id": "", "tenant": 7}, {"task_id": 5},
                    "not an object"):
        assert refused_submission(letter_of(unreadable(payload), source_topic=tasks),
                                  PREFIX) is None, payload
    assert refused_submission(letter_of(b"{not json", source_topic=tasks), PREFIX) is None


def test_a_field_error_is_the_code_only_when_the_message_starts_with_it():
    def dl(error: str, message: str) -> DeadLetter:
        return DeadLetter(reason="validation_failed", message=message, original_b64="",
                          errors=[FieldError(field="payload.tenant", value=None, error=error)])

    assert refusal_reason(dl("unsigned", "unsigned: no signature")) == "unsigned"
    assert refusal_reason(dl("unsigned", "the record is unsigned")) == (
        "validation_failed (payload.tenant)")
    assert refusal_reason(dl("Not a code", "Not a code: x")) == (
        "validation_failed (payload.tenant)")
    assert refusal_reason(DeadLetter(reason="invalid_json", message="m", original_b64="")) == (
        "invalid_json")
