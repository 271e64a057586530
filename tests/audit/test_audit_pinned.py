"""Replay of runs recorded by older code: the same decisions, byte for byte, and the same head.

The files in ``pinned/`` were recorded before the replay speed-ups (see
``pinned_logs.py``) and the heads below were computed then, by that code's
replay. Any change to decode, hashing, the core's step or a policy that moves
one decision by one byte fails here, with the first diverging decision.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pinned_logs import PINNED_AT, RUNS, path_of

from streams.audit import logfile
from streams.audit.chain import run_hash
from streams.cli import main
from streams.profiles.service import service_scheduler
from streams.replay import replay

HEADS = {
    "hetsched": "1d69c6bc446d83478159fae62869cd83fa9edcb524c88141dce699067ffa3783",
    "fgd": "2a21d53dab19318888d67c6a749c7974deabb9f79d9efab81237d240ff80a053",
    "bestfit": "392bfca9fe93a10ef074875308d33ad5bdc13109f1b23309cf11ad82065a601c",
    "balanced": "5dd30953c043a781b1470b413dcd902e68d69198d543085cfa7c815c58e9e4d5",
}
"""Chain heads of the pinned runs, printed by ``replay`` at commit ``PINNED_AT``."""


@pytest.mark.parametrize("profile", sorted(RUNS))
def test_a_run_recorded_by_older_code_replays_to_the_same_decisions_and_head(
        profile: str) -> None:
    _, records = logfile.read(path_of(profile))
    inputs = [r for r in records if r.topic.endswith("input-log")]
    decisions = [r for r in records if r.topic.endswith("decisions")]
    # The file is the one recorded at PINNED_AT: its decisions chain to the pinned head.
    assert run_hash({"cell-0": [d.value or b"" for d in decisions]}) == HEADS[profile], (
        f"pinned/{profile}.jsonl.gz is not the file recorded at {PINNED_AT}")
    report = replay(inputs, decisions, service_scheduler(profile))
    first = report.first
    assert report.mismatches == 0, (
        f"first mismatch at decision {first.position}: {first.problem} {first.diffs[:5]}"
        if first else "")
    assert report.matches == report.recorded == report.replayed == len(decisions) >= 300
    assert report.replayed_hash == report.recorded_hash == HEADS[profile]
    assert report.ok


def test_the_replay_command_accepts_a_pinned_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(Path(path_of("fgd")))]) == 0
    out = capsys.readouterr().out
    assert f"replayed {HEADS['fgd'][:16]}  EQUAL" in out
