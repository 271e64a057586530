"""Kafka unreachable: processes wait (backoff, low CPU, /health 503), then resume without loss.

Real processes against a broker of the test's own (``HETSCHED_KAFKA_PORT`` and
``HETSCHED_KAFKA_HOME`` for ``docker/kafka/kafka.sh``), never the shared one:

1. a scheduler worker and a node (agent + executor) start while nothing listens
   on the port: they stay up, their ``/health`` says 503 ``unreachable`` with
   the last error, and they keep retrying (the attempts go on counting);
2. ``hetsched submit`` against the dead port fails on its one attempt, naming the
   address, without a traceback and without retrying;
3. the broker starts: both turn healthy, submitted tasks are placed, run and finish;
4. the broker stops while tasks run: both say 503 and retry; it comes back:
   the finishes produced during the outage arrive, a second batch is placed, and
   ``hetsched check --settled`` (no task lost, no decision repeated or applied
   twice) passes.

``HETSCHED_TEST_DEAD_KAFKA_PORT`` (19392) picks the port (its +1 is the controller).

What the waiting costs (CPU seconds, once asserted here) depends on the machine and
its load, so it is measured by ``bench/kafka_unreachable_cpu.py``; the backoff's
pacing itself is pinned with a seeded clock in tests/schemas/test_backoff.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from schemas.codec import decode
from schemas.topics import DECISIONS, TASK_STATUS

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "docker" / "kafka" / "kafka.sh"
PORT = int(os.environ.get("HETSCHED_TEST_DEAD_KAFKA_PORT", "19392"))
RETRIED = 3
"""Failed attempts each process must count while it waits: it goes on retrying."""
RETRY_LINE = "retrying in"
"""What ``schemas.backoff.retry`` logs before each wait; a one-shot command never does."""


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _health(port: int) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of ``/health``; (0, {}) when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status, orjson.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())
    except OSError:
        return 0, {}


def _wait_health(port: int, status: int, procs: list[Any], processes: Any,
                 timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    got: tuple[int, dict[str, Any]] = (0, {})
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"a process exited:\n{processes.log_of(p)[-4000:]}"
        got = _health(port)
        if got[0] == status:
            return got[1]
        time.sleep(0.25)
    logs = "\n".join(processes.log_of(p)[-3000:] for p in procs)
    raise AssertionError(f"/health on :{port} is {got}, not {status}, after {timeout_s}s\n{logs}")


def _wait_for_attempts(port: int, at_least: int, procs: list[Any], processes: Any,
                       timeout_s: float) -> dict[str, Any]:
    """Until ``/health`` on ``port`` counts ``at_least`` failed attempts while unreachable:
    the process is still waiting and retrying (it neither gave up nor stopped trying)."""
    deadline = time.monotonic() + timeout_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"a process exited:\n{processes.log_of(p)[-4000:]}"
        status, body = _health(port)
        if status == 503 and body["kafka"]["failed_attempts"] >= at_least:
            return body
        time.sleep(0.25)
    logs = "\n".join(processes.log_of(p)[-3000:] for p in procs)
    raise AssertionError(f"/health on :{port} never counted {at_least} failed attempts "
                         f"in {timeout_s}s (last {body})\n{logs}")


def _wait_for_node(web: int, procs: list[Any], processes: Any, timeout_s: float) -> None:
    """Until the worker's cells hold the node (its registration went through the router)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/state", timeout=2) as r:
                cells = orjson.loads(r.read())["cells"]
            if any(c["nodes"] for c in cells.values()):
                return
        except OSError:
            pass
        time.sleep(0.25)
    logs = "\n".join(processes.log_of(p)[-3000:] for p in procs)
    raise AssertionError(f"the node never reached the worker's cells\n{logs}")


def _broker(action: str, env: dict[str, str]) -> None:
    subprocess.run([str(KAFKA_SH), action], env=env, check=True, capture_output=True,
                   timeout=120)


def _spec(task_id: str, duration_s: float) -> dict[str, Any]:
    return {"task_id": task_id, "tenant": "team-a",
            "resources": {"gpu_count": 1, "gpu_share_milli": 500, "cpu_milli": 500,
                          "memory_mib": 1024},
            "executor": {"kind": "simulated", "simulated": {
                "duration_s": duration_s, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 512}}}


def _submit(env: dict[str, str], path: Path, specs: list[dict[str, Any]]
            ) -> subprocess.CompletedProcess[str]:
    path.write_bytes(orjson.dumps(specs))
    return subprocess.run([sys.executable, "-m", "streams.cli", "submit", str(path)], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=60)


async def _read(bootstrap: str, topic: str, until: Any, timeout_s: float) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not until(out):
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                out += [decode(r.value) for r in batch]
    finally:
        await consumer.stop()
    return out


def _started(envs: list[Any], tasks: set[str]) -> bool:
    return tasks <= {e.payload.task_id for e in envs if e.type == "TaskStarted"}


def _finished(envs: list[Any], tasks: set[str]) -> bool:
    return tasks <= {e.payload.task_id for e in envs if e.type == "TaskFinished"}


def test_worker_and_node_wait_out_a_missing_broker_and_resume_without_loss(
        processes: Any, tmp_path: Path) -> None:
    if _listening(PORT) or _listening(PORT + 1):
        pytest.skip(f"port {PORT} or {PORT + 1} is taken; set HETSCHED_TEST_DEAD_KAFKA_PORT")
    bootstrap = f"127.0.0.1:{PORT}"
    base = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    broker_env = dict(base, HETSCHED_KAFKA_PORT=str(PORT),
                      HETSCHED_KAFKA_HOME=str(tmp_path / "kafka"))
    prefix = f"u{uuid.uuid4().hex[:8]}."
    web, metrics = _free_port(), _free_port()
    env = dict(base, KAFKA_BOOTSTRAP=bootstrap, PYTHONUNBUFFERED="1",
               HETSCHED_KAFKA_RETRY_MAX_S="2", HETSCHED_APP_ID=f"{prefix}scheduler",
               HETSCHED_TOPIC_PREFIX=prefix, HETSCHED_WEB_PORT=str(web),
               HETSCHED_DATA_DIR=str(tmp_path / "worker"), HETSCHED_PARTITIONS="2",
               HETSCHED_CELLS="1", HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6")
    worker = processes.start("worker", [sys.executable, "-m", "streams.cli", "worker", "-l",
                                        "warn"], env)
    node = processes.start("node", [
        sys.executable, "-m", "agents.cli", "run", "--simulate", "A100x2",
        "--node-id", f"{prefix}node", "--topic-prefix", prefix, "--time-scale", "1",
        "--state-dir", str(tmp_path / "node"), "--metrics-port", str(metrics),
        "--log-level", "INFO"], env)
    procs = [worker, node]
    t0 = time.monotonic()

    def phase(name: str) -> None:
        print(f"[{time.monotonic() - t0:5.1f}s] {name}", flush=True)

    try:
        # 1. Nothing listens: both wait, say so, and stay calm.
        for port in (web, metrics):
            body = _wait_health(port, 503, procs, processes, 60)
            for _ in range(40):  # the first attempt may still be under way
                if body["kafka"]["last_error"]:
                    break
                time.sleep(0.25)
                body = _wait_health(port, 503, procs, processes, 10)
            assert body["kafka"]["state"] == "unreachable", body
            assert body["kafka"]["bootstrap"] == bootstrap
            assert "Unable to bootstrap" in (body["kafka"]["last_error"] or ""), body
            assert body["kafka"]["since"], body
        phase("both say unreachable")

        # 2. Meanwhile a one-shot CLI command fails on its one attempt and says where it
        # looked (``_submit``'s timeout is the deadline for "at once").
        cli = _submit(env, tmp_path / "early.json", [_spec("early", 1.0)])
        assert cli.returncode != 0
        assert bootstrap in cli.stderr and "Traceback" not in cli.stderr, cli.stderr
        assert RETRY_LINE not in cli.stderr, cli.stderr

        for port in (web, metrics):  # still waiting, still retrying
            _wait_for_attempts(port, RETRIED, procs, processes, 90)
        phase(f"both retried {RETRIED} times")

        # 3. The broker arrives: both recover by themselves and work.
        _broker("start", broker_env)
        phase("broker started")
        for port in (web, metrics):
            assert _wait_health(port, 200, procs, processes, 90)["kafka"]["state"] == "ok"
        phase("both healthy")
        _wait_for_node(web, procs, processes, 60)
        first = {f"a{i}" for i in range(3)}
        # 12 reference seconds: ~5 s on an A100 (agents/backends/simulated.py); the
        # broker is kept down until they are over, so a finish waits in the node.
        cli = _submit(env, tmp_path / "a.json", [_spec(t, 12.0) for t in sorted(first)])
        assert cli.returncode == 0, cli.stderr
        started = asyncio.run(_read(bootstrap, prefix + TASK_STATUS,
                                    lambda es: _started(es, first), 30))
        assert _started(started, first), [(e.type, e.payload.task_id) for e in started]
        last_start = max(e.occurred_at.timestamp() for e in started if e.type == "TaskStarted")

        # 4. The broker goes away while they run: 503, calm; back: nothing lost.
        phase("first batch started")
        _broker("stop", broker_env)
        down_at = time.time()
        phase("broker stopped")
        for port in (web, metrics):
            assert _wait_health(port, 503, procs, processes, 30)["kafka"]["state"] == \
                "unreachable"
        phase("both say unreachable")
        for port in (web, metrics):
            _wait_for_attempts(port, 2, procs, processes, 60)
        phase("both retrying")
        time.sleep(max(0.0, last_start + 7 - time.time()))  # the first batch is over
        up_at = time.time()
        _broker("start", broker_env)
        phase("broker restarted")
        for port in (web, metrics):
            _wait_health(port, 200, procs, processes, 90)
        phase("both healthy again")
        second = {f"b{i}" for i in range(3)}
        cli = _submit(env, tmp_path / "b.json", [_spec(t, 1.0) for t in sorted(second)])
        assert cli.returncode == 0, cli.stderr
        status = asyncio.run(_read(bootstrap, prefix + TASK_STATUS,
                                   lambda es: _finished(es, first | second), 60))
        assert _finished(status, first | second), [
            (e.type, e.payload.task_id) for e in status]
        phase("every task finished")
        during = [e.payload.task_id for e in status if e.type == "TaskFinished"
                  and down_at <= e.occurred_at.timestamp() <= up_at]
        phase(f"finished while the broker was down, delivered after: {sorted(during)}")
        assert during, "no task finished during the outage: the test proves less than it says"
        finishes = Counter(e.payload.task_id for e in status if e.type == "TaskFinished")
        assert all(finishes[t] == 1 for t in first | second), finishes
        starts = Counter(e.payload.decision_id for e in status if e.type == "TaskStarted")
        assert all(n == 1 for n in starts.values()), starts
        decisions = asyncio.run(_read(bootstrap, prefix + DECISIONS, lambda es: False, 3))
        ids = Counter(e.event_id for e in decisions)
        assert all(n == 1 for n in ids.values()), "a decision was emitted twice"
        check = subprocess.run(
            [sys.executable, "-m", "streams.cli", "check", "--settled", "--topic-prefix",
             prefix], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        phase("hetsched check --settled passed")
    finally:
        processes.stop_all()
        with contextlib.suppress(Exception):
            _broker("stop", broker_env)


def test_submit_against_a_dead_port_fails_fast_naming_the_address(tmp_path: Path) -> None:
    port = _free_port()  # bound and released: nothing listens there now
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    env["KAFKA_BOOTSTRAP"] = f"127.0.0.1:{port}"
    result = _submit(env, tmp_path / "job.json", [_spec("t1", 1.0)])  # its timeout: the deadline
    assert result.returncode == 1, result
    assert RETRY_LINE not in result.stderr, result.stderr  # one attempt, no backoff
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "submitted" not in result.stdout
