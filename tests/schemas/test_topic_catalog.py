"""The topic catalog is consistent with the events and with itself."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas import EVENT_MODELS, Tick, make_event
from schemas.topics import (
    BY_NAME,
    CATALOG,
    DEADLETTER,
    DECISIONS,
    INPUT_LOG,
    NODE_INVENTORY,
    key_for,
    topics_for,
)

ENVELOPE_KEYS = {"cell"}


def test_names_are_unique_prefixed_and_indexed() -> None:
    names = [s.name for s in CATALOG]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert all(n.startswith("hetsched.") for n in names)


@pytest.mark.parametrize("model", EVENT_MODELS, ids=lambda m: m.EVENT_TYPE)
def test_every_event_has_a_topic_and_every_input_is_in_the_input_log(model) -> None:
    homes = {s.name for s in topics_for(model.EVENT_TYPE)}
    assert homes
    if model.EVENT_TYPE not in BY_NAME[DECISIONS].event_types:
        assert INPUT_LOG in homes


@pytest.mark.parametrize("spec", [s for s in CATALOG if s.event_types], ids=lambda s: s.name)
def test_every_event_on_a_topic_has_that_topics_key(spec) -> None:
    by_type = {m.EVENT_TYPE: m for m in EVENT_MODELS}
    for event_type in spec.event_types:
        assert event_type in by_type, event_type
        if spec.key not in ENVELOPE_KEYS:
            assert spec.key in by_type[event_type].model_fields, (spec.name, event_type)


def test_decisions_are_co_partitioned_with_the_input_log() -> None:
    assert BY_NAME[DECISIONS].key == BY_NAME[INPUT_LOG].key == "cell"
    assert BY_NAME[DECISIONS].partitions == BY_NAME[INPUT_LOG].partitions


def test_audit_logs_are_kept_forever_and_inventory_is_compacted() -> None:
    assert BY_NAME[INPUT_LOG].retention_ms == BY_NAME[DECISIONS].retention_ms == -1
    assert BY_NAME[NODE_INVENTORY].config()["cleanup.policy"] == "compact"
    assert not BY_NAME[DEADLETTER].event_types


def test_key_for_reads_the_payload_or_the_envelope(golden_docs) -> None:
    from schemas import decode

    placed = decode(golden_docs["TaskPlaced.v1.json"])
    submitted = decode(golden_docs["TaskSubmitted.v1.json"])
    assert key_for(BY_NAME[DECISIONS], placed) == b"cell-a"
    assert key_for(BY_NAME["hetsched.tasks"], submitted) == b"train-42"


def test_an_input_log_event_without_a_cell_cannot_be_keyed() -> None:
    tick = make_event(Tick(seq=0, interval_s=1.0), source="t", occurred_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="cell"):
        key_for(BY_NAME[INPUT_LOG], tick)
