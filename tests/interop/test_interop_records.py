"""The outside reader's checks (interop_records.py) refuse what they must, without a broker."""

from __future__ import annotations

from pathlib import Path

import orjson
from interop_records import TopicCheck, check_value, documented_types

FIXTURES = Path(__file__).resolve().parents[1] / "schemas" / "fixtures"


def _submitted() -> dict:
    return orjson.loads((FIXTURES / "TaskSubmitted.v1.json").read_bytes())


def _check(topic: str, value: bytes | None) -> TopicCheck:
    result = TopicCheck()
    check_value(topic, "t@0", value, documented_types()[topic], result)
    return result


def test_the_table_lists_each_catalog_topic_with_its_schema_files() -> None:
    types = documented_types()
    assert "TaskSubmitted.v3.json" in types["hetsched.tasks"]
    assert types["hetsched.deadletter"] == {"DeadLetter.v1.json"}
    assert len(types) == 8


def test_a_valid_submission_passes_and_a_string_for_an_integer_does_not() -> None:
    assert _check("hetsched.tasks", orjson.dumps(_submitted())).problems == []
    bad = _submitted()
    bad["payload"]["resources"]["gpu_count"] = "2"
    problems = _check("hetsched.tasks", orjson.dumps(bad)).problems
    assert len(problems) == 1 and "gpu_count" in problems[0], problems


def test_a_type_the_topic_does_not_list_and_a_stray_tombstone_are_problems() -> None:
    assert "not among the types" in _check("hetsched.decisions",
                                           orjson.dumps(_submitted())).problems[0]
    assert _check("hetsched.node-inventory", None).problems == []
    assert _check("hetsched.tasks", None).problems == ["t@0: a null value"]
