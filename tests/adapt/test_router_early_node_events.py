"""The router keeps a node's telemetry that it reads before the node's registration.

Registration (``hetsched.nodes``) and telemetry (``hetsched.telemetry``) are different
topics, read in no fixed order against each other; an agent sends its first telemetry
right after registering and does not resend it until the GPU changes, so dropping it
lost e.g. a stranger's GPU memory for good.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from adapt_builders import _ev, node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from router_fakes import RecordingTxn, offline_router

from schemas.codec import decode, encode
from schemas.events import GpuTelemetry, NodeRegistered
from streams.processors.routing import PARK_LIMIT, Router


def _router() -> Router:
    return offline_router(cells=1, partitions=1)


def _msg(topic: str, envelope: Any) -> Any:
    raw = encode(envelope.model_copy(update={"cell": None}))
    return SimpleNamespace(topic=topic, partition=0, offset=0, key=b"n1", value=raw,
                           headers=(), timestamp=None)


def _telemetry(foreign: int) -> Any:
    return _ev(GpuTelemetry(node_id="n1", gpu_index=0, gpu_uuid="GPU-n1-0", gpu_util_pct=0.0,
                            mem_used_mib=foreign, temperature_c=40.0, power_w=60.0,
                            foreign_mem_mib=foreign), 1, "tel/n1")


def _routed(txn: RecordingTxn) -> list[Any]:
    return [decode(v).payload for t, _, v in txn.sent if t == "hetsched.input-log"]


def test_telemetry_read_before_the_registration_follows_it_into_the_cell():
    router, txn = _router(), RecordingTxn()
    asyncio.run(router.process(_msg("hetsched.telemetry", _telemetry(61440)), txn))
    assert _routed(txn) == []  # no cell yet: kept, not dropped
    asyncio.run(router.process(_msg("hetsched.nodes", node("n1", gpus=1)), txn))
    routed = _routed(txn)
    assert [type(p) for p in routed] == [NodeRegistered, GpuTelemetry]
    assert routed[1].foreign_mem_mib == 61440
    assert txn.puts["early/n1"] is None and "early/n1" not in router.state[0]
    # once registered, its events route straight through
    asyncio.run(router.process(_msg("hetsched.telemetry", _telemetry(1024)), txn))
    assert [type(p) for p in _routed(txn)][-1] is GpuTelemetry and len(_routed(txn)) == 3


def test_a_node_that_never_registers_keeps_only_its_latest_events():
    router, txn = _router(), RecordingTxn()
    for i in range(PARK_LIMIT + 5):
        asyncio.run(router.process(_msg("hetsched.telemetry", _telemetry(i + 1)), txn))
    assert _routed(txn) == [] and len(router.state[0]["early/n1"]) == PARK_LIMIT
    asyncio.run(router.process(_msg("hetsched.nodes", node("n1", gpus=1)), txn))
    assert [p.foreign_mem_mib for p in _routed(txn)[1:]] == list(range(6, PARK_LIMIT + 6))
