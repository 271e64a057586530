"""The cluster the attack suite attacks: the secured session broker, one real scheduler
worker and one real node, and what every attack asserts afterwards.

One for the whole folder (``attack_cluster`` in its conftest): the worker and the
node take most of the suite's time to start, and every attack must leave the same
live cluster sound, so they share it. The worker runs as ``User:scheduler`` with the
identity configuration and its own decision signing key; the node is ``node-b``
(``User:node-b``, signing its events) with a sandbox, running only decisions signed by
that scheduler. Its GPUs are simulated T4s and the suite's tasks ask for a T4, and
node-b retires when the suite ends (:func:`_retirement`), so a later worker of the
session (tests/security) that re-reads these topics from their start neither puts the
suite's tasks on the A100s it registers for ``node-a`` nor its own tasks on node-b.
The attacks that need a second node register ``node-a`` (A100s, no agent:
:func:`a100_node`), give it only A100 tasks (:func:`whole_a100`), and cancel them
when done, so such a later worker finds none of them to place.

After each attack a test calls :meth:`AttackCluster.assert_nothing_lost`: the real
``hetsched check --settled`` over the cluster's topics, as the scheduler principal.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from schemas import make_event
from schemas.codec import decode, decode_deadletter
from schemas.consume import PRODUCER_DEFAULTS, produce_event
from schemas.deadletter import DeadLetter
from schemas.events import (
    Envelope,
    Event,
    ExecutorSpec,
    GpuFailed,
    GpuSpec,
    NodeLeft,
    NodeRegistered,
    ResourceRequest,
    SimulatedWork,
    TaskCancelled,
    TaskSubmitted,
)
from schemas.topics import BY_NAME, DEADLETTER, NODES

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE = "node-b"
"""The real node of the suite (its principal is ``User:node-b``)."""
GPU_MODEL = "T4"
SHARE_MILLI = 100
"""Every suite task books a tenth of a T4: the node's two GPUs hold twenty at once."""


def run_id() -> str:
    return uuid.uuid4().hex[:8]


def submission(task_id: str, tenant: str, spec: ExecutorSpec | None = None) -> Envelope[Event]:
    """A suite task: a tenth of one T4, running ``spec`` (a short simulated job)."""
    payload = TaskSubmitted(
        task_id=task_id, tenant=tenant,
        resources=ResourceRequest(gpu_count=1, gpu_share_milli=SHARE_MILLI,
                                  gpu_models=[GPU_MODEL]),
        executor=spec or simulated(1.0),
    )
    return make_event(payload, source="cli/attack", occurred_at=datetime.now(UTC))


def cancellation(task_id: str) -> Envelope[Event]:
    return make_event(TaskCancelled(task_id=task_id), source="cli/attack",
                      occurred_at=datetime.now(UTC))


def whole_a100(task_id: str, tenant: str) -> Envelope[Event]:
    """A task of one whole A100: only a registered node-a (:func:`a100_node`) can hold
    it, never node-b's T4s. Nothing runs it (node-a has no agent)."""
    payload = TaskSubmitted(
        task_id=task_id, tenant=tenant,
        resources=ResourceRequest(gpu_count=1, gpu_share_milli=1000, gpu_models=["A100"]),
        executor=ExecutorSpec(kind="process", argv=["python", "train.py"]),
    )
    return make_event(payload, source="cli/attack", occurred_at=datetime.now(UTC))


def a100_node(node_id: str, gpus: int) -> Envelope[Event]:
    """The registration of a node of ``gpus`` A100s (only registered: no agent runs it)."""
    payload = NodeRegistered(
        node_id=node_id, cpu_milli=32000, memory_mib=262144, pool="training",
        gpus=[GpuSpec(index=i, uuid=f"GPU-{node_id}-{i}", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0) for i in range(gpus)],
    )
    return make_event(payload, source=f"agent/{node_id}", occurred_at=datetime.now(UTC))


def report(payload: Event, node_id: str) -> Envelope[Event]:
    """A task status report as ``node_id``'s executor sends it."""
    return make_event(payload, source=f"executor/{node_id}", occurred_at=datetime.now(UTC))


def simulated(duration_s: float) -> ExecutorSpec:
    work = SimulatedWork(duration_s=duration_s, gpu_util_pct=50.0, gpu_mem_used_mib=500)
    return ExecutorSpec(kind="simulated", simulated=work)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AttackCluster:
    """Handles to the running worker and node, and the checks every attack shares."""

    secure: Any
    """The session's ``SecureCluster`` (tests/secure_broker.py)."""
    web_port: int
    workdir_root: Path
    """The node's ``executor.sandbox.workdir_root``."""
    outside: Path
    """A folder beside the workdir root: no task may reach it."""
    logs: dict[str, Path] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # -- producing, as a principal -----------------------------------------------------

    async def produce(self, user: str, topic: str, *envelopes: Envelope[Event],
                      signer_of: str | None = None) -> None:
        """Send ``envelopes`` as ``user`` (Kafka credentials), signed as ``signer_of``
        (default ``user``), under the catalog's keys."""
        producer = await self._producer(user)
        try:
            for envelope in envelopes:
                await produce_event(producer, BY_NAME[topic], envelope,
                                    signer=self.secure.signer(signer_of or user))
        finally:
            await producer.stop()

    async def produce_raw(self, user: str, topic: str, value: bytes, key: bytes) -> None:
        """Send bytes as ``user``, signed with ``user``'s key (a signature is not a
        licence: the bytes must still decode)."""
        producer = await self._producer(user)
        try:
            headers = self.secure.signer(user).headers(topic, key, value)
            await producer.send_and_wait(topic, value, key=key, headers=headers)
        finally:
            await producer.stop()

    async def _producer(self, user: str) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(bootstrap_servers=self.secure.bootstrap,
                                    max_request_size=2 * 1024 * 1024,
                                    **PRODUCER_DEFAULTS, **self.secure.kwargs_for(user))
        await producer.start()
        return producer

    # -- reading, as the dashboard principal -------------------------------------------

    @contextlib.asynccontextmanager
    async def _reading(self, topic: str, **fetch: int) -> AsyncIterator[
            tuple[AIOKafkaConsumer, list[TopicPartition]]]:
        """A consumer of every partition of ``topic`` from its start (read committed, as
        ``grafana``, no group) and those partitions; stopped after. ``fetch``: its fetch
        sizes, if not aiokafka's defaults."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.secure.bootstrap, group_id=None,
            isolation_level="read_committed", enable_auto_commit=False, **fetch,
            **self.secure.kwargs_for("grafana"),
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(self.secure.partitions_of(topic))]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            yield consumer, tps
        finally:
            await consumer.stop()

    async def read_until(self, topic: str, done: Callable[[list[Any]], bool],
                         timeout_s: float = 60.0) -> list[Any]:
        """Every record of ``topic`` from its start (read committed, as ``grafana``) until
        ``done(records)``; an AssertionError naming the topic after ``timeout_s``."""
        records: list[Any] = []
        async with self._reading(topic, fetch_max_bytes=4 * 1024 * 1024,
                                 max_partition_fetch_bytes=2 * 1024 * 1024) as (consumer, _):
            deadline = time.monotonic() + timeout_s
            while not done(records):
                self.assert_running()
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out reading {topic} ({len(records)} records)")
                for batch in (await consumer.getmany(timeout_ms=300)).values():
                    records.extend(batch)
        return records

    async def read_to_end(self, topic: str, timeout_s: float = 60.0) -> list[Any]:
        """Every record of ``topic`` up to its end now (read committed, as ``grafana``)."""
        records: list[Any] = []
        async with self._reading(topic) as (consumer, tps):
            ends = await consumer.end_offsets(tps)  # the last stable offsets
            deadline = time.monotonic() + timeout_s
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out reading {topic} to its end")
                for batch in (await consumer.getmany(timeout_ms=300)).values():
                    records.extend(batch)
        return records

    async def dead_letter(self, event_id: str, timeout_s: float = 60.0) -> DeadLetter:
        """The one dead letter of the event ``event_id`` (waits for it)."""
        records = await self.read_until(
            DEADLETTER, lambda rs: any(_letter_id(r) == event_id for r in rs), timeout_s)
        letters = [decode_deadletter(r.value) for r in records if _letter_id(r) == event_id]
        assert len(letters) == 1, [letter.message for letter in letters]
        return letters[0]

    async def dead_letter_at(self, topic: str, value: bytes,
                             timeout_s: float = 60.0) -> DeadLetter:
        """The one dead letter whose original record is ``value`` on ``topic`` (for bytes
        with no event id of their own)."""
        def ours(r: Any) -> bool:
            letter = _letter(r)
            return (letter is not None and letter.source_topic == topic
                    and base64.b64decode(letter.original_b64) == value)

        records = await self.read_until(DEADLETTER, lambda rs: any(ours(r) for r in rs),
                                        timeout_s)
        letters = [decode_deadletter(r.value) for r in records if ours(r)]
        assert len(letters) == 1, [letter.message for letter in letters]
        return letters[0]

    async def events(self, topic: str, done: Callable[[list[Envelope[Event]]], bool],
                     timeout_s: float = 60.0) -> list[Envelope[Event]]:
        """The decodable events of ``topic`` (read until ``done`` of them holds)."""
        def decoded(records: list[Any]) -> list[Envelope[Event]]:
            out = []
            for r in records:
                env = _decoded(r)
                if env is not None:
                    out.append(env)
            return out

        records = await self.read_until(topic, lambda rs: done(decoded(rs)), timeout_s)
        return decoded(records)

    # -- the worker --------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The worker's ``/state``: its cells' nodes, queues and running tasks."""
        return orjson.loads(self._get("/state"))

    def running(self) -> dict[str, dict[str, Any]]:
        """Task id -> the worker's view of it, for every task running in any cell."""
        return {t["task"]: t for cell in self.state()["cells"].values() for t in cell["running"]}

    def healthy(self) -> bool:
        try:
            return bool(orjson.loads(self._get("/health"))["status"] == "ok")
        except OSError:
            return False

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}{path}", timeout=5) as r:
            return str(r.read().decode())

    def assert_running(self) -> None:
        """Both processes are alive (else fail with the log of the one that stopped)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n"
                                     + self.logs[name].read_text(errors="replace")[-6000:])

    def wait(self, condition: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
        """Poll ``condition`` until it is true (returned); fail naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.assert_running()
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def retire(self) -> None:
        """Stop the node and publish its retirement (:func:`_retirement`); the worker
        stays up to take it. Done when the suite's last test is over."""
        _stop({"node": self.procs.pop("node")})
        asyncio.run(self.produce(NODE, NODES, *_retirement()))

    def hetsched(self, user: str, *args: str,
                 timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        """``hetsched ARGS`` as ``user`` (a real command: its own process and login); its
        output is kept for the session's secret scan."""
        done = subprocess.run([sys.executable, "-m", "streams.cli", *args],
                              env=self.secure.env_for(user), cwd=REPO_ROOT,
                              capture_output=True, text=True, check=False, timeout=timeout_s)
        self.secure.outputs.append(done.stdout + done.stderr)
        return done

    # -- the invariants ----------------------------------------------------------------

    async def assert_nothing_lost(self) -> dict[str, Any]:
        """``hetsched check --settled`` over the live cluster, run as the dashboard's
        (viewer's) principal, which may read every topic check reads, dead letters
        included: no GPU over-booked, no task placed twice, no decision applied twice,
        none to an absent node, and every submission accounted for (a dead-lettered
        one as refused, with its reason). Returns the report (JSON)."""
        done = self.hetsched("grafana", "check", "--settled", "--json", "--no-progress",
                             timeout_s=120)
        assert done.returncode == 0, done.stdout + done.stderr
        report = orjson.loads(done.stdout)
        assert report["ok"] and not report["violations"], report["violations"]
        assert report["max_share_milli"] <= 1000
        return dict(report)


def _letter(record: Any) -> DeadLetter | None:
    try:
        return decode_deadletter(record.value)
    except ValueError:  # other tests' probe bytes
        return None


def _letter_id(record: Any) -> str | None:
    letter = _letter(record)
    return letter.event_id if letter is not None else None


def _decoded(record: Any) -> Envelope[Event] | None:
    if record.value is None:
        return None
    env = decode(record.value)
    return env if isinstance(env, Envelope) else None


# -- starting and stopping --------------------------------------------------------------


def _start(name: str, argv: list[str], env: dict[str, str], log_dir: Path,
           cwd: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd)
    return proc, log_path


def _stop(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group may hold a task's children
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


def _retirement() -> list[Envelope[Event]]:
    """node-b's last words: both GPUs failed, then the node left. A later worker of the
    session (tests/security) re-reads the nodes topics from their start and must not
    place its tasks on node-b. A ``NodeLeft`` alone does not do: that worker may read
    node-b's registration on ``hetsched.node-inventory`` after the ``NodeLeft`` on
    ``hetsched.nodes``, and a re-registration makes a node healthy again; a failed GPU
    stays failed."""
    now = datetime.now(UTC)
    gpus = [GpuFailed(node_id=NODE, gpu_index=i, gpu_uuid=f"GPU-{NODE}-{i}", reason="unknown",
                      detail="the attack suite ended") for i in range(2)]
    left = NodeLeft(node_id=NODE, reason="the attack suite ended")
    return [make_event(p, source=f"agent/{NODE}", occurred_at=now) for p in (*gpus, left)]


def _secret_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def running_cluster(secure: Any, home: Path) -> Iterator[AttackCluster]:
    """Start the worker and node ``node-b`` on the secured broker; stop both after."""
    scheduler_key = _secret_file(home / "scheduler.key", secrets.token_hex(32))
    # The task user may not be the executor's: the sandbox root must be traversable
    # (pytest's temporary folders are 0700).
    base = Path(tempfile.mkdtemp(prefix="hetsched-attacks-"))
    base.chmod(0o755)
    workdir_root, outside = base / "tasks", base / "outside"
    workdir_root.mkdir(mode=0o755)
    outside.mkdir(mode=0o777)
    cluster = AttackCluster(secure=secure, web_port=_free_port(), workdir_root=workdir_root,
                            outside=outside)
    run = run_id()
    worker_env = secure.env_for("scheduler")
    worker_env.update(
        HETSCHED_SECURITY_CONFIG=str(secure.security_config),
        HETSCHED_SIGNING_KEY_FILE=str(scheduler_key),
        HETSCHED_APP_ID=f"hetsched-scheduler-attacks-{run}",  # under the prefixed ACLs
        HETSCHED_WEB_PORT=str(cluster.web_port), HETSCHED_DATA_DIR=str(home / "worker"),
        HETSCHED_CELLS="1", HETSCHED_PARTITIONS=str(secure.partitions),
        HETSCHED_TOPIC_PREFIX="", HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6",
        PYTHONUNBUFFERED="1",
    )
    node_env = secure.env_for(NODE)
    node_env.update(PYTHONUNBUFFERED="1", HETSCHED_TOPIC_PREFIX="")
    node_env.pop("HETSCHED_PARTITIONS", None)
    sandbox = (f"executor.sandbox={{allowed_commands: [/bin/sh], "
               f"workdir_root: {workdir_root}}}")
    node_argv = [
        sys.executable, "-m", "agents.cli", "run", "--node-id", NODE,
        "--simulate", f"{GPU_MODEL}x2", "--state-dir", str(home / "node"),
        "--heartbeat-s", "5", "--log-level", "INFO",
        "--set", "kafka.create_topics=false", "--set", "executor.grace_s=5",
        "--set", f"executor.trusted_schedulers={{scheduler: {scheduler_key}}}",
        "--set", sandbox,
    ]  # fmt: skip
    try:
        for name, argv, env in (
            ("worker", [sys.executable, "-m", "streams.cli", "worker", "-l", "info"],
             worker_env),
            ("node", node_argv, node_env),
        ):
            cluster.procs[name], cluster.logs[name] = _start(name, argv, env, home, REPO_ROOT)
        cluster.wait(cluster.healthy, "the worker's /health", 120)
        cluster.wait(lambda: "hetsched-node ready" in cluster.logs["node"].read_text(
            errors="replace"), "the node to start", 120)
        cluster.wait(lambda: any(n["node"] == NODE for c in cluster.state()["cells"].values()
                                 for n in c["nodes"]), f"{NODE} in the worker's state", 120)
        yield cluster
    finally:
        _stop(cluster.procs)
        for log_path in cluster.logs.values():  # for the session's secret scan
            secure.outputs.append(log_path.read_text(errors="replace"))
        shutil.rmtree(base, ignore_errors=True)
