"""Assembling and running a node: source, agent, executor, decision feed, Kafka.

The CLI commands (``agent``, ``executor``, ``run``, ``sim-cluster``) differ
only in which parts they start; the wiring lives here once. A node's parts
share one process and one event loop: the executor places simulated loads on
the very :class:`~agents.telemetry.simulated.SimulatedNode` the agent samples,
and the agent's heartbeats list the executor's running tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.agent import NodeAgent
from agents.backends.process import ProcessBackend
from agents.backends.simulated import SimulatedBackend
from agents.bus import KafkaPublisher, Publisher, Topics, connect
from agents.config import NodeConfig, with_absolute_paths
from agents.executor import Executor
from agents.feed import DecisionFeed
from agents.journal import Journal
from agents.task_user import task_account
from agents.telemetry.base import TelemetrySource
from agents.telemetry.faults import parse_fault
from agents.telemetry.simulated import SimulatedNode, parse_simulate
from agents.triggers import TriggerConfig, TriggerEngine
from schemas.kafka import KafkaHealth

log = logging.getLogger(__name__)


def make_source(config: NodeConfig, *, start_s: float | None = None) -> TelemetrySource:
    """NVML for a real node, or simulated GPUs when ``simulate.gpus`` is set.

    Raises :class:`~agents.telemetry.base.SourceUnavailable` when NVML is absent.
    """
    sim = config.simulate
    if sim.gpus is None:
        from agents.telemetry.nvml import NvmlSource

        return NvmlSource(hostname=config.node.node_id)
    from agents.telemetry.traces import load_genai

    model, count = parse_simulate(sim.gpus)
    try:
        curves = load_genai()
    except FileNotFoundError as exc:
        log.warning("GenAI traces not found (%s); simulated loads will be flat", exc)
        curves = None
    return SimulatedNode(
        model,
        count,
        hostname=config.node.node_id,
        time_scale=sim.time_scale,
        faults=[parse_fault(f) for f in sim.faults],
        curves=curves,
        seed=sim.seed,
        start_s=start_s,
        cpu_count=(config.node.cpu_milli or 0) // 1000 or None,
        memory_mib=config.node.memory_mib,
    )


def trigger_config(config: NodeConfig) -> TriggerConfig:
    """The node's triggers, with the EWMA time constants in the GPUs' own seconds.

    Why: ``smoothing_s`` says how long a level must last *in the workload* (five
    minutes of a GenAI curve) to count as sustained. A simulated node replays
    its curves ``time_scale`` times faster than the wall clock its agent samples
    on, so the constants shrink by the same factor; unscaled, a 5-minute EWMA
    at 300x spans 25 trace hours and a busy GPU never leaves the idle band (the
    demo showed 0 % utilisation). The minimum interval and the heartbeat stay in
    wall seconds: they bound the event rate the scheduler sees.
    """
    scale = config.simulate.time_scale if config.simulate.gpus is not None else 1.0
    triggers = config.triggers
    if scale == 1.0:
        return triggers
    names = ("gpu_util_pct", "mem_used_pct", "temperature_c", "power_pct_of_limit")
    return triggers.model_copy(
        update={
            name: getattr(triggers, name).model_copy(
                update={"smoothing_s": getattr(triggers, name).smoothing_s / scale}
            )
            for name in names
        }
    )


def _partitions_from_env() -> int | None:
    """``HETSCHED_PARTITIONS`` (the deployment's partition count, shared with the
    scheduler's settings) for topics this node creates; None = the catalog's."""
    raw = os.environ.get("HETSCHED_PARTITIONS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def trusted_keyring(config: NodeConfig) -> dict[str, bytes]:
    """Verification keys of the schedulers whose decisions this node accepts."""
    from schemas.signing import read_key_file

    return {
        principal: read_key_file(path)
        for principal, path in config.executor.trusted_schedulers.items()
    }


@dataclass
class Node:
    """One node's parts (either of agent/executor may be absent)."""

    config: NodeConfig
    source: TelemetrySource
    agent: NodeAgent
    executor: Executor | None = None
    journal: Journal | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def build_node(
    config: NodeConfig,
    source: TelemetrySource,
    publisher: Publisher,
    topics: Topics,
    *,
    with_executor: bool,
    journal: Journal | None = None,
) -> Node:
    """Wire agent and (optionally) executor around one telemetry source.

    ``journal`` may be shared by the nodes of one process (``sim-cluster``: one
    SQLite file instead of one per node; decision and task ids are unique anyway).
    """
    agent = NodeAgent(
        config.node,
        source,
        TriggerEngine(trigger_config(config)),
        publisher,
        topics,
        interval_s=config.telemetry.interval_s,
    )
    agent.discover()
    node = Node(config, source, agent)
    if not with_executor:
        return node
    sandbox = config.executor.sandbox.policy() if config.executor.sandbox else None
    run_as = task_account(config.executor)  # TaskUserError: checked by the CLI first
    if run_as is None and os.geteuid() == 0:
        log.warning("process tasks run as root (executor.run_as=%s)", config.executor.run_as)
    state = Path(config.executor.state_dir) / config.node.node_id
    journal = journal or Journal(state / "journal.sqlite")
    executor = Executor(
        config.node.node_id,
        journal,
        publisher,
        topics,
        config.executor,
        gpu_indices=agent.gpu_indices,
        failed_gpus=agent.failed_gpus,
        usage_probe=agent.gpu_usage,
        silenced=agent.silenced,
        sandbox=sandbox,
        gpu_memory_mib=agent.gpu_memory_mib,
        gpu_samples=agent.gpu_samples,
        task_pids=source.task_pids if isinstance(source, SimulatedNode) else None,
    )
    executor.add_backend(
        ProcessBackend(
            config.node.node_id,
            state,
            executor.on_exit,
            checkpoint_signal=config.executor.checkpoint_signal,
            checkpoint_grace_s=config.executor.checkpoint_grace_s,
            sandbox=sandbox,
            run_as=run_as,
        )
    )
    sim_node = source if isinstance(source, SimulatedNode) else None
    executor.add_backend(
        SimulatedBackend(
            executor.on_exit,
            node=sim_node,
            time_scale=config.simulate.time_scale,
            reference_model=config.simulate.reference_model,
        )
    )
    agent.running_tasks = executor.running_task_ids
    agent.foreign_memory = executor.foreign_memory  # only beside its executor can it tell
    node.executor, node.journal = executor, journal
    return node


async def _wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _health_page(health: KafkaHealth, first: NodeConfig) -> tuple[int, bytes]:
    """The node's ``/health``: 200 while Kafka answers, 503 with the last error while not."""
    import orjson

    status = health.http_status()
    body = {"status": "ok" if status == 200 else "unavailable", "node": first.node.node_id,
            "kafka": health.as_dict()}
    return status, orjson.dumps(body)


def _closing_on_failure(feed: DecisionFeed) -> Callable[[], Awaitable[None]]:
    """``feed.start`` that closes its half-started consumer when it fails, so it can retry."""

    async def start() -> None:
        try:
            await feed.start()
        except BaseException:
            await feed.stop()
            raise

    return start


async def serve(
    configs: list[NodeConfig],
    *,
    agent: bool,
    executor: bool,
    sources: list[TelemetrySource] | None = None,
    metrics_port: int = 0,
) -> int:
    """Run the given nodes against Kafka until SIGTERM/SIGINT. One producer and
    one decision consumer serve all of them; ``metrics_port`` > 0 serves their
    Prometheus metrics (:mod:`agents.metrics`). Relative path settings are made
    absolute against the directory the node is started from (``with_absolute_paths``)."""
    from schemas.backoff import throttle_logs
    from schemas.kafka import bootstrap_servers

    started_from = Path.cwd()
    configs = [with_absolute_paths(c, started_from) for c in configs]
    first = configs[0]
    bootstrap = first.kafka.bootstrap or bootstrap_servers()
    topics = Topics(first.kafka.topic_prefix)
    throttle_logs()  # aiokafka logs each 100 ms reconnect while a broker is away
    health = KafkaHealth(bootstrap)
    nodes: list[Node] = []
    if metrics_port:  # before connecting: /health must answer while Kafka does not
        from agents.metrics import serve_metrics

        serve_metrics(metrics_port, lambda: nodes, health=lambda: _health_page(health, first))
    publisher = KafkaPublisher(bootstrap)
    waiter = asyncio.create_task(_wait_for_signal())
    connecting = asyncio.create_task(connect(
        publisher, health, topics=topics.produced() if first.kafka.create_topics else None,
        replication_factor=first.kafka.replication_factor, partitions=_partitions_from_env()))
    await asyncio.wait([connecting, waiter], return_when=asyncio.FIRST_COMPLETED)
    if not connecting.done():
        connecting.cancel()
        waiter.cancel()
        print("hetsched-node stopped while waiting for Kafka", file=sys.stderr, flush=True)
        return 0
    connecting.result()
    start_s = time.monotonic()
    started_at_ms = int(time.time() * 1000)  # before any agent registers its node
    made = sources or [make_source(c, start_s=start_s) for c in configs]
    shared = (
        Journal(Path(first.executor.state_dir) / "sim-cluster.sqlite")
        if executor and len(configs) > 1
        else None
    )
    nodes += [
        build_node(c, s, publisher, topics, with_executor=executor, journal=shared)
        for c, s in zip(configs, made, strict=True)
    ]
    feed: DecisionFeed | None = None
    background: list[asyncio.Task[None]] = []
    try:
        if agent:  # telemetry flows even while the decisions topic is not there yet
            background += [asyncio.create_task(n.agent.run()) for n in nodes]
        if executor:
            positions = shared or nodes[0].journal
            assert positions is not None
            feed = DecisionFeed(
                bootstrap,
                topics,
                publisher,
                positions,
                {n.config.node.node_id: n.executor for n in nodes if n.executor is not None},
                cell=first.node.cell if len(nodes) == 1 else None,
                start_at=first.executor.start_at,
                started_at_ms=started_at_ms,
                keyring=trusted_keyring(first),
            )
            starting = asyncio.create_task(health.connect(
                _closing_on_failure(feed), what="decision feed", log=log))
            await asyncio.wait([starting, waiter], return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():
                starting.cancel()
                return 0  # stopped while waiting for the decisions topic
            starting.result()
            for node in nodes:
                assert node.executor is not None
                await node.executor.start()
            background.append(asyncio.create_task(feed.run()))
        background.append(asyncio.create_task(health.watch(log=log)))
        print(
            f"hetsched-node ready nodes={len(nodes)} agent={agent} executor={executor} "
            f"first={first.node.node_id}",
            flush=True,
        )
        done, _ = await asyncio.wait([waiter, *background], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not waiter and task.exception() is not None:
                log.error("a node loop died: %r", task.exception())
                return 1
        return 0
    finally:
        for task in [waiter, *background]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for node in nodes:
            if node.executor is not None:
                await node.executor.close()
            node.source.close()
        if feed is not None:
            await feed.stop()
        await publisher.stop()
        for journal in {id(n.journal): n.journal for n in nodes if n.journal}.values():
            journal.close()
        print("hetsched-node stopped", file=sys.stderr, flush=True)
