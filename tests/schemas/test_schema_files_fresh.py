"""The checked-in schema files and AsyncAPI document match the models."""

from __future__ import annotations

import json

import yaml

from schemas.generate import ASYNCAPI_FILE, PACKAGE_DIR, main, render, stale_files
from schemas.topics import CATALOG


def test_checked_in_schema_files_are_fresh() -> None:
    stale = stale_files()
    assert not stale, f"run `python -m schemas.generate`; stale: {stale}"


def test_generation_is_deterministic() -> None:
    assert render() == render()


def test_check_mode_reports_fresh_files_with_status_zero() -> None:
    assert main(["--check"]) == 0


def test_every_ref_in_the_asyncapi_document_resolves() -> None:
    doc = yaml.safe_load((PACKAGE_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8"))
    assert doc["asyncapi"] == "3.0.0"
    refs = list(_refs(doc))
    assert refs
    for ref in refs:
        if ref.startswith("#/"):
            node = doc
            for part in ref[2:].split("/"):
                node = node[part]
        else:
            target = PACKAGE_DIR / ref
            assert target.is_file(), ref
            json.loads(target.read_text(encoding="utf-8"))


def test_the_asyncapi_document_has_a_channel_per_catalog_topic() -> None:
    doc = yaml.safe_load((PACKAGE_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8"))
    addresses = sorted(c["address"] for c in doc["channels"].values())
    assert addresses == sorted(spec.name for spec in CATALOG)
    for channel in doc["channels"].values():
        assert channel["messages"], channel["address"]


def test_every_payload_declares_that_it_is_json_schema_2020_12() -> None:
    """Issue 34, defect 5: without ``schemaFormat`` an AsyncAPI reader takes a payload
    for an AsyncAPI Schema (a draft-07 superset) and validates with the wrong draft.
    AsyncAPI 3.0's Multi Format Schema Object: ``{schemaFormat, schema}``."""
    doc = yaml.safe_load((PACKAGE_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8"))
    messages = doc["components"]["messages"]
    assert messages
    for name, message in messages.items():
        payload = message["payload"]
        assert set(payload) == {"schemaFormat", "schema"}, name
        assert payload["schemaFormat"] == "application/schema+json;version=draft-2020-12", name
        target = PACKAGE_DIR / payload["schema"]["$ref"]
        schema = json.loads(target.read_text(encoding="utf-8"))
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name


def _refs(node: object):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_the_submission_example_in_the_api_docs_is_a_valid_event() -> None:
    from schemas import Envelope, TaskSubmitted, decode

    docs = (PACKAGE_DIR.parent / "docs" / "api.md").read_text(encoding="utf-8")
    examples = [
        block.split("\n", 1)[1]
        for block in docs.split("```json")[1:]
        if '"type":"TaskSubmitted"' in block
    ]
    assert examples
    for example in examples:
        event = decode(example.split("```", 1)[0].strip().encode(), topic="hetsched.tasks")
        assert isinstance(event, Envelope), event
        assert isinstance(event.payload, TaskSubmitted)
