"""A failed login says so: which principal, which mechanism, never the password.

It used to read "cannot reach Kafka ... is the broker running?", which sends an
operator after a broker that is up and answering.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SPEC = "task_id: auth-1\ntenant: vision\nresources: {gpu_count: 1}\n" \
       "executor: {kind: process, argv: [sleep, '1']}\n"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_reported_as_a_failed_login(secure_cluster, tmp_path: Path,
                                                         mechanism: str) -> None:
    wrong = "not-" + secure_cluster.passwords["alice"]
    (tmp_path / "wrong.password").write_text(wrong + "\n")
    (tmp_path / "job.yaml").write_text(SPEC)
    env = secure_cluster.env_for("alice", mechanism)
    env["KAFKA_SASL_PASSWORD_FILE"] = str(tmp_path / "wrong.password")
    for argv in (["submit", "job.yaml"], ["check"], ["export", "-o", "out.jsonl.gz"]):
        done = subprocess.run([sys.executable, "-m", "streams.cli", *argv], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        said = done.stdout + done.stderr
        secure_cluster.outputs.append(said)
        assert done.returncode == 1, said
        assert "authentication failed" in said, said
        assert "alice" in said and mechanism in said, said
        assert "is the broker running" not in said and "Traceback" not in said, said
        assert wrong not in said and secure_cluster.passwords["alice"] not in said


@pytest.mark.parametrize("argv", [["hetsched", "worker"], ["hetsched-node", "run", "--simulate",
                                                           "T4x1", "--node-id", "node-a"]],
                         ids=["worker", "node"])
def test_a_long_running_process_with_a_refused_login_stops_saying_why(
        secure_cluster, tmp_path: Path, argv: list[str]) -> None:
    """Waiting does not fix a wrong password: the process ends at once, saying so."""
    user = "scheduler" if argv[0] == "hetsched" else "node-a"
    wrong = "not-" + secure_cluster.passwords[user]
    (tmp_path / "wrong.password").write_text(wrong + "\n")
    env = secure_cluster.env_for(user)
    env["KAFKA_SASL_PASSWORD_FILE"] = str(tmp_path / "wrong.password")
    env["HETSCHED_SECURITY_CONFIG"] = str(secure_cluster.security_config)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        env["HETSCHED_WEB_PORT"] = str(probe.getsockname()[1])
    program = Path(sys.executable).parent / argv[0]
    done = subprocess.run([str(program), *argv[1:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    said = done.stdout + done.stderr
    secure_cluster.outputs.append(said)
    assert done.returncode == 1, said
    assert "authentication failed" in said and user in said, said
    assert wrong not in said and "Traceback" not in said, said
