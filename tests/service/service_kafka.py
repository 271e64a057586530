"""Kafka helpers for the service tests: isolated topics, producing, reading decisions."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from schemas.codec import decode, encode
from schemas.consume import PRODUCER_DEFAULTS
from schemas.events import Envelope, Event
from schemas.topics import BY_NAME, key_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    """One isolated scheduler deployment on the shared broker: prefix, app id, env."""

    bootstrap: str
    base_env: dict[str, str]
    tmp: Path
    cells: int = 1
    partitions: int = 4
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:8]}.")

    @property
    def app_id(self) -> str:
        return f"{self.prefix}scheduler"

    def topic(self, name: str) -> str:
        return self.prefix + name

    def env(self, port: int, **extra: str) -> dict[str, str]:
        return dict(
            self.base_env, HETSCHED_APP_ID=self.app_id, HETSCHED_WEB_PORT=str(port),
            HETSCHED_DATA_DIR=str(self.tmp / f"worker-{port}"), HETSCHED_CELLS=str(self.cells),
            HETSCHED_PARTITIONS=str(self.partitions), HETSCHED_TOPIC_PREFIX=self.prefix,
            HETSCHED_TICK_S="1.0", HETSCHED_SESSION_S="6", **extra,
        )

    def start_worker(self, processes: Any, name: str, port: int | None = None,
                     **extra: str) -> Any:
        port = port or free_port()
        proc = processes.start(
            name, [sys.executable, "-m", "streams.cli", "worker", "-l",
                   os.environ.get("HETSCHED_TEST_WORKER_LOG", "warn")], self.env(port, **extra))
        proc.web_port = port
        return proc

    async def produce(self, catalog_topic: str, envelopes: Iterable[Envelope[Event]]) -> None:
        spec = BY_NAME[catalog_topic]
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **PRODUCER_DEFAULTS)
        await producer.start()
        try:
            futures = [await producer.send(self.topic(catalog_topic), encode(e),
                                           key=key_for(spec, e)) for e in envelopes]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    async def produce_raw(self, catalog_topic: str, key: bytes, value: bytes) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **PRODUCER_DEFAULTS)
        await producer.start()
        try:
            await producer.send_and_wait(self.topic(catalog_topic), value, key=key)
        finally:
            await producer.stop()

    async def read(self, catalog_topic: str, until: Callable[[list[Any]], bool],
                   timeout_s: float, raw: bool = False) -> list[Any]:
        """Read a topic from the start (read_committed) until ``until(records)`` or timeout."""
        consumer = AIOKafkaConsumer(
            self.topic(catalog_topic), bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest", enable_auto_commit=False, group_id=None,
            isolation_level="read_committed",
        )
        await consumer.start()
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and not until(out):
                for batch in (await consumer.getmany(timeout_ms=300)).values():
                    for r in batch:
                        out.append(r.value if raw else decode(r.value))
        finally:
            await consumer.stop()
        return out


def wait_healthy(proc: Any, processes: Any, timeout_s: float = 90.0) -> None:
    url = f"http://127.0.0.1:{proc.web_port}/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, processes.log_of(proc)
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"worker not healthy in {timeout_s}s:\n{processes.log_of(proc)}")


def start_healthy_worker(dep: Deployment, processes: Any, **extra: str) -> Any:
    """A worker process named "worker" on a free port (``proc.web_port``), ``extra`` added
    to its environment, once its ``/health`` answers."""
    worker = dep.start_worker(processes, "worker", **extra)
    wait_healthy(worker, processes)
    return worker


def start_node(dep: Deployment, processes: Any, node_id: str, gpus: str, state_dir: Path, *,
               name: str | None = None, heartbeat_s: str = "0.5", args: Iterable[str] = (),
               **env: str) -> Any:
    """A simulated node process (``agents.cli run --simulate GPUS``: agent and executor in
    one) on ``dep``'s topics, reading decisions from the beginning; ``name`` (default: the
    node id) names the process, ``args`` are further flags, ``env`` is added to its
    environment."""
    argv = [sys.executable, "-m", "agents.cli", "run", "--simulate", gpus,
            "--node-id", node_id, "--topic-prefix", dep.prefix, "--bootstrap", dep.bootstrap,
            "--heartbeat-s", heartbeat_s, "--start-at", "beginning",
            "--state-dir", str(state_dir), "--log-level", "WARNING", *args]
    return processes.start(name or node_id, argv,
                           dict(dep.base_env, HETSCHED_TOPIC_PREFIX=dep.prefix, **env))


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``hetsched ARGS`` (``python -m streams.cli``) with ``env``, its output captured."""
    return subprocess.run([sys.executable, "-m", "streams.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return orjson.loads(r.read())


def wait_for_nodes(ports: list[int], count: int, timeout_s: float = 60.0,
                   names: Collection[str] = ()) -> None:
    """Poll the workers' ``/state`` until their cells hold ``count`` nodes together,
    ``names`` among them."""
    deadline = time.monotonic() + timeout_s
    seen: set[str] = set()
    while time.monotonic() < deadline:
        seen = set()
        for port in ports:
            try:
                state = get_json(port, "/state")
            except OSError:
                continue
            seen |= {n["node"] for c in state["cells"].values() for n in c["nodes"]}
        if len(seen) >= count and seen >= set(names):
            return
        time.sleep(0.2)
    raise AssertionError(f"{len(seen)} of {count} nodes registered after {timeout_s}s "
                         f"(waiting for {sorted(set(names) - seen)})")
