"""What the operator journeys drive: the installed commands, run as a user runs them.

Every command runs from the operator's own folder (not the repository), with the
environment a user has plus ``KAFKA_BOOTSTRAP``, the one setting the README tells
users of another broker to set. Nothing else: no topic prefix, no data folder, no
port, so the defaults are what is tested. What the test itself reads (the task
status topic) it reads with a plain consumer, as an outside system would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiokafka import AIOKafkaConsumer

BIN = Path(sys.executable).parent
"""The virtualenv's ``bin``: where ``hetsched`` and ``hetsched-node`` are installed."""

TEST_ONLY_SETTINGS = ("HETSCHED_TOPIC_PREFIX", "HETSCHED_APP_ID", "HETSCHED_WEB_PORT",
                      "HETSCHED_DATA_DIR", "HETSCHED_CELLS", "HETSCHED_PARTITIONS",
                      "HETSCHED_TICK_S", "HETSCHED_SESSION_S")
"""Settings a developer's shell may carry; the journeys run without them (defaults)."""


@dataclass
class Operator:
    """Runs ``hetsched`` and ``hetsched-node`` from ``home`` with a user's environment."""

    home: Path
    bootstrap: str
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in TEST_ONLY_SETTINGS}
        env["KAFKA_BOOTSTRAP"] = self.bootstrap
        return env

    def run(self, *argv: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``hetsched ARGS`` to its end; the result holds stdout, stderr and the code."""
        return subprocess.run([str(BIN / "hetsched"), *argv], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)

    def shell(self, line: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """One shell line from the operator's folder, with the virtualenv on PATH."""
        env = dict(self.env, PATH=f"{BIN}{os.pathsep}{self.env.get('PATH', '')}")
        return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=self.home, env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)

    def start(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        """Start a long-running command (worker, nodes) in its own session, logged."""
        log = (self.home / f"{name}.log").open("ab")
        proc = subprocess.Popen([str(BIN / argv[0]), *argv[1:]], cwd=self.home, env=self.env,
                                stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self, grace_s: float = 20) -> None:
        """SIGTERM each process group (as Ctrl-C or systemd would), SIGKILL stragglers."""
        for _, proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for _, proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def write_spec(self, name: str, spec: dict[str, Any]) -> str:
        """A task file in the operator's folder, as a user writes one; its name."""
        (self.home / name).write_text(yaml.safe_dump(spec, sort_keys=False))
        return name


def wait_until(what: str, condition: Callable[[], Any], timeout_s: float = 90,
               every_s: float = 0.5) -> Any:
    """Poll ``condition`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(every_s)


def web_json(url: str) -> Any:
    """GET a JSON document, or None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return orjson.loads(response.read())
    except OSError:
        return None


def read_payloads(bootstrap: str, topic: str, idle_s: float = 1.5) -> list[dict[str, Any]]:
    """Every committed record of ``topic`` from the start, as envelope documents."""
    async def read() -> list[dict[str, Any]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    isolation_level="read_committed")
        await consumer.start()
        out: list[dict[str, Any]] = []
        try:
            while True:
                batches = await consumer.getmany(timeout_ms=int(idle_s * 1000))
                if not batches:
                    return out
                for records in batches.values():
                    out += [orjson.loads(r.value) for r in records if r.value]
        finally:
            await consumer.stop()

    return asyncio.run(read())


def reports_of(bootstrap: str, task_id: str) -> list[dict[str, Any]]:
    """The executors' reports on ``task_id`` (``hetsched.task-status``), oldest first."""
    return [r for r in read_payloads(bootstrap, "hetsched.task-status")
            if r.get("payload", {}).get("task_id") == task_id]


def final_report(bootstrap: str, task_id: str, timeout_s: float = 90) -> dict[str, Any]:
    """The task's ``TaskFinished`` or ``TaskFailed`` report, once the executor sent it."""
    def ended() -> dict[str, Any] | None:
        ends = [r for r in reports_of(bootstrap, task_id)
                if r["type"] in ("TaskFinished", "TaskFailed")]
        return ends[-1] if ends else None
    return wait_until(f"an end report for {task_id}", ended, timeout_s, every_s=1)
