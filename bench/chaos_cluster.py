"""The processes a chaos run controls: its own broker, scheduler workers, node clusters.

Each process runs in its own process group (``start_new_session``), so a fault
(``kill -9``, ``SIGSTOP``) hits the whole process and nothing else, and the run
can always clean up after itself. The broker is the project's embedded one
(``docker/kafka/kafka.sh``) on its own port and home folder, so restarting it
never disturbs another broker on the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KAFKA_SH = REPO / "docker" / "kafka" / "kafka.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Proc:
    """One restartable child: its command line, environment and current process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    web_port: int | None = None

    def start(self) -> None:
        out = self.log.open("ab")
        self.popen = subprocess.Popen(self.argv, env=self.env, stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True, cwd=REPO)
        out.close()

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """``kill -9`` the whole group and reap it."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)

    def stop(self, grace_s: float = 10.0) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if self.popen is not None:
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
            self.signal(signal.SIGKILL)  # grandchildren left in the group

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def healthy(self) -> bool:
        if self.web_port is None:
            return self.alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/health",
                                        timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False


@dataclass
class Broker:
    """The embedded broker on a private port and home; ``None`` port: an external one."""

    home: Path
    port: int = field(default_factory=free_port)

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, HETSCHED_KAFKA_PORT=str(self.port),
                    HETSCHED_KAFKA_HOME=str(self.home), KAFKA_BOOTSTRAP="")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> float:
        began = time.monotonic()
        subprocess.run([str(KAFKA_SH), "start"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - began

    def stop(self) -> None:
        subprocess.run([str(KAFKA_SH), "stop"], env=self.env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self) -> None:
        """``kill -9`` the broker's JVM (its pid file), as a crash would."""
        pid_file = self.home / "kafka.pid"
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
            time.sleep(1.0)


@dataclass
class Cluster:
    """Workers and simulated node clusters of one isolated deployment (topic prefix)."""

    bootstrap: str
    workdir: Path
    prefix: str
    cells: int = 4
    session_s: float = 6.0
    workers: list[Proc] = field(default_factory=list)
    nodes: list[Proc] = field(default_factory=list)

    def base_env(self) -> dict[str, str]:
        return dict(os.environ, KAFKA_BOOTSTRAP=self.bootstrap, PYTHONUNBUFFERED="1",
                    HETSCHED_TOPIC_PREFIX=self.prefix)

    def add_worker(self, extra_env: dict[str, str] | None = None,
                   python_args: Sequence[str] = ()) -> Proc:
        """Start one ``hetsched worker``; ``extra_env`` on top of the cluster's settings,
        ``python_args`` before ``-m streams.cli`` (e.g. ``-m cProfile -o FILE``)."""
        i = len(self.workers)
        port = free_port()
        env = dict(self.base_env(), HETSCHED_APP_ID=f"{self.prefix}scheduler",
                   HETSCHED_WEB_PORT=str(port), HETSCHED_DATA_DIR=str(self.workdir / f"w{i}"),
                   HETSCHED_CELLS=str(self.cells), HETSCHED_PARTITIONS="8",
                   HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S=str(self.session_s),
                   **(extra_env or {}))
        argv = [sys.executable, *python_args, "-m", "streams.cli", "worker", "-l", "warn"]
        proc = Proc(f"worker-{i}", argv, env, self.workdir / f"worker-{i}.log", web_port=port)
        self.workers.append(proc)
        proc.start()
        return proc

    def add_nodes(self, count: int, gpus: str = "A100x4") -> Proc:
        i = len(self.nodes)
        argv = [sys.executable, "-m", "agents.cli", "sim-cluster", "--simulate", gpus,
                "--nodes", str(count), "--id-prefix", f"{self.prefix}g{i}-",
                "--topic-prefix", self.prefix, "--state-dir", str(self.workdir / f"nodes-{i}"),
                "--start-at", "beginning", "--time-scale", "1", "--interval-s", "0.5",
                "--min-interval-s", "0", "--heartbeat-s", "2", "--log-level", "WARNING"]
        proc = Proc(f"nodes-{i}", argv, self.base_env(), self.workdir / f"nodes-{i}.log")
        self.nodes.append(proc)
        proc.start()
        return proc

    def node_ids(self, per_group: int) -> list[str]:
        return [f"{self.prefix}g{g}-sim-node-{i:04d}"
                for g in range(len(self.nodes)) for i in range(per_group)]

    def wait_healthy(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(w.healthy() for w in self.workers):
                return
            time.sleep(0.5)
        raise RuntimeError("workers not healthy in time; see " + str(self.workdir))

    def stop(self) -> None:
        for proc in self.nodes + self.workers:
            proc.stop()
