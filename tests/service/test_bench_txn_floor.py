"""bench/txn_floor.py on a few records, so the floor quoted in BENCHMARKS.md keeps working.

Its whole path runs against the test broker: the load generator, two chained
transactional hops in a process of their own (separate, then sharing one
transaction), and the read_committed consumer that times each record's arrival.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
def test_every_record_crosses_both_hops_once(kafka_bootstrap: str, tmp_path: Path,
                                             shared: bool) -> None:
    out = tmp_path / "floor.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "txn_floor.py"), "--bootstrap", kafka_bootstrap,
         "--rate", "20", "--seconds", "3", "--hops", "2", "--out", str(out),
         *(["--shared"] if shared else [])],
        capture_output=True, text=True, cwd=REPO, timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads(out.read_text())
    assert run["sent"] >= 40 and run["arrived"] == run["sent"], run
    assert 0 < run["p50_ms"] <= run["p99_ms"] <= run["max_ms"], run
    hops = run["hop_process"]
    assert hops["records"] == 2 * run["sent"], hops  # each record copied by each hop, once
    assert hops["rounds"] > 0
