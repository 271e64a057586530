"""Fuzzing: the CLI's task-spec parser and the invariant checker never crash on bad input.

The decoders of every topic are fuzzed in ``tests/schemas/test_decoder_properties.py``
(random bytes, random JSON, mutated golden events: always an envelope or a dead
letter with a reason). Here: ``hetsched submit``'s parser (``load_specs`` +
``validate``) must turn any file into payloads or error lines that name the
task and the field, and ``hetsched check`` must fold any records, counting what
it cannot decode instead of raising.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_builders import PREFIX, recorded

from streams.audit.records import Record
from streams.check.invariants import check
from streams.commands.submit import load_specs, validate

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(
    max_size=20)
json_like = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(["task_id", "tenant", "resources", "executor", "gpu_count", "kind",
                     "gpu_share_milli", "simulated", "duration_s", "x"]) | st.text(max_size=5),
    inner, max_size=5), max_leaves=20)

VALID = {"task_id": "t-1", "tenant": "a", "resources": {"gpu_count": 1},
         "executor": {"kind": "process", "argv": ["true"]}}


def _parse(path: Path, text: str) -> tuple[list, list[str]] | None:
    path.write_text(text)
    try:
        specs = load_specs(path)
    except ValueError as exc:
        assert str(path) in str(exc)
        return None
    return validate(path, specs)


@FUZZ
@given(text=st.text(max_size=300))
def test_any_text_is_refused_with_a_reason_or_parsed(tmp_path: Path, text: str):
    result = _parse(tmp_path / "spec.yaml", text)
    if result is not None:
        _payloads, errors = result
        assert all(str(tmp_path / "spec.yaml") in e for e in errors)


@FUZZ
@given(doc=json_like)
def test_any_document_gives_payloads_or_errors_naming_task_and_field(tmp_path: Path, doc):
    result = _parse(tmp_path / "spec.json", orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
                    .decode() if _dumpable(doc) else yaml.safe_dump(doc))
    if result is None:
        return
    _payloads, errors = result
    for line in errors:
        assert "task " in line and ("field " in line or "not JSON-compatible" in line), line


@FUZZ
@given(field=st.sampled_from(["task_id", "tenant", "resources", "executor"]), value=json_like)
def test_a_bad_field_in_a_valid_spec_is_named_in_the_error(tmp_path: Path, field: str, value):
    spec = dict(VALID, **{field: value})
    if not _dumpable(spec):
        return  # not JSON (e.g. an integer beyond 64 bits): nothing to write
    result = _parse(tmp_path / "spec.json", orjson.dumps([spec]).decode())
    if result is None:
        return  # refused as a whole, naming the file (JSON with control characters: YAML
        # 1.1's reader refuses them; reported to the submit command's owner)
    payloads, errors = result
    if not payloads:
        assert errors and any(f"field {field}" in e for e in errors), errors


def _dumpable(doc: object) -> bool:
    try:
        orjson.dumps(doc)
    except TypeError:
        return False
    return True


RUN = recorded(12).records


@FUZZ
@given(data=st.data())
def test_the_checker_folds_any_mutation_of_a_run_without_raising(data):
    records = list(RUN)
    for _ in range(data.draw(st.integers(0, 5))):
        i = data.draw(st.integers(0, len(records) - 1))
        r = records[i]
        raw = r.value or b""
        cut = data.draw(st.integers(0, len(raw)))
        junk = data.draw(st.binary(max_size=16))
        records[i] = Record(r.topic, r.partition, r.offset, r.timestamp_ms, r.key,
                            raw[:cut] + junk + raw[cut + len(junk):])
    report = check(records, PREFIX, settled=data.draw(st.booleans()))
    assert report.render() and report.to_json()["tasks"]["submitted"] >= 0
