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
    ({"HETSCHED_WEB_PORT": "70000"}, "HETSCHED_WEB_PORT=70000: must be at most 65535"),
], ids=["an unknown profile", "a missing objectives file", "a number that is not one",
        "a port past the last one"])
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


def test_a_web_port_flag_that_is_no_port_is_refused_before_anything_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """It reached Faust, which stopped the worker with a traceback."""
    from streams.cli import main

    assert main(["worker", "--web-port", "99999"]) == 2
    assert capsys.readouterr().err == "hetsched worker: --web-port 99999: must be a TCP port\n"
