"""Session-wide test fixtures: the real Kafka broker, small hand-made clusters, and an
audit file that is mostly telemetry.

The integration tests talk to a real Apache Kafka broker. If ``KAFKA_BOOTSTRAP``
is set they use that cluster; otherwise the session starts the project's
embedded broker (``docker/kafka/kafka.sh start``) unless it already runs, and
stops it at the end if this session was the one that started it (set
``HETSCHED_KEEP_KAFKA=1`` to leave it running between runs).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# A test that reaches a broker without the integration mark fails before it starts one.
from broker_guard import pytest_runtest_setup  # noqa: F401

# The secured broker (one per session), for tests/security and tests/attacks alike.
from secure_broker import SecureCluster, secure_cluster  # noqa: F401

from streams.core.state import ClusterState

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_SCRIPT = REPO_ROOT / "docker" / "kafka" / "kafka.sh"


def _broker_answers(env: dict[str, str] | None = None) -> bool:
    status = subprocess.run(
        [str(KAFKA_SCRIPT), "status"], capture_output=True, text=True, env=env, check=False
    )
    return status.returncode == 0


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a running Kafka broker for this test session."""
    external = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if external:
        yield external
        return
    port = os.environ.get("HETSCHED_KAFKA_PORT", "").strip() or "9092"
    started_here = False
    if not _broker_answers():
        began = time.monotonic()
        start = subprocess.run([str(KAFKA_SCRIPT), "start"], check=True,
                               capture_output=True, text=True)
        print(start.stdout + start.stderr, end="")
        # A status probe can time out on a loaded machine while the broker runs;
        # then `start` finds it running and this session must not stop it later.
        started_here = "already running" not in start.stdout + start.stderr
        print(f"\nkafka: embedded broker ready after {time.monotonic() - began:.1f}s")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if started_here and not os.environ.get("HETSCHED_KEEP_KAFKA"):
            subprocess.run([str(KAFKA_SCRIPT), "stop"], check=False)


@pytest.fixture(scope="session")
def kafka_script() -> Path:
    """Path of the embedded broker's control script."""
    return KAFKA_SCRIPT


@pytest.fixture
def project_env(kafka_bootstrap: str) -> dict[str, str]:
    """Environment for child processes of a test: pointed at the test broker."""
    env = dict(os.environ)
    env["KAFKA_BOOTSTRAP"] = kafka_bootstrap
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ProcessGroup:
    """Child processes of one test, each in its own session, all ended at teardown.

    Tests of real workers, agents and executors start them through this so
    that a failing test never leaves a process behind.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, argv: list[str], env: dict[str, str], *, cwd: Path = REPO_ROOT
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``cwd`` (the repository unless a test needs another, e.g. to
        see where a command's relative default paths land)."""
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=cwd,
        )
        proc.log_path = self.log_dir / f"{name}.log"  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    @staticmethod
    def log_of(proc: subprocess.Popen[bytes]) -> str:
        return Path(proc.log_path).read_text(errors="replace")  # type: ignore[attr-defined]

    def stop_all(self, grace_s: float = 10.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, 15)
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            remaining = max(0.1, deadline - time.monotonic())
            try:
                proc.wait(remaining)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, 9)
                proc.wait(5)
            # The group may hold grandchildren even after the leader exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    """Start real child processes; all are stopped when the test ends."""
    group = ProcessGroup(tmp_path)
    try:
        yield group
    finally:
        group.stop_all()


def make_cluster(*nodes: tuple[str, int, int, int, str | None]) -> ClusterState:
    """Nodes as (name, cpu_milli, memory_mib, gpus, model); ranks = order given."""
    state = ClusterState(capacity=4)
    for name, cpu, mem, gpus, model in nodes:
        state.add_node(name, cpu, mem, gpus, model)
    return state


@pytest.fixture
def cluster_factory():
    """Small hand-made clusters for core and policy tests (no traces, no Kafka)."""
    return make_cluster


@dataclass(frozen=True)
class TelemetryLog:
    """An audit file of 20 node registrations and 4,000 telemetry records (no decisions
    but the registrations'), and what its input log is: records and their bytes."""

    path: Path
    inputs: int
    input_bytes: int


@pytest.fixture
def telemetry_audit_file(tmp_path: Path) -> TelemetryLog:
    """For the tests that an audit command reads a file without holding its inputs."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    from replay import telemetry_log

    from streams.audit import logfile
    from streams.audit.logfile import Header

    nodes = [(f"n{i}", 32000, 262144, 8, "A100") for i in range(20)]
    inputs, decisions = telemetry_log(nodes, "bestfit", 4000)
    path = tmp_path / "telemetry.jsonl.gz"
    logfile.write(path, Header(topics=[], exported_at=""), inputs + decisions)
    return TelemetryLog(path, len(inputs), sum(len(r.value or b"") for r in inputs))
