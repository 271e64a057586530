"""Orchestrate the demo: worker, simulated cluster, replayer, live view, report.

Order of start: the scheduler worker and, right behind it, the simulated
nodes (one ``hetsched-node sim-cluster`` process: agents and executors of
every node), then -- once the worker is healthy and its cells hold every
node -- the replayer inside this process. Nodes need not wait for the
worker: it reads the nodes topic from the beginning and the executors wait
for the decisions topic, so starting both together saves the ~10 s the
worker and the nodes each take to start. Order of stop, also on Ctrl-C: the
replayer, the nodes, the worker -- each process group with SIGTERM, then
SIGKILL after a grace period (:mod:`streams.demo.procs`).

Every run gets its own topic prefix (``demo-<run id>.``), so a run never sees
an earlier run's nodes or tasks on the same broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streams.demo.outside import client_commands, kafka_jars
from streams.demo.procs import Children
from streams.demo.trace import Arrival, Shape, build_workload
from streams.demo.tracker import Tracker

WORKER_GRACE_S = 5.0
"""Seconds the worker gets between SIGTERM and SIGKILL when the demo stops."""


@dataclass(frozen=True)
class DemoConfig:
    nodes: int
    seed: int
    shape: Shape
    minutes: float
    trace: Path
    node_list: Path | None
    report: Path
    run_dir: Path
    run_id: str
    prefix: str
    bootstrap: str
    web_port: int
    metrics_port: int
    drain_s: float
    live: bool
    partitions: int = 2

    @property
    def app_id(self) -> str:
        return f"{self.prefix}scheduler"


def worker_env(cfg: DemoConfig, base: dict[str, str]) -> dict[str, str]:
    return dict(base, KAFKA_BOOTSTRAP=cfg.bootstrap, HETSCHED_APP_ID=cfg.app_id,
                HETSCHED_TOPIC_PREFIX=cfg.prefix, HETSCHED_WEB_PORT=str(cfg.web_port),
                HETSCHED_DATA_DIR=str(cfg.run_dir / "worker"), HETSCHED_CELLS="1",
                HETSCHED_PARTITIONS=str(cfg.partitions), HETSCHED_TICK_S="1.0",
                PYTHONUNBUFFERED="1")


def node_argv(cfg: DemoConfig) -> list[str]:
    argv = [sys.executable, "-m", "agents.cli", "sim-cluster", "--nodes", str(cfg.nodes),
            "--seed", str(cfg.seed), "--time-scale", str(cfg.shape.speedup),
            "--topic-prefix", cfg.prefix, "--state-dir", str(cfg.run_dir / "nodes"),
            "--heartbeat-s", "5", "--min-interval-s", "2", "--log-level", "WARNING",
            "--metrics-port", str(cfg.metrics_port)]
    if cfg.node_list is not None:
        argv += ["--node-list", str(cfg.node_list)]
    return argv


def get_json(port: int, path: str, timeout_s: float = 2.0) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as r:
        return json.loads(r.read())


async def wait_for(what: str, check: Any, children: Children, timeout_s: float) -> Any:
    """Poll ``check()`` (in a thread) until it returns a truthy value; fail on a dead child."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in children.started:
            if not child.alive():
                raise RuntimeError(f"{child.name} exited ({child.proc.returncode}) while "
                                   f"waiting for {what}:\n{child.tail()}")
        try:
            got = await asyncio.to_thread(check)
            if got:
                return got
        except (urllib.error.URLError, OSError, ValueError):
            pass
        await asyncio.sleep(0.5)
    raise TimeoutError(f"no {what} after {timeout_s:.0f}s")


async def read_back(cfg: DemoConfig, tracker: Tracker) -> None:
    """Fold the decisions, task status and telemetry of this run into ``tracker``."""
    from aiokafka import AIOKafkaConsumer

    from schemas.codec import decode
    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import DECISIONS, TASK_STATUS, TELEMETRY

    topics = [cfg.prefix + t for t in (DECISIONS, TASK_STATUS, TELEMETRY)]
    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=cfg.bootstrap, group_id=None,
                                auto_offset_reset="earliest", isolation_level="read_committed",
                                enable_auto_commit=False, metadata_max_age_ms=2000,
                                **aiokafka_kwargs())
    await consumer.start()
    try:
        while True:
            for records in (await consumer.getmany(timeout_ms=300)).values():
                for record in records:
                    try:
                        tracker.note_event(decode(record.value))
                    except Exception:
                        continue
    finally:
        await consumer.stop()


async def poll_state(cfg: DemoConfig, tracker: Tracker) -> None:
    while True:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            tracker.note_state(await asyncio.to_thread(get_json, cfg.web_port, "/state"))
        await asyncio.sleep(1.0)


def scrape_gpus(port: int, timeout_s: float = 2.0) -> dict[tuple[str, int], tuple[float, float]]:
    """(node, GPU) -> (utilisation %, temperature C) from the nodes' ``/metrics``.

    Why scrape: agents publish telemetry only on threshold crossings, so
    Kafka holds the scheduler's banded view; the sampled values are on the
    nodes' Prometheus endpoint (:mod:`agents.metrics`), as Grafana reads them.
    """
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
        text = r.read().decode()
    util: dict[tuple[str, int], float] = {}
    temp: dict[tuple[str, int], float] = {}
    for family in text_string_to_metric_families(text):
        into = {"hetsched_gpu_utilization_ratio": util,
                "hetsched_gpu_temperature_celsius": temp}.get(family.name)
        if into is None:
            continue
        for sample in family.samples:
            into[(sample.labels["node"], int(sample.labels["gpu"]))] = sample.value
    return {key: (100.0 * u, temp.get(key, 0.0)) for key, u in util.items()}


async def poll_gpus(cfg: DemoConfig, tracker: Tracker) -> None:
    """Scrape the simulated GPUs' sampled utilisation once a second."""
    while True:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError, KeyError):
            tracker.note_gpus(await asyncio.to_thread(scrape_gpus, cfg.metrics_port))
        await asyncio.sleep(1.0)


async def replay(cfg: DemoConfig, arrivals: list[Arrival], tracker: Tracker,
                 progress: list[float]) -> None:
    """Submit each task at its arrival time (wall clock from the replay's start)."""
    from aiokafka import AIOKafkaProducer

    from schemas.consume import PRODUCER_DEFAULTS, produce_event
    from schemas.events import make_event
    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import BY_NAME, TASKS

    spec = dataclasses.replace(BY_NAME[TASKS], name=cfg.prefix + TASKS)
    producer = AIOKafkaProducer(bootstrap_servers=cfg.bootstrap, **PRODUCER_DEFAULTS,
                                **aiokafka_kwargs())
    await producer.start()
    began = time.monotonic()
    try:
        for n, arrival in enumerate(arrivals, start=1):
            delay = began + arrival.at_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            env = make_event(arrival.task, source="demo-replayer", occurred_at=datetime.now(UTC))
            await produce_event(producer, spec, env)
            tracker.note_submitted(arrival.task.task_id, arrival.task.tenant, env.occurred_at)
            progress[0] = n / len(arrivals)
    finally:
        await producer.stop()


def settings_of(cfg: DemoConfig, gpus: int) -> dict[str, Any]:
    return {"run_id": cfg.run_id, "nodes": cfg.nodes, "gpus": gpus, "seed": cfg.seed,
            "speedup": cfg.shape.speedup, "load": cfg.shape.load, "minutes": cfg.minutes,
            "trace": cfg.trace.name, "max_duration_s": cfg.shape.max_duration_s,
            "topic_prefix": cfg.prefix, "partitions": cfg.partitions, "dashboard": f"http://127.0.0.1:{cfg.web_port}/dashboard"}


SNAPSHOT_AT = 0.6
"""Fraction of the replay after which the live view is saved as ``terminal.svg``."""


async def run_demo(cfg: DemoConfig, children: Children, tracker: Tracker,
                   out: dict[str, Any]) -> None:
    """Start everything, replay, drain; ``out['settings']`` is filled as soon as known."""
    import os

    from rich.console import Console
    from rich.live import Live

    from streams.demo import live

    console = Console()
    env = worker_env(cfg, dict(os.environ))
    console.print(f"hetsched demo {cfg.run_id}: Kafka at {cfg.bootstrap}, topics {cfg.prefix}*")
    # The worker gets a short grace: this run's state lives in its own topics and
    # is never resumed, and a Faust exactly-once worker can hang for good on
    # SIGTERM after an aborted transaction ("Not in the middle of a transaction").
    children.start("worker", [sys.executable, "-m", "streams.cli", "worker", "-l", "warn"], env,
                   grace_s=WORKER_GRACE_S)
    children.start("nodes", node_argv(cfg), env)
    await wait_for("healthy worker", lambda: get_json(cfg.web_port, "/health"), children, 180)
    console.print(f"worker healthy; dashboard at http://127.0.0.1:{cfg.web_port}/dashboard")
    for line in client_commands(cfg.prefix, cfg.bootstrap, kafka_jars()):
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    def registered() -> bool:
        tracker.note_state(get_json(cfg.web_port, "/state"))
        return len(tracker.nodes) >= cfg.nodes

    await wait_for(f"{cfg.nodes} registered nodes", registered, children, 120)
    gpus = len(tracker.gpu_milli())
    out["settings"] = settings_of(cfg, gpus)
    models = {n["model"] for n in tracker.nodes}
    arrivals = build_workload(cfg.trace, cfg.shape, gpus=gpus, wall_s=cfg.minutes * 60,
                              prefix=f"{cfg.run_id}-", models=models)
    console.print(f"{cfg.nodes} nodes ({gpus} GPUs: {', '.join(sorted(models))}) registered; "
                  f"replaying {len(arrivals)} tasks over {cfg.minutes:g} min at "
                  f"{cfg.shape.speedup:g}x")
    tracker.started = time.monotonic()
    background = [asyncio.create_task(read_back(cfg, tracker)),
                  asyncio.create_task(poll_state(cfg, tracker)),
                  asyncio.create_task(poll_gpus(cfg, tracker))]
    progress = [0.0]
    replayer = asyncio.create_task(replay(cfg, arrivals, tracker, progress))
    title = f"hetsched demo {cfg.run_id} -- {cfg.nodes} nodes, {gpus} GPUs, {cfg.shape.speedup:g}x"
    snapshot = cfg.report.with_name("terminal.svg")
    snapped = [False]

    def snap() -> None:
        # One picture of the view at 60 % of the replay, when the cluster is busy
        # (the end of a run is drained and empty), kept beside the report.
        if not snapped[0] and progress[0] >= SNAPSHOT_AT:
            snapped[0] = True
            live.save_snapshot(live.render(tracker, title, progress[0]), snapshot, title)

    try:
        if cfg.live and console.is_terminal:
            with Live(live.render(tracker, title, 0.0), console=console,
                      refresh_per_second=2) as view:

                def refresh() -> None:
                    view.update(live.render(tracker, title, progress[0]))
                    snap()

                await _follow(cfg, children, tracker, replayer, refresh)
        else:
            last = [0.0]

            def tick() -> None:
                snap()
                if time.monotonic() - last[0] >= 5:
                    last[0] = time.monotonic()
                    print(live.line(tracker), flush=True)

            await _follow(cfg, children, tracker, replayer, tick)
    finally:
        for task in [replayer, *background]:
            task.cancel()
        await asyncio.gather(replayer, *background, return_exceptions=True)


async def _follow(cfg: DemoConfig, children: Children, tracker: Tracker,
                  replayer: asyncio.Task[None], update: Any) -> None:
    """Refresh the view until the replay is done and the cluster drained (or drain_s)."""
    drain_until: float | None = None
    while True:
        update()
        for child in children.started:
            if not child.alive():
                raise RuntimeError(f"{child.name} exited ({child.proc.returncode}):\n"
                                   f"{child.tail()}")
        if replayer.done():
            replayer.result()  # raise a replay error here
            drain_until = drain_until or time.monotonic() + cfg.drain_s
            idle = not tracker.queue and tracker.running == 0 and bool(tracker.samples)
            if idle or time.monotonic() >= drain_until:
                update()
                return
        await asyncio.sleep(0.5)
