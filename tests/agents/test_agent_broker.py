"""Agents and executors as real processes against the real Kafka broker.

Each test uses its own topic prefix (fresh topics) and node ids, so tests never
see each other's events. Decisions are produced the way the scheduler does
(``schemas.consume.produce_event``: keyed by cell); status and node events are
read back through the schemas' decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import decisions as d
import pytest

from agents.bus import Topics, ensure_topics
from schemas.codec import decode
from schemas.events import Envelope, Event, ExecutorSpec

pytestmark = pytest.mark.integration

ENV_DUMP = (
    "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
    "['CUDA_VISIBLE_DEVICES', 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', 'HETSCHED_TASK_ID']}, "
    "open(sys.argv[1], 'w'))"
)
TRAP = (  # exits 7 on SIGTERM; creates the file argv[1] once the handler is armed
    "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(7)); "
    "pathlib.Path(sys.argv[1]).write_text('armed'); time.sleep(120)"
)


class Bus:
    """Produce decisions and collect every event on the test's topics."""

    def __init__(self, bootstrap: str, topics: Topics) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.events: list[tuple[str, Envelope[Event]]] = []
        self.dead: list[Any] = []
        self._producer: Any = None
        self._consumer: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        await ensure_topics(self.bootstrap, self.topics)
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True)
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(
            self.topics.status.name,
            self.topics.nodes.name,
            self.topics.telemetry.name,
            self.topics.deadletter.name,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            group_id=None,
        )
        await self._consumer.start()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for record in self._consumer:
            if record.topic == self.topics.deadletter.name:
                self.dead.append(json.loads(record.value))
                continue
            env = decode(record.value)
            assert isinstance(env, Envelope), env
            self.events.append((record.topic, env))

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for client in (self._consumer, self._producer):
            if client is not None:
                await client.stop()

    async def decide(self, env: Envelope[Event], signer: Any = None) -> None:
        from schemas.consume import produce_event

        await produce_event(self._producer, self.topics.decisions, env, signer=signer)

    async def raw(self, value: bytes, key: bytes = b"cell-a") -> None:
        await self._producer.send_and_wait(self.topics.decisions.name, value, key=key)

    def payloads(self, event_type: str, **match: object) -> list[Any]:
        return [
            e.payload
            for _, e in self.events
            if e.type == event_type
            and all(getattr(e.payload, k, None) == v for k, v in match.items())
        ]

    async def until(self, predicate: Callable[[], Any], timeout_s: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                seen = [(e.type, getattr(e.payload, "task_id", "")) for _, e in self.events]
                raise AssertionError(f"timed out waiting; events so far: {seen}")
            await asyncio.sleep(0.05)


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
async def bus(kafka_bootstrap: str, prefix: str) -> AsyncIterator[Bus]:
    b = Bus(kafka_bootstrap, Topics(prefix))
    await b.start()
    yield b
    await b.stop()


AS_THE_TEST_RUNNER = ("--set", "executor.run_as=root")
"""For tests whose tasks run this interpreter and write into pytest's tmp directory: both
may be readable by the test's own user only (a pyenv Python under /root, 0700 tmp dirs),
so a node started as root runs them as root, the explicit opt-out, instead of as
``nobody`` (the default, which test_a_root_node_runs_process_tasks_as_an_unprivileged_account
covers). A node that is not root runs them as itself either way."""


def _node_argv(command: str, node: str, prefix: str, state: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "agents.cli", command,
        "--node-id", node, "--topic-prefix", prefix, "--state-dir", str(state),
        "--start-at", "beginning", "--heartbeat-s", "1", "--log-level", "INFO",
        "--set", "executor.grace_s=5", *extra,
    ]  # fmt: skip


async def _ready(processes: Any, proc: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while "hetsched-node ready" not in processes.log_of(proc):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"node did not start:\n{processes.log_of(proc)}")
        await asyncio.sleep(0.1)


async def test_executor_process_applies_its_decisions_once_and_keeps_serving(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    node = f"node-{prefix[1:9]}"
    argv = _node_argv("run", node, prefix, tmp_path / "state", "--simulate", "A100x4",
                      *AS_THE_TEST_RUNNER)  # fmt: skip
    proc = processes.start("node", argv, project_env)
    await _ready(processes, proc)

    # The agent registers and heartbeats.
    await bus.until(lambda: bus.payloads("NodeRegistered", node_id=node))
    (registered,) = bus.payloads("NodeRegistered", node_id=node)
    assert [g.model for g in registered.gpus] == ["A100"] * 4

    # Decisions for another node are ignored; ours run with the right environment.
    env_file = tmp_path / "env.json"
    spec = d.python(ENV_DUMP).model_copy(update={"argv": [*d.python(ENV_DUMP).argv, str(env_file)]})
    await bus.decide(d.placed("theirs", "some-other-node", spec, d.gpus(0)))
    mine = d.placed("mine", node, spec, d.gpus(2, share=500))
    await bus.decide(mine)
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="mine"))
    assert json.loads(env_file.read_text()) == {
        "CUDA_VISIBLE_DEVICES": "2",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        "HETSCHED_TASK_ID": "mine",
    }

    # Bad input: unknown GPU, missing command, a message that is not an event at all.
    await bus.decide(d.placed("bad-gpu", node, d.simulated(1), d.gpus(9)))
    bad_cmd = d.python("").model_copy(update={"argv": ["definitely-not-a-command"]})
    await bus.decide(d.placed("bad-cmd", node, bad_cmd, d.gpus(0)))
    await bus.raw(b'{"not": "an event"')
    # ... and it keeps serving: a long task, then its preemption.
    armed = tmp_path / "armed"
    long = d.python(TRAP).model_copy(update={"argv": [*d.python(TRAP).argv, str(armed)]})
    await bus.decide(d.placed("long", node, long, d.gpus(1)))
    await bus.until(lambda: bus.payloads("TaskStarted", task_id="long"))
    await bus.until(armed.exists)  # a fixed sleep races with the handler on a busy host
    await bus.decide(d.preempted("long", node, grace_s=5))
    (killed,) = await bus.until(lambda: bus.payloads("TaskFailed", task_id="long"))
    assert (killed.reason, killed.exit_code, killed.retryable) == ("killed", 7, True)
    (bad_gpu,) = bus.payloads("TaskFailed", task_id="bad-gpu")
    assert bad_gpu.reason == "launch_error" and "GPU index 9" in bad_gpu.message
    (bad,) = bus.payloads("TaskFailed", task_id="bad-cmd")
    assert bad.reason == "launch_error" and "definitely-not-a-command" in bad.message
    await bus.until(lambda: bus.dead)
    assert bus.dead[0]["reason"] == "invalid_json"

    # A task running when the node process restarts survives and is re-adopted.
    go = tmp_path / "go"
    waits = (
        "import pathlib, sys, time\n"
        "for _ in range(1200):\n"
        "    if pathlib.Path(sys.argv[1]).exists(): sys.exit(5)\n"
        "    time.sleep(0.05)\n"
    )
    spec = d.python(waits).model_copy(update={"argv": [*d.python(waits).argv, str(go)]})
    await bus.decide(d.placed("survivor", node, spec, d.gpus(3)))
    await bus.until(lambda: bus.payloads("TaskStarted", task_id="survivor"))

    # A redelivered decision is not applied again...
    await bus.decide(mine)
    # ... nor after the executor restarts and re-reads the whole topic.
    processes.stop_all()
    proc = processes.start("node-again", argv, project_env)
    await _ready(processes, proc)
    go.write_text("exit now")
    (survivor,) = await bus.until(lambda: bus.payloads("TaskFailed", task_id="survivor"))
    assert (survivor.reason, survivor.exit_code) == ("exit_nonzero", 5)
    await bus.decide(d.placed("marker", node, d.simulated(1), d.gpus(0)))
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="marker"))
    started = [s.task_id for s in bus.payloads("TaskStarted", node_id=node)]
    assert sorted(started) == ["long", "marker", "mine", "survivor"]
    assert bus.payloads("TaskStarted", task_id="theirs") == []
    # Heartbeats keep coming, from both runs.
    await bus.until(lambda: len(bus.payloads("NodeHeartbeat", node_id=node)) >= 2)


async def test_sim_cluster_runs_openb_nodes_whose_telemetry_follows_their_tasks(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    argv = [
        sys.executable, "-m", "agents.cli", "sim-cluster", "--nodes", "3", "--seed", "4",
        "--id-prefix", prefix, "--topic-prefix", prefix, "--state-dir", str(tmp_path),
        "--start-at", "beginning", "--time-scale", "100", "--interval-s", "0.2",
        "--min-interval-s", "0", "--set", "triggers.gpu_util_pct.smoothing_s=0",
    ]  # fmt: skip
    proc = processes.start("cluster", argv, project_env)
    await _ready(processes, proc)
    nodes = await bus.until(
        lambda: len(bus.payloads("NodeRegistered")) == 3 and bus.payloads("NodeRegistered")
    )
    node = nodes[0]
    assert node.node_id.startswith(prefix + "openb-node-")
    await bus.decide(d.placed("sim-1", node.node_id, d.simulated(300, util=95), d.gpus(0)))
    busy = await bus.until(
        lambda: [
            t
            for t in bus.payloads("GpuTelemetry", node_id=node.node_id, gpu_index=0)
            if t.triggers and t.triggers[0].direction == "rising"
        ]
    )
    assert busy[0].gpu_util_pct > 0
    (done,) = await bus.until(lambda: bus.payloads("TaskFinished", task_id="sim-1"), 60)
    assert done.node_id == node.node_id and done.runtime_s > 0


async def test_a_sim_cluster_started_with_default_settings_runs_process_tasks(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    """``hetsched-node sim-cluster`` with the default (relative) state dir, started from
    another directory: a process task finishes. It failed as ``exit_nonzero`` with an
    empty message, because the task runs in the node's own folder, where the relative
    path of its exit-status file no longer resolved."""
    started_from = tmp_path / "operator-cwd"
    started_from.mkdir()
    node_cli = str(Path(sys.executable).with_name("hetsched-node"))
    argv = [
        node_cli, "sim-cluster", "--nodes", "1", "--id-prefix", prefix,
        "--topic-prefix", prefix, "--start-at", "beginning",
    ]  # fmt: skip
    proc = processes.start("cluster", argv, project_env, cwd=started_from)
    await _ready(processes, proc)
    (node, *_) = await bus.until(lambda: bus.payloads("NodeRegistered"))
    sleeps = ExecutorSpec(kind="process", argv=["sleep", "0.5"])
    await bus.decide(d.placed("sleeper", node.node_id, sleeps, d.gpus(0)))
    await bus.until(
        lambda: bus.payloads("TaskFinished", task_id="sleeper")
        or bus.payloads("TaskFailed", task_id="sleeper")
    )
    assert bus.payloads("TaskFailed", task_id="sleeper") == []
    (done,) = bus.payloads("TaskFinished", task_id="sleeper")
    assert done.exit_code == 0
    state = started_from / "var" / "hetsched-node" / node.node_id
    assert (state / "logs" / "sleeper.log").is_file()  # under where it was started


WHO_AM_I = (  # the task's identity in its log; exit 0 only when it is not root
    'id -u; id -G; echo "home=$HOME"; echo written > own-file; pwd; test "$(id -u)" -ne 0'
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def _task_log(state: Path, node: str, task_id: str) -> list[str]:
    """The task's own output: its log without the executor's start line."""
    lines = (state / node / "logs" / f"{task_id}.log").read_text().splitlines()
    return [line for line in lines if not line.startswith("=== ")]


@needs_root
async def test_a_root_node_runs_process_tasks_as_an_unprivileged_account(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    """The hole: a node started as root (systemd, the demo, CI) ran a tenant's command
    as root unless a sandbox user was configured. With default settings the task now
    runs as ``nobody``, without root's groups, in a directory of its own (its HOME),
    and the node still gets its log and exit status."""
    nobody = pwd.getpwnam("nobody")
    node = f"node-{prefix[1:9]}"
    state = tmp_path / "state"  # under pytest's 0700 directory: only root can reach it
    proc = processes.start("node", _node_argv("run", node, prefix, state, "--simulate", "T4x1"),
                           project_env)  # fmt: skip
    await _ready(processes, proc)
    who = ExecutorSpec(kind="process", argv=["sh", "-c", WHO_AM_I])
    await bus.decide(d.placed("who", node, who, d.gpus(0)))
    fails = ExecutorSpec(kind="process", argv=["sh", "-c", "exit 3"])
    await bus.decide(d.placed("fails", node, fails, d.gpus(0)))
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="who")
                    or bus.payloads("TaskFailed", task_id="who"))  # fmt: skip
    uid, groups, home, *rest = _task_log(state, node, "who")
    own = state / node / "tasks" / "who"
    assert (int(uid), groups.split()) == (nobody.pw_uid, [str(nobody.pw_gid)])
    assert home == f"home={own}" and rest == [str(own)]
    assert bus.payloads("TaskFailed", task_id="who") == []
    assert (own / "own-file").read_text() == "written\n"
    assert (own.stat().st_uid, own.stat().st_mode & 0o777) == (nobody.pw_uid, 0o700)
    (failed,) = await bus.until(lambda: bus.payloads("TaskFailed", task_id="fails"))
    assert (failed.reason, failed.exit_code) == ("exit_nonzero", 3)


@needs_root
async def test_run_as_root_is_the_explicit_opt_out(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    node = f"node-{prefix[1:9]}"
    state = tmp_path / "state"
    argv = _node_argv("run", node, prefix, state, "--simulate", "T4x1",
                      "--set", "executor.run_as=root")  # fmt: skip
    proc = processes.start("node", argv, project_env)
    await _ready(processes, proc)
    whoami = ExecutorSpec(kind="process", argv=["id", "-u"])
    await bus.decide(d.placed("as-root", node, whoami, d.gpus(0)))
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="as-root"))
    assert _task_log(state, node, "as-root") == ["0"]
    assert "process tasks run as root (executor.run_as=root)" in processes.log_of(proc)


async def test_a_task_cannot_swap_an_allowed_command_for_its_own_file_through_path(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    """The attack: a node allows ``python`` (and leaves ``allowed_env`` unset); a task
    sets PATH to a folder holding its own ``python``. The fake never runs: the task is
    refused naming PATH, and the node goes on running the executor's ``python``."""
    fake_dir = tmp_path / "attacker-bin"
    fake_dir.mkdir()
    fake_ran = tmp_path / "fake-ran"
    fake = fake_dir / "python"
    fake.write_text(f"#!/bin/sh\n: > {fake_ran}\n")
    fake.chmod(0o755)
    own_bin = str(Path(sys.executable).parent)
    env = dict(project_env, PATH=f"{own_bin}:{project_env.get('PATH', '/usr/bin:/bin')}")
    node = f"node-{prefix[1:9]}"
    sandbox = f"executor.sandbox={{allowed_commands: [python], workdir_root: {tmp_path / 'tasks'}}}"
    argv = _node_argv("run", node, prefix, tmp_path / "state", "--simulate", "T4x1",
                      "--set", sandbox, *AS_THE_TEST_RUNNER)  # fmt: skip
    proc = processes.start("node", argv, env)
    await _ready(processes, proc)
    out = tmp_path / "exe.txt"
    code = "import sys; open(sys.argv[1], 'w').write(sys.executable)"
    attack = ExecutorSpec(
        kind="process", argv=["python", "-c", code, str(out)], env={"PATH": str(fake_dir)}
    )
    await bus.decide(d.placed("attack", node, attack, d.gpus(0)))
    honest = attack.model_copy(update={"env": {}})
    await bus.decide(d.placed("honest", node, honest, d.gpus(0)))
    (refused,) = await bus.until(lambda: bus.payloads("TaskFailed", task_id="attack"))
    assert refused.reason == "launch_error" and "PATH" in refused.message
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="honest"))
    assert Path(out.read_text()).parent == Path(own_bin)
    assert not fake_ran.exists()
    assert bus.payloads("TaskStarted", task_id="attack") == []


async def test_with_trusted_schedulers_only_signed_decisions_run(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    from schemas.signing import Signer

    key = b"k" * 32
    key_file = tmp_path / "scheduler.key"
    key_file.write_bytes(key)
    node = f"node-{prefix[1:9]}"
    argv = _node_argv(
        "executor", node, prefix, tmp_path / "state", "--simulate", "T4x1",
        "--set", f"executor.trusted_schedulers={{scheduler-a: {key_file}}}",
    )  # fmt: skip
    proc = processes.start("executor", argv, project_env)
    await _ready(processes, proc)
    await bus.decide(d.placed("forged", node, d.simulated(1), d.gpus(0)))
    wrong = Signer("scheduler-a", b"x" * 32)
    await bus.decide(d.placed("bad-sig", node, d.simulated(1), d.gpus(0)), signer=wrong)
    await bus.decide(
        d.placed("signed", node, d.simulated(1), d.gpus(0)), signer=Signer("scheduler-a", key)
    )
    await bus.until(lambda: bus.payloads("TaskFinished", task_id="signed"))
    assert bus.payloads("TaskStarted", task_id="forged") == []
    assert bus.payloads("TaskStarted", task_id="bad-sig") == []
    await bus.until(lambda: len(bus.dead) == 2)
    assert sorted(x["message"].split(":")[0] for x in bus.dead) == ["bad_signature", "unsigned"]


async def test_a_node_started_before_the_scheduler_waits_for_the_decisions_topic(
    kafka_bootstrap: str, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    node = f"node-{prefix[1:9]}"
    argv = _node_argv("run", node, prefix, tmp_path / "state", "--simulate", "T4x1")
    proc = processes.start("early", argv, project_env)
    deadline = time.monotonic() + 60
    while "waiting for the decisions topic" not in processes.log_of(proc):
        assert proc.poll() is None and time.monotonic() < deadline, processes.log_of(proc)
        await asyncio.sleep(0.1)
    assert "hetsched-node ready" not in processes.log_of(proc)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        names = set(await admin.list_topics())
    finally:
        await admin.close()
    topics = Topics(prefix)
    assert topics.decisions.name not in names  # not auto-created by the node
    assert topics.nodes.name in names  # the topics it writes were created
    await ensure_topics(kafka_bootstrap, [topics.decisions], partitions=3)
    await _ready(processes, proc)


async def test_a_node_reports_a_strangers_memory_and_a_task_over_its_booking(
    bus: Bus, processes: Any, project_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    """One ``hetsched-node run`` process (agent and executor) attributes GPU memory per
    process: a stranger's memory reaches the bus as ``foreign_mem_mib``, and a task whose
    process holds more than it booked as ``TaskOverUse``."""
    node = f"node-{prefix[1:9]}"
    argv = _node_argv(
        "run", node, prefix, tmp_path / "state", "--simulate", "A100x2",
        "--fault", "foreign-mem:1:20000@0", "--interval-s", "0.2", "--min-interval-s", "0",
        "--set", "executor.usage_interval_s=1",
    )  # fmt: skip
    env = dict(project_env, HETSCHED_TRACES=str(tmp_path / "no-traces"))  # flat loads
    proc = processes.start("node", argv, env)
    await _ready(processes, proc)
    strangers = await bus.until(
        lambda: [t for t in bus.payloads("GpuTelemetry", node_id=node, gpu_index=1)
                 if t.foreign_mem_mib]
    )  # fmt: skip
    assert strangers[0].foreign_mem_mib == 20000 and strangers[0].mem_used_mib == 20000
    # a quarter of an A100 books 20 480 MiB; the task's process holds 30 000
    await bus.decide(d.placed("greedy", node, d.simulated(600, mem=30000), d.gpus(0, share=250)))
    (over, *_) = await bus.until(lambda: bus.payloads("TaskOverUse", task_id="greedy"))
    assert (over.node_id, over.gpu_index, over.observed_mib, over.booked_mib) == (
        node,
        0,
        30000,
        20480,
    )
    usage = await bus.until(lambda: bus.payloads("TaskUsage", task_id="greedy"))
    assert usage[0].gpus[0].mem_used_mib == 30000
    # the task's own memory is never foreign
    gpu0 = bus.payloads("GpuTelemetry", node_id=node, gpu_index=0)
    assert all(t.foreign_mem_mib == 0 for t in gpu0), gpu0
