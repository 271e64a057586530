"""``./dev mutate native`` scores cargo-mutants' outcomes as docs/testing.md says.

Unviable mutants are out of the score, timeouts are caught, a listed equivalent that
survives is out of it and one that is caught is flagged, any other survivor is named,
and a retest updates the record of a full run instead of replacing it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "mutation" / "native.py"


@pytest.fixture(scope="module")
def native():
    spec = importlib.util.spec_from_file_location("mutation_native", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_score_counts_what_a_test_could_catch(native) -> None:
    found = [("src/a.rs", "a1", "CaughtMutant"), ("src/a.rs", "a2", "Timeout"),
             ("src/a.rs", "a3", "MissedMutant"), ("src/a.rs", "a4", "Unviable"),
             ("src/a.rs", "a5", "MissedMutant"), ("src/b.rs", "b1", "CaughtMutant")]
    rows = native.scores(found, {"a5": "why", "b1": "stale"})
    a, b = rows
    assert (a.caught, a.missed, a.equivalent, a.unviable) == (2, 1, 1, 1)
    assert a.survivors == ["a3"] and a.score == "66.7%"
    assert b.listed_but_caught == 1 and b.score == "100.0%"
    assert "| all | | 3 | | | | 75.0% |" in native.render(rows)


def test_an_unknown_outcome_is_an_error_not_a_pass(native) -> None:
    with pytest.raises(ValueError, match="outcome 'Weird' of 'x'"):
        native.scores([("src/a.rs", "x", "Weird")], {})


def test_a_retest_updates_the_record_and_a_full_run_replaces_it(
        native, tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    native.record([("f.rs", "m1", "MissedMutant"), ("f.rs", "m2", "CaughtMutant")], False, path)
    native.record([("f.rs", "m1", "CaughtMutant")], True, path)
    assert sorted(native.recorded(path)) == [("f.rs", "m1", "CaughtMutant"),
                                             ("f.rs", "m2", "CaughtMutant")]
    native.record([("f.rs", "m3", "Unviable")], False, path)
    assert native.recorded(path) == [("f.rs", "m3", "Unviable")]


def test_every_listed_native_equivalent_has_a_reason(native) -> None:
    listed = native.equivalents()
    assert listed and all(reason for reason in listed.values())
