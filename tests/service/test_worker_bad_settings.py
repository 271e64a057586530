"""A worker started with a bad setting stops at once with one line naming the variable
and its value (exit status 1), before it waits for Kafka, and without a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(("env", "expected"), [
    ({"HETSCHED_PROFILE": "nosuch"},
     "HETSCHED_PROFILE='nosuch': unknown profile 'nosuch' (built-in: balanced, bestfit, "),
    ({"HETSCHED_OBJECTIVES": "{missing}"}, "HETSCHED_OBJECTIVES: objectives file {missing}: "),
    ({"HETSCHED_PARTITIONS": "abc"}, "HETSCHED_PARTITIONS='abc': expected an integer"),
], ids=["an unknown profile", "a missing objectives file", "a number that is not one"])
def test_a_bad_setting_stops_the_worker_with_one_line(env: dict[str, str], expected: str,
                                                      tmp_path: Path) -> None:
    missing = str(tmp_path / "objectives.toml")
    env = {k: v.format(missing=missing) for k, v in env.items()}
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "worker"], capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, **env, "KAFKA_BOOTSTRAP": "127.0.0.1:1",
                                       "HETSCHED_DATA_DIR": str(tmp_path / "data")})
    assert proc.returncode == 1
    assert proc.stderr.startswith(expected.format(missing=missing)), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
