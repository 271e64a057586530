"""A router without a broker, for the router's unit tests (early node events, held tasks,
the telemetry fast path, tenant binding): a worker context with fixed settings, a
transaction that records what it was given, and a node registration to route.

Import from another test folder with ``tests/service`` on ``sys.path`` (as the end-to-end
tests do for ``service_kafka``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from schemas.events import GpuSpec, NodeRegistered, make_event
from streams.processors.context import Context
from streams.processors.routing import Router
from streams.settings import WorkerSettings


class RecordingTxn:
    """Stands in for ``eos_txn.Transaction``: appends as (topic, key, value), state puts by key."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.puts: dict[str, Any] = {}

    async def send(self, topic: str, key: bytes, value: bytes, **_: Any) -> None:
        self.sent.append((topic, key, value))

    async def put(self, key: str, value: Any) -> None:
        self.puts[key] = value


def offline_router(*, cells: int = 2, partitions: int = 1,
                summaries: dict[str, Any] | None = None,
                clock: Callable[[], float] | None = None,
                state: dict[str, Any] | None = None) -> Router:
    """A router owning every partition (partition 0 restored from ``state``), reading
    cell summaries from ``summaries`` (a live dict: tests may change it later)."""
    settings = WorkerSettings(bootstrap="-", app_id="t", web_port=0, web_host="-",
                              data_dir=Path("."), cells=cells, partitions=partitions,
                              replication=1, tick_s=1.0, profile="hetsched")
    view = summaries if summaries is not None else {}
    ctx = Context(settings, SimpleNamespace(  # type: ignore[arg-type]
        items=lambda: sorted(view.items())))
    router = Router(ctx, clock=clock) if clock is not None else Router(ctx)
    for p in range(partitions):
        router.restore(p, dict(state or {}) if p == 0 else {})
    return router


def registration(node_id: str, cell: str | None, occurred_at: datetime) -> Any:
    """A one-A100 node's registration, asking for ``cell``."""
    return make_event(NodeRegistered(
        node_id=node_id, cell=cell, cpu_milli=64000, memory_mib=262144, pool="p",
        gpus=[GpuSpec(index=0, uuid=f"GPU-{node_id}-0", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0)]), source=f"agent/{node_id}", occurred_at=occurred_at)
