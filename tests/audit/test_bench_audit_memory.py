"""bench/audit_memory.py on a small log, so the figures of BENCHMARKS.md can be made again:
the log produced to a real broker, every command run in its own process and exiting 0
(every decision reproduced), a peak RSS and CPU time read for each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("export -o FILE", "replay (the cluster)", "replay FILE", "replay FILE --jobs 2",
            "replay FILE --policy hetsched", "explain TASK FILE", "explain TASK (the cluster)",
            "check FILE")


def test_the_audit_memory_bench_runs_every_command(kafka_bootstrap: str) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "audit_memory.py"), "--bootstrap",
         kafka_bootstrap, "--cells", "2", "--telemetry", "300"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split("|")[1].strip().strip("`"): [c.strip() for c in line.split("|")[2:6]]
            for line in done.stdout.splitlines() if line.startswith("| `")}
    assert set(rows) == set(COMMANDS), done.stdout
    for name, (_, cpu_s, rss_mb, status) in rows.items():
        assert status == "0", (name, done.stdout)
        assert float(cpu_s) > 0 and int(rss_mb) > 0, (name, done.stdout)
    assert "integrity check: " in done.stdout
