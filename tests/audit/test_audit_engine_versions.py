"""Logs recorded by an older engine version: replay says so instead of crying mismatch.

The pinned runs as engine version 1 recorded them (``pinned/engine1/``) are replayed by
this engine. Version 2 changed one rule, a reason's top candidates (numpy's
``argpartition`` picked among tied totals by the CPU's vector instructions), and began
marking each placement with its version. So every decision must be the recorded one but
for those two fields, the placements above all, and ``hetsched replay`` must name the
version and the changed rule, and exit 3, not 1.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pinned_logs import ENGINE1, RUNS, path_of

from schemas.codec import encode
from streams.audit import logfile
from streams.audit.source import recorded_engine
from streams.cli import main
from streams.core.engine_version import CHANGES, ENGINE_MARK, ENGINE_VERSION, changes_since
from streams.profiles.service import service_scheduler
from streams.replay import replay


def _without_the_changed_rule(doc: dict[str, Any]) -> dict[str, Any]:
    reason = (doc.get("payload") or {}).get("reason")
    if reason is not None:
        reason.pop("candidates", None)
        (reason.get("metrics") or {}).pop(ENGINE_MARK, None)
    return doc


@pytest.mark.parametrize("profile", sorted(RUNS))
def test_an_engine_1_log_differs_only_where_version_2_changed_the_rules(profile: str) -> None:
    _, records = logfile.read(path_of(profile, ENGINE1))
    inputs = [r for r in records if r.topic.endswith("input-log")]
    decisions = [r for r in records if r.topic.endswith("decisions")]
    assert recorded_engine(decisions) == 1
    replayed: list[bytes] = []
    report = replay(inputs, decisions, service_scheduler(profile),
                    observer=lambda _env, _cell, out: replayed.extend(encode(d) for d in out))
    assert report.mismatches > 0 and len(replayed) == len(decisions) >= 300
    candidates_moved = 0
    for was, now in zip(decisions, replayed, strict=True):
        old, new = orjson.loads(was.value or b"{}"), orjson.loads(now)
        if old.get("type") == "TaskPlaced":
            assert new["payload"]["reason"]["metrics"][ENGINE_MARK] == ENGINE_VERSION
            candidates_moved += (old["payload"]["reason"]["candidates"]
                                 != new["payload"]["reason"]["candidates"])
        assert _without_the_changed_rule(new) == _without_the_changed_rule(old)
    if profile in ("fgd", "hetsched"):  # many identical nodes: ties cut the top three
        assert candidates_moved > 0


def test_the_replay_command_names_the_older_version_and_the_rule_that_changed(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(path_of("hetsched", ENGINE1)), "--no-progress"]) == 3
    out = capsys.readouterr().out
    assert f"recorded by version 1, older than this replay's {ENGINE_VERSION}" in out
    assert CHANGES[2] in out
    assert "OTHER ENGINE:" in out and "MISMATCH" not in out


def test_the_json_report_carries_the_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(path_of("fgd", ENGINE1)), "--json", "--no-progress"]) == 3
    engine = orjson.loads(capsys.readouterr().out)["engine"]
    assert engine == {"recorded": 1, "replayed": ENGINE_VERSION, "changes": changes_since(1)}


def test_a_log_of_this_engine_is_compared_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    _, records = logfile.read(path_of("bestfit"))
    assert recorded_engine([r for r in records if r.topic.endswith("decisions")]) == \
        ENGINE_VERSION
    assert main(["replay", str(path_of("bestfit")), "--no-progress"]) == 0
    assert "engine " not in capsys.readouterr().out


def test_a_real_mismatch_of_this_engine_still_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """A log of this version replayed by other rules (another profile as baseline) is a
    mismatch, not another engine's log."""
    assert main(["replay", str(path_of("bestfit")), "--baseline", "fgd",
                 "--no-progress"]) == 1
    assert "MISMATCH:" in capsys.readouterr().out


def test_a_log_from_a_newer_engine_is_named_so() -> None:
    from streams.audit.records import Record

    doc = {"type": "TaskPlaced", "payload": {"reason": {"metrics": {ENGINE_MARK: 7.0}}}}
    record = Record("hetsched.decisions", 0, 0, None, b"k", orjson.dumps(doc))
    assert recorded_engine([record]) == 7
