"""``submit --wait`` under the submitter role, which may not read decisions.

Giving submitters read on ``hetsched.decisions`` would show them every tenant's
decisions, so the role keeps its single write grant and ``--wait`` says, before
sending anything, why it cannot wait under this principal (it was a traceback).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SPEC = "task_id: wait-1\ntenant: vision\nresources: {gpu_count: 1}\n" \
       "executor: {kind: process, argv: [sleep, '1']}\n"


def test_a_submitter_asking_to_wait_is_told_why_it_cannot_and_nothing_is_sent(
        secure_cluster, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(SPEC)
    done = subprocess.run([sys.executable, "-m", "streams.cli", "submit", "job.yaml", "--wait",
                           "--timeout", "5"], cwd=tmp_path, env=secure_cluster.env_for("alice"),
                          capture_output=True, text=True, timeout=120, check=False)
    said = done.stdout + done.stderr
    secure_cluster.outputs.append(said)
    assert done.returncode == 2, said
    assert "Traceback" not in said, said
    assert "--wait" in said and "alice" in said and "hetsched.decisions" in said, said
    assert "nothing sent" in said and "submitted wait-1" not in said, said
