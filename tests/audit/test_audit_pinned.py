"""Replay of pinned recorded runs: the same decisions, byte for byte, and the same head.

The files in ``pinned/`` were recorded by the commit that introduced engine version 2
(see ``pinned_logs.py``; ``pinned/engine1/`` keeps the runs as version 1 recorded them,
before the replay speed-ups) and the heads below were computed then. Any change to
decode, hashing, the core's step or a policy that moves one decision by one byte fails
here, with the first diverging decision.
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
    "hetsched": "34fdccdd3d846c94b102fc6c22a4d9dcc0a66f53f338c7e6dc84713a24cd9596",
    "fgd": "e1ea453be03f37591360523a9124c64809d8963a451ded97e81cd495370f9ec3",
    "bestfit": "d684ebbe91511e50e6247d1eb4113fb71a22d2f18285f9e39b551e7e3e85fbfa",
    "balanced": "db9465f2ac7c89c3dcfc025ce7b38b292bae82e15827bb96d65e24548bcd0ef3",
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
