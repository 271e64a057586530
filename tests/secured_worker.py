"""A real scheduler worker on the secured broker, kept apart from the session's other tests.

The secured broker is one per test session (``secure_broker.py``), and a worker with
a new app id reads every input topic from its start: it would route the records of
every earlier test into its cells (their nodes, their tasks on those nodes' GPUs).
So each worker here gets its own identity configuration: the same principals and
signing keys, bound to tenants and node ids of this run only (``vision-<run>``,
``node-a-<run>``). Earlier tests' records then do not bind (``tenant_forged``,
``node_forged``) and never reach its cells; this run's records, signed by the same
users, do.

Helpers: start the worker and wait for it, produce signed events as a user, read a
topic as the read-only dashboard principal until a condition holds, and run a
``hetsched`` command as a user.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from secure_broker import SecureCluster

from schemas import make_event
from schemas.codec import decode, decode_deadletter
from schemas.consume import PRODUCER_DEFAULTS, produce_event
from schemas.deadletter import DeadLetter
from schemas.events import Envelope, Event, GpuSpec, NodeRegistered, TaskSubmitted
from schemas.topics import BY_NAME

REPO_ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SecuredWorker:
    """A running ``hetsched worker`` as ``User:scheduler`` with this run's identities."""

    cluster: SecureCluster
    run: str
    port: int
    proc: Any
    log: Path

    def tenant(self, user: str) -> str:
        """The tenant ``user`` (alice, bob) is bound to in this run."""
        return {"alice": "vision", "bob": "nlp"}[user] + f"-{self.run}"

    def node(self, user: str) -> str:
        """The node id ``user`` (node-a, node-b) speaks for in this run."""
        return f"{user}-{self.run}"

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return orjson.loads(r.read())

    def cell(self) -> Any:
        """``/state`` of the worker's one cell (empty until its partition is assigned)."""
        return self.get("/state")["cells"].get("cell-0") or {"nodes": [], "running": [],
                                                             "queue": []}

    def wait_for_node(self, node: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_tail()
            if any(n["node"] == node for n in self.cell()["nodes"]):
                return
            time.sleep(0.3)
        raise AssertionError(f"{node} not registered:\n{self.log_tail()}")


def start_worker(cluster: SecureCluster, processes: Any, tmp_path: Path) -> SecuredWorker:
    """Start the worker with an identity configuration of its own (module docstring)."""
    run = uuid.uuid4().hex[:8]
    keys = {user: str(path) for user, path in cluster.signing_key_files.items()}
    config = {
        "tenants": {"alice": f"vision-{run}", "bob": f"nlp-{run}"},
        "nodes": {"node-a": [f"node-a-{run}"], "node-b": [f"node-b-{run}"]},
        "signing_keys": keys,  # absolute paths: the configuration is not beside them
    }
    config_file = tmp_path / "security.yaml"
    config_file.write_text(yaml.safe_dump(config))
    port = _free_port()
    env = cluster.env_for("scheduler")
    env.update(
        HETSCHED_SECURITY_CONFIG=str(config_file),
        HETSCHED_APP_ID=f"hetsched-scheduler-{run}",  # covered by the prefixed ACLs
        HETSCHED_WEB_PORT=str(port), HETSCHED_DATA_DIR=str(tmp_path / "worker"),
        HETSCHED_CELLS="1", HETSCHED_PARTITIONS=str(cluster.partitions),
        HETSCHED_TOPIC_PREFIX="", HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6",
        PYTHONUNBUFFERED="1",
    )
    env.pop("HETSCHED_SIGNING_KEY_FILE", None)
    proc = processes.start(f"secured-worker-{run}",
                           [sys.executable, "-m", "streams.cli", "worker", "-l", "info"], env)
    worker = SecuredWorker(cluster, run, port, proc, Path(proc.log_path))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, worker.log_tail()
        try:
            if worker.get("/health")["status"] == "ok":
                return worker
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"worker not healthy:\n{worker.log_tail()}")


def registration(node_id: str, gpus: int) -> Envelope[Event]:
    payload = NodeRegistered(
        node_id=node_id, cpu_milli=32000, memory_mib=262144, pool="training",
        gpus=[GpuSpec(index=i, uuid=f"GPU-{node_id}-{i}", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0) for i in range(gpus)],
    )
    return make_event(payload, source=f"agent/{node_id}", occurred_at=NOW)


def submission(task_id: str, tenant: str) -> Envelope[Event]:
    """A whole-GPU task (nothing runs it: no executor takes part)."""
    payload = TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": tenant,
        "resources": {"gpu_count": 1, "gpu_share_milli": 1000},
        "executor": {"kind": "process", "argv": ["python", "train.py"]}})
    return make_event(payload, source="cli/test", occurred_at=NOW)


def status(payload: Event, node_id: str) -> Envelope[Event]:
    return make_event(payload, source=f"executor/{node_id}", occurred_at=NOW)


async def produce(cluster: SecureCluster, user: str, topic: str,
                  envelopes: list[Envelope[Event]]) -> None:
    """Write ``envelopes`` to the catalog ``topic`` as ``user``, signed with its key."""
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, **PRODUCER_DEFAULTS,
                                **cluster.kwargs_for(user))
    await producer.start()
    try:
        for envelope in envelopes:
            await produce_event(producer, BY_NAME[topic], envelope, signer=cluster.signer(user))
    finally:
        await producer.stop()


async def read_until(cluster: SecureCluster, topic: str, done: Callable[[list[Any]], bool],
                     timeout_s: float = 60.0) -> list[Any]:
    """``topic`` from its start, read committed as the dashboard principal, until
    ``done(records)`` (or the deadline: the caller's assertion then says what is missing)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, isolation_level="read_committed",
        enable_auto_commit=False, **cluster.kwargs_for("grafana"),
    )
    await consumer.start()
    records: list[Any] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(cluster.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done(records):
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


def envelope_of(record: Any) -> Envelope[Any] | None:
    """The record's envelope, or None (another test's probe bytes, a dead letter)."""
    env = decode(record.value or b"")
    return env if isinstance(env, Envelope) else None


def letter_of(record: Any) -> DeadLetter | None:
    try:
        return decode_deadletter(record.value or b"")
    except ValueError:
        return None


def hetsched(cluster: SecureCluster, user: str, *args: str,
             timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    """``hetsched ARGS`` as ``user`` (a real command: its own process and login)."""
    done = subprocess.run([sys.executable, "-m", "streams.cli", *args],
                          env=cluster.env_for(user), capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=timeout_s, check=False)
    cluster.outputs.append(done.stdout + done.stderr)  # for the secret scan
    return done
