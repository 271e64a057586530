"""End to end: a real worker schedules, ``hetsched export`` reads Kafka, ``replay`` proves it.

The worker runs as a child process on the session's broker with its own topic
prefix (as in tests/service). The export and the replay run as the CLI does
(``streams.cli.main``); the recorded hash is computed from the decisions topic
as exported and must equal the replayed one.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from audit_builders import NODES, tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from service_kafka import run_cli, wait_for_nodes

from schemas.codec import decode, encode
from schemas.consume import PRODUCER_DEFAULTS
from schemas.events import TaskPlaced
from schemas.kafka import aiokafka_kwargs
from schemas.topics import BY_NAME, DECISIONS, TASK_STATUS, TASKS, key_for
from schemas.topics import NODES as NODES_TOPIC
from streams.audit.workload import finish_event, node_event, task_event

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(port: int, proc: Any, processes: Any, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, processes.log_of(proc)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"worker not healthy:\n{processes.log_of(proc)}")


def _wait_nodes(port: int, count: int, proc: Any, processes: Any,
                timeout_s: float = 60.0) -> None:
    """Wait until the worker's cells hold ``count`` nodes (its ``/state``).

    The router reads the nodes and the tasks topics independently, so a task
    produced right after the registrations may reach the cell's input log
    first, and a cell with no node decides it unschedulable for good.
    """
    try:
        wait_for_nodes([port], count, timeout_s)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{processes.log_of(proc)}") from None
    assert proc.poll() is None, processes.log_of(proc)


async def _produce(bootstrap: str, topic: str, prefix: str, envelopes: list[Any]) -> None:
    spec = BY_NAME[topic]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_DEFAULTS,
                                **aiokafka_kwargs())
    await producer.start()
    try:
        for e in envelopes:
            await producer.send_and_wait(prefix + topic, encode(e), key=key_for(spec, e))
    finally:
        await producer.stop()


async def _decisions(bootstrap: str, topic: str, want: int, timeout_s: float) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                isolation_level="read_committed", **aiokafka_kwargs())
    await consumer.start()
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < want and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                out += [decode(r.value) for r in batch]
    finally:
        await consumer.stop()
    return out


async def test_a_recorded_run_exported_from_kafka_replays_with_every_decision_matching(
        kafka_bootstrap: str, project_env: dict[str, str], processes: Any,
        tmp_path: Path) -> None:
    prefix = f"a{uuid.uuid4().hex[:8]}."
    port = _free_port()
    env = dict(project_env, HETSCHED_APP_ID=f"{prefix}scheduler", HETSCHED_WEB_PORT=str(port),
               HETSCHED_DATA_DIR=str(tmp_path / "worker"), HETSCHED_CELLS="1",
               HETSCHED_PARTITIONS="2", HETSCHED_TOPIC_PREFIX=prefix, HETSCHED_TICK_S="1.0",
               HETSCHED_SESSION_S="6")
    worker = processes.start("worker", [sys.executable, "-m", "streams.cli", "worker", "-l",
                                        "warn"], env)
    _wait_healthy(port, worker, processes)
    await _produce(kafka_bootstrap, NODES_TOPIC, prefix,
                   [node_event(n, c, m, g, mdl, T0) for n, c, m, g, mdl in NODES])
    _wait_nodes(port, len(NODES), worker, processes)
    work = tasks(14)
    await _produce(kafka_bootstrap, TASKS, prefix,
                   [task_event(t, T0 + timedelta(seconds=1 + i)) for i, t in enumerate(work)])
    first = await _decisions(kafka_bootstrap, prefix + DECISIONS, len(work), 90)
    assert len(first) >= len(work), processes.log_of(worker)
    placed = [d.payload for d in first if isinstance(d.payload, TaskPlaced)]
    await _produce(kafka_bootstrap, TASK_STATUS, prefix,
                   [finish_event(p, T0 + timedelta(seconds=60 + i)) for i, p in
                    enumerate(placed[:4])])
    # finishing frees capacity: queued tasks get placed after the finishes
    more = await _decisions(kafka_bootstrap, prefix + DECISIONS, len(first) + 1, 60)
    assert len(more) > len(first), processes.log_of(worker)

    out = tmp_path / "audit.jsonl.gz"
    cli_env = dict(os.environ, **env)
    done = run_cli(["export", "-o", str(out)], cli_env)
    assert done.returncode == 0, done.stderr
    done = run_cli(["replay", str(out), "--json"], cli_env)
    result = orjson.loads(done.stdout)["replay"]
    assert done.returncode in (0, 2), done.stdout + done.stderr
    assert result["mismatches"] == 0 and result["matches"] == result["recorded"] >= len(more)
    assert result["recorded_hash"] == result["replayed_hash"]
    errors = [f for f in orjson.loads(done.stdout)["integrity"] if f["severity"] == "error"]
    assert errors == []

    live = run_cli(["replay"], cli_env)  # straight from the cluster, same verdict
    assert live.returncode == 0, live.stdout + live.stderr
    assert f"replayed {result['replayed_hash'][:16]}" in live.stdout
    story = run_cli(["explain", placed[0].task_id, str(out)], cli_env)
    assert story.returncode == 0 and "placed" in story.stdout and "finished" in story.stdout
    live_story = run_cli(["explain", placed[0].task_id], cli_env)  # from the cluster: the same
    assert live_story.returncode == 0 and live_story.stdout == story.stdout, live_story.stderr
    assert worker.poll() is None
