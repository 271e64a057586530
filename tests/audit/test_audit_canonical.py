"""Replay's unvalidated decision bytes equal the validated encoding, byte for byte.

``streams.audit.canonical.fast_bytes`` writes placed and unschedulable decisions
without pydantic; replay keeps those bytes only when they equal the recorded
ones, but they must be the codec's bytes in the first place.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from audit_builders import recorded

from schemas.codec import decode, encode
from schemas.events import Envelope, TaskPlaced, TaskUnschedulable
from streams.adapter import apply_documents, validated
from streams.audit import canonical
from streams.core.cell import Cell
from streams.profiles.service import service_scheduler


def _documents(profile: str) -> list[tuple[tuple[type[Envelope[Any]], dict[str, Any]], bytes]]:
    """Every hot decision document of a recorded run, with its recorded bytes."""
    rec = recorded(80, profile)
    cell = Cell("cell-0", service_scheduler(profile))
    out = []
    recorded_bytes = iter(r.value for r in rec.records if r.topic.endswith("decisions"))
    for r in rec.records:
        if not r.topic.endswith("input-log"):
            continue
        env = decode(r.value or b"")
        assert isinstance(env, Envelope)
        for d in apply_documents(cell, env):
            raw = next(recorded_bytes)
            if isinstance(d, tuple):
                out.append((d, raw or b""))
    return out


@pytest.mark.parametrize("profile", ["hetsched", "fgd", "bestfit"])
def test_fast_bytes_are_the_validated_encoding_and_the_recorded_bytes(profile: str) -> None:
    docs = _documents(profile)
    kinds = {d[1]["type"] for d, _ in docs}
    assert kinds == {TaskPlaced.EVENT_TYPE, TaskUnschedulable.EVENT_TYPE}
    for d, raw in docs:
        fast = canonical.fast_bytes(*d)
        assert fast is not None
        assert fast == encode(validated(d)) == raw


def test_fast_bytes_write_sub_second_event_times_as_the_codec_does() -> None:
    (message_cls, doc), _ = _documents("hetsched")[0]
    for us in (1, 500000, 123456):
        moved = {**doc, "occurred_at": doc["occurred_at"] + timedelta(microseconds=us)}
        assert canonical.fast_bytes(message_cls, moved) == encode(validated((message_cls, moved)))


def test_the_fast_path_knows_every_field_of_the_models_it_writes() -> None:
    # A schema change (a field added or renamed) turns the fast path off instead of
    # writing bytes that lack the field: this fails first, so the module is updated.
    assert canonical.ENABLED


def test_other_models_are_left_to_the_codec() -> None:
    (_, doc), _ = _documents("hetsched")[0]
    assert canonical.fast_bytes(Envelope, doc) is None
