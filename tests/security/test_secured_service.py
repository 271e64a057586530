"""The real scheduler worker on the secured broker, end to end.

A ``hetsched worker`` process runs as the ``scheduler`` principal (SASL_SSL,
SCRAM-SHA-512, password from a file) with the identity configuration
(``HETSCHED_SECURITY_CONFIG``) and its own decision signing key, under only the
ACLs ``hetsched acl apply`` created (conftest). Node ``node-a`` registers
itself, signed with its key; alice (tenant ``vision``) submits one task for
herself and one claiming bob's tenant ``nlp``; bob submits one of his own, then
one under alice's task id.

The worker must place alice's and bob's tasks (TaskPlaced, signed by the
scheduler, read committed as the dashboard principal), dead-letter the forged
one with ``tenant_forged`` and never decide, run or queue it, so bob's usage is
his own task only. Bob's use of alice's task id is rejected with "task id already
in use" and nothing more, and alice's task runs on. Then no secret may appear in
the worker's log, its ``/metrics`` and ``/state``, the dead letters or any process
command line.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from security_events import NOW, submission

from schemas import make_event
from schemas.codec import decode, decode_deadletter
from schemas.consume import PRODUCER_DEFAULTS, produce_event
from schemas.events import GpuSpec, NodeRegistered, TaskPlaced
from schemas.signing import HEADER_PRINCIPAL, verify_origin
from schemas.topics import BY_NAME, DEADLETTER, DECISIONS, NODES, TASKS

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def _wait_healthy(proc: Any, log: Path, port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-6000:]
        try:
            if orjson.loads(_get(port, "/health"))["status"] == "ok":
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"worker not healthy:\n{log.read_text(errors='replace')[-6000:]}")


def _wait_for_node(port: int, node: str, proc: Any, log: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-6000:]
        cells = orjson.loads(_get(port, "/state"))["cells"].values()
        if any(n["node"] == node for c in cells for n in c["nodes"]):
            return
        time.sleep(0.3)
    raise AssertionError(f"{node} not registered:\n{log.read_text(errors='replace')[-6000:]}")


def _node_a() -> Any:
    payload = NodeRegistered(
        node_id="node-a", cpu_milli=32000, memory_mib=262144, pool="training",
        gpus=[GpuSpec(index=i, uuid=f"GPU-node-a-{i}", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0) for i in range(2)],
    )
    return make_event(payload, source="agent/node-a", occurred_at=NOW)


async def _produce(cluster: Any, user: str, topic: str, envelopes: list[Any]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap, **PRODUCER_DEFAULTS, **cluster.kwargs_for(user)
    )
    await producer.start()
    try:
        for envelope in envelopes:
            await produce_event(producer, BY_NAME[topic], envelope, signer=cluster.signer(user))
    finally:
        await producer.stop()


async def _read_until(cluster: Any, topic: str, done: Any, timeout_s: float) -> list[Any]:
    """Records of ``topic`` from the start, read committed as the dashboard principal."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, isolation_level="read_committed",
        enable_auto_commit=False, **cluster.kwargs_for("grafana"),
    )
    await consumer.start()
    records: list[Any] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(cluster.partitions_of(topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not done(records):
            for batch in (await consumer.getmany(timeout_ms=300)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


async def test_the_real_worker_binds_tenants_on_the_secured_broker_and_leaks_no_secret(
    secure_cluster: Any, processes: Any, tmp_path: Path
) -> None:
    cluster = secure_cluster
    run = uuid.uuid4().hex[:8]
    # The scheduler signs its decisions with its own key (docs/security.md).
    scheduler_key = secrets.token_hex(32)
    key_file = tmp_path / "scheduler.key"
    key_file.write_text(scheduler_key + "\n")
    key_file.chmod(0o600)
    port = _free_port()
    env = cluster.env_for("scheduler")
    env.update(
        HETSCHED_SECURITY_CONFIG=str(cluster.security_config),
        HETSCHED_SIGNING_KEY_FILE=str(key_file),
        HETSCHED_APP_ID=f"hetsched-scheduler-{run}",  # covered by the prefixed ACLs
        HETSCHED_WEB_PORT=str(port), HETSCHED_DATA_DIR=str(tmp_path / "worker"),
        HETSCHED_CELLS="1", HETSCHED_PARTITIONS=str(cluster.partitions),
        HETSCHED_TOPIC_PREFIX="", HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6",
        PYTHONUNBUFFERED="1",
    )
    worker = processes.start(
        "secured-worker", [sys.executable, "-m", "streams.cli", "worker", "-l", "info"], env
    )
    log = Path(worker.log_path)
    _wait_healthy(worker, log, port)

    own = submission(f"alice-own-{run}", "vision", 500)
    forged = submission(f"alice-forged-{run}", "nlp", 1000)
    bobs = submission(f"bob-own-{run}", "nlp", 250)
    await _produce(cluster, "node-a", NODES, [_node_a()])
    _wait_for_node(port, "node-a", worker, log)  # tasks before any node are unschedulable
    await _produce(cluster, "alice", TASKS, [own, forged])
    await _produce(cluster, "bob", TASKS, [bobs])

    placed_ids = {own.payload.task_id, bobs.payload.task_id}

    def decided(records: list[Any]) -> bool:  # a task may queue until node-a is routed
        return placed_ids <= {_task_of(r) for r in records if _task_of(r, TaskPlaced)}

    decision_records = await _read_until(cluster, DECISIONS, decided, 60)
    ours = [r for r in decision_records
            if _task_of(r) in {*placed_ids, forged.payload.task_id}]
    decisions = [decode(r.value).payload for r in ours]
    assert {d.task_id for d in decisions} == placed_ids, [d.model_dump() for d in decisions]
    placed = {d.task_id: d.node_id for d in decisions if isinstance(d, TaskPlaced)}
    assert placed == dict.fromkeys(placed_ids, "node-a"), [d.model_dump() for d in decisions]
    for record in ours:  # decisions carry the scheduler's verifiable signature
        assert dict(record.headers)[HEADER_PRINCIPAL] == b"scheduler"
        assert verify_origin(DECISIONS, record.key, record.value, record.headers,
                             {"scheduler": scheduler_key.encode()}) == "scheduler"

    # Bob, bound to his own tenant, submits alice's task id: it is in use, and that is all
    # he learns (not whose it is, where it runs or in what state); alice's task goes on.
    squat = submission(own.payload.task_id, "nlp", 250)
    await _produce(cluster, "bob", TASKS, [squat])
    answers = await _read_until(
        cluster, DECISIONS, lambda rs: any(_cause_of(r) == squat.event_id for r in rs), 60)
    (answer,) = [decode(r.value) for r in answers if _cause_of(r) == squat.event_id]
    assert answer.type == "TaskRejected", answer
    assert answer.payload.task_id == own.payload.task_id
    assert answer.payload.reason.message == "task id already in use"

    letters_raw = await _read_until(
        cluster, DEADLETTER,
        lambda rs: any(_letter_id(r) == forged.event_id for r in rs), 30)
    letters = [decode_deadletter(r.value) for r in letters_raw
               if _letter_id(r) == forged.event_id]
    assert len(letters) == 1
    assert letters[0].reason == "validation_failed"
    assert letters[0].message.startswith("tenant_forged:")
    assert letters[0].errors[0].field == "payload.tenant"

    # Nothing of the forged task reached the cell: bob's usage is his own task only.
    state_text = _get(port, "/state")
    cell = orjson.loads(state_text)["cells"]["cell-0"]
    running = {t["task"]: t["share_milli"] for t in cell["running"]}
    assert forged.payload.task_id not in running
    assert forged.payload.task_id not in cell["queue"]
    assert running[bobs.payload.task_id] == 250
    assert running[own.payload.task_id] == 500
    metrics_text = _get(port, "/metrics")
    assert "hetsched_" in metrics_text

    ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True,
                        check=False).stdout
    assert worker.poll() is None, log.read_text(errors="replace")[-6000:]
    processes.stop_all()
    texts = {
        "worker log": log.read_text(errors="replace"),
        "/metrics": metrics_text,
        "/state": state_text,
        "dead letters": "\n".join(r.value.decode(errors="replace") for r in letters_raw),
        "decisions": "\n".join(r.value.decode(errors="replace") for r in decision_records),
        "ps": ps,
        "/proc cmdlines": _all_command_lines(),
    }
    assert "hetsched-scheduler" in texts["worker log"]
    cluster.outputs.append(texts["worker log"])
    all_secrets = {**cluster.passwords,
                   **{f"{u} signing key": k.decode() for u, k in cluster.signing_keys.items()},
                   "scheduler signing key": scheduler_key}
    leaks = [(where, whose) for where, text in texts.items()
             for whose, secret in all_secrets.items() if secret in text]
    assert not leaks, f"secrets found (where, whose): {leaks}"


def _task_of(record: Any, kind: type = object) -> str | None:
    """The task id of a decision record of type ``kind``, else None."""
    try:
        payload = getattr(decode(record.value), "payload", None)
    except ValueError:  # other tests' probe bytes
        return None
    return getattr(payload, "task_id", None) if isinstance(payload, kind) else None


def _cause_of(record: Any) -> str | None:
    try:
        return getattr(decode(record.value), "causation_id", None)
    except ValueError:  # other tests' probe bytes
        return None


def _letter_id(record: Any) -> str | None:
    try:
        return decode_deadletter(record.value).event_id
    except ValueError:  # other tests' probe bytes
        return None


def _all_command_lines() -> str:
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(lines)

