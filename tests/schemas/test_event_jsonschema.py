"""The checked-in JSON Schemas accept every golden fixture and agree with the models.

Integrators validate with standard JSON Schema tooling, never our pydantic
models, so the schema files themselves are what is tested here.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from schemas import DeadLetter, decode, encode_deadletter
from schemas.generate import JSON_DIR, PACKAGE_DIR, parse_schema_file, schema_file

SCHEMA_DIR = PACKAGE_DIR / JSON_DIR


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_the_fixture_is_valid_against_its_json_schema(golden: Path) -> None:
    validator = _validator(schema_file(*parse_schema_file(golden.name)))
    errors = sorted(validator.iter_errors(orjson.loads(golden.read_bytes())), key=str)
    assert not errors, [e.message for e in errors]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(lambda d: d.pop("event_id"), "event_id", id="a missing event id"),
        pytest.param(lambda d: d.update(extra=1), "extra", id="an unknown envelope field"),
        pytest.param(lambda d: d["payload"].update(gpu=1), "gpu", id="an unknown payload field"),
        pytest.param(
            lambda d: d["payload"]["resources"].update(gpu_count="2"), "gpu_count", id="a string"
        ),
        pytest.param(lambda d: d.update(version=99), "version", id="an unknown version"),
    ],
)
def test_schema_and_decoder_both_reject(mutate, field: str, golden_docs: dict[str, bytes]) -> None:
    doc = orjson.loads(golden_docs["TaskSubmitted.v1.json"])
    mutate(doc)
    assert not _validator("TaskSubmitted.v1.json").is_valid(doc)
    assert isinstance(decode(orjson.dumps(doc)), DeadLetter)


def test_a_dead_letter_record_is_valid_against_its_schema() -> None:
    dead = decode(b"not json", topic="hetsched.tasks", partition=3, offset=7)
    assert isinstance(dead, DeadLetter)
    validator = _validator(schema_file("DeadLetter", 1))
    assert validator.is_valid(orjson.loads(encode_deadletter(dead)))
