"""The embedded broker script: idempotent start, recovery after kill -9.

Runs a second, private broker (own port and data folder) so the shared test
broker is never disturbed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _free_port_pair() -> int:
    """A port p such that p and p+1 (the controller port) are free."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


def _java_brokers() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}


@pytest.fixture
def private_broker(tmp_path: Path, kafka_script: Path):
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    env.update(
        HETSCHED_KAFKA_PORT=str(_free_port_pair()),
        HETSCHED_KAFKA_HOME=str(tmp_path / "kafka"),
        HETSCHED_KAFKA_HEAP="-Xms128m -Xmx384m",
    )

    def run(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kafka_script), action], env=env, capture_output=True, text=True, timeout=180
        )

    run.home = tmp_path / "kafka"  # type: ignore[attr-defined]
    try:
        yield run
    finally:
        run("stop")


def test_start_twice_keeps_one_broker_and_kill9_recovers(private_broker) -> None:
    before = _java_brokers()
    first = private_broker("start")
    assert first.returncode == 0, first.stderr
    pid = int((private_broker.home / "kafka.pid").read_text())
    assert _java_brokers() - before == {pid}

    second = private_broker("start")
    assert second.returncode == 0, second.stderr
    assert "already running" in second.stderr
    assert _java_brokers() - before == {pid}, "a second start must not start a second broker"

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid in _java_brokers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert private_broker("status").returncode != 0

    third = private_broker("start")
    assert third.returncode == 0, third.stderr + private_broker("logs").stdout
    new_pid = int((private_broker.home / "kafka.pid").read_text())
    assert new_pid != pid
    assert private_broker("status").returncode == 0

    stopped = private_broker("stop")
    assert stopped.returncode == 0
    assert new_pid not in _java_brokers()
