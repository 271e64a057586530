"""The compatibility rule: the comparison itself, and the checked-in schemas against it."""

from __future__ import annotations

import copy
import json
from typing import ClassVar

import pytest

from schemas.compat import breaking_changes
from schemas.events import Tick, known_versions, registered
from schemas.events.envelope import build_message_model
from schemas.generate import JSON_DIR, PACKAGE_DIR, json_schemas, schema_file

BASE = {
    "$defs": {
        "P": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "a": {"type": "integer"},
                "b": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                "kind": {"enum": ["x", "y"], "type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "terms": {"type": "object", "additionalProperties": {"type": "number"}},
            },
            "required": ["a", "kind"],
        }
    },
    "type": "object",
    "properties": {
        "type": {"const": "E", "type": "string"},
        "version": {"const": 1, "type": "integer"},
        "payload": {"$ref": "#/$defs/P"},
    },
    "required": ["type", "version", "payload"],
}


def _changed(edit) -> dict:
    new = copy.deepcopy(BASE)
    edit(new["$defs"]["P"])
    return new


def test_an_identical_schema_is_compatible() -> None:
    assert breaking_changes(BASE, copy.deepcopy(BASE)) == []


def test_a_new_version_number_alone_is_compatible() -> None:
    new = copy.deepcopy(BASE)
    new["properties"]["version"]["const"] = 2
    assert breaking_changes(BASE, new) == []


def test_adding_an_optional_field_is_compatible() -> None:
    new = _changed(lambda p: p["properties"].update(c={"type": "number", "default": 0}))
    assert breaking_changes(BASE, new) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            lambda p: p["properties"].pop("b"), "$.payload.b: removed", id="a removed field"
        ),
        pytest.param(
            lambda p: p["properties"].update(a={"type": "string"}),
            "$.payload.a: retyped",
            id="a retyped field",
        ),
        pytest.param(
            lambda p: p["properties"].update(b={"type": "string"}),
            "$.payload.b: retyped",
            id="a nullable field made non-nullable",
        ),
        pytest.param(
            lambda p: p["properties"]["kind"].update(enum=["x"]),
            "$.payload.kind: retyped",
            id="an enum value removed",
        ),
        pytest.param(
            lambda p: p["properties"]["tags"].update(items={"type": "integer"}),
            "$.payload.tags[]: retyped",
            id="a retyped list element",
        ),
        pytest.param(
            lambda p: p["properties"]["terms"].update(additionalProperties={"type": "string"}),
            "$.payload.terms[]: retyped",
            id="a retyped map value",
        ),
        pytest.param(
            lambda p: p["required"].append("b"),
            "$.payload.b: optional field made required",
            id="an optional field made required",
        ),
        pytest.param(
            lambda p: p["required"].remove("a"),
            "$.payload.a: required field made optional",
            id="a required field made optional",
        ),
        pytest.param(
            lambda p: (p["properties"].update(c={"type": "number"}), p["required"].append("c")),
            "$.payload.c: new field is required",
            id="a new required field",
        ),
    ],
)
def test_a_breaking_change_is_detected(edit, expected: str) -> None:
    problems = breaking_changes(BASE, _changed(edit))
    assert any(p.startswith(expected) for p in problems), problems


def _checked_in(name: str) -> dict:
    return json.loads((PACKAGE_DIR / JSON_DIR / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(json_schemas()))
def test_the_current_model_does_not_break_its_checked_in_schema(name: str) -> None:
    assert breaking_changes(_checked_in(name), json_schemas()[name]) == []


def test_each_checked_in_version_only_adds_optional_fields_to_the_previous() -> None:
    for event_type, version in registered():
        if version == 1:
            continue
        previous = max(v for v in known_versions(event_type) if v < version)
        old = _checked_in(schema_file(event_type, previous))
        new = _checked_in(schema_file(event_type, version))
        assert breaking_changes(old, new) == [], (event_type, version)


class TickV2(Tick):
    """What a compatible second version looks like: one new optional field."""

    EVENT_VERSION: ClassVar[int] = 2
    jitter_s: float | None = None


class TickV2Retyped(Tick):
    """An incompatible one: ``seq`` becomes a string."""

    EVENT_VERSION: ClassVar[int] = 2
    seq: str  # type: ignore[assignment]


def _message_schema(model) -> dict:
    return build_message_model(model).model_json_schema()


def test_a_real_second_version_adding_an_optional_field_is_compatible() -> None:
    assert breaking_changes(_checked_in("Tick.v1.json"), _message_schema(TickV2)) == []


def test_a_real_second_version_retyping_a_field_is_refused() -> None:
    problems = breaking_changes(_checked_in("Tick.v1.json"), _message_schema(TickV2Retyped))
    assert any("payload.seq: retyped" in p for p in problems), problems
