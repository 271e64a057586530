"""The router binds a cancellation to the tenant whose submission owns the task.

Before, a signed ``TaskCancelled`` from any known tenant passed the router (it
held no tenants), so tenant ``nlp`` could cancel a ``vision`` task by id. Now
the first accepted submission records ``tenant/<task>`` in the router
partition's state (a task's submission and cancellations share a partition:
both are keyed by task id) and later cancellations must come from that tenant.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from security_events import NOW, cancellation, submission
from test_identity import ALICE_KEY, BOB_KEY, IDENTITY, NODE_KEY, signed

from schemas.codec import decode, decode_deadletter
from schemas.events import GpuSpec, NodeRegistered, make_event
from schemas.signing import Signer
from schemas.topics import NODES, TASKS
from streams.processors.context import Context
from streams.processors.routing import Router
from streams.settings import WorkerSettings

ALICE, BOB = Signer("alice", ALICE_KEY), Signer("bob", BOB_KEY)


class _Txn:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.puts: dict[str, Any] = {}

    async def send(self, topic: str, key: bytes, value: bytes, **_: Any) -> None:
        self.sent.append((topic, value))

    async def put(self, key: str, value: Any) -> None:
        self.puts[key] = value


def _router() -> Router:
    settings = WorkerSettings(bootstrap="-", app_id="t", web_port=0, web_host="-",
                              data_dir=Path("."), cells=2, partitions=2, replication=1,
                              tick_s=1.0, profile="hetsched")
    ctx = Context(settings, SimpleNamespace(items=list))  # type: ignore[arg-type]
    router = Router(ctx)
    ctx.identity = IDENTITY  # the router reads HETSCHED_SECURITY_CONFIG; unset in tests
    router.restore(0, {})
    return router


def _deliver(router: Router, txn: _Txn, topic: str, envelope: Any, signer: Signer) -> None:
    value, key, headers = signed(topic, envelope, signer)
    msg = SimpleNamespace(topic=topic, partition=0, offset=0, key=key, value=value,
                          headers=headers, timestamp=None)
    asyncio.run(router.process(msg, txn))


def _node() -> Any:
    return make_event(NodeRegistered(
        node_id="node-a", cell="cell-1", cpu_milli=64000, memory_mib=262144, pool="p",
        gpus=[GpuSpec(index=0, uuid="GPU-a-0", model="A100", memory_mib=81920,
                      fp32_tflops=19.5, fp16_tflops=312.0, mem_bandwidth_gbps=2039.0,
                      power_limit_w=400.0)]), source="agent/node-a", occurred_at=NOW)


def _routed(txn: _Txn) -> list[tuple[str, str]]:
    return [(decode(v).type, decode(v).payload.task_id) for t, v in txn.sent
            if t.endswith("input-log") and hasattr(decode(v).payload, "task_id")]


def _refused(txn: _Txn) -> list[tuple[str, str]]:
    out = []
    for topic, value in txn.sent:
        if topic.endswith("deadletter"):
            letter = decode_deadletter(value)
            out.append((letter.message.split(":")[0], letter.errors[0].value))
    return out


def test_another_tenant_cannot_cancel_a_task_it_does_not_own() -> None:
    router, txn = _router(), _Txn()
    _deliver(router, txn, NODES, _node(), Signer("node-a", NODE_KEY))
    _deliver(router, txn, TASKS, submission("t-vision", "vision"), ALICE)
    assert txn.puts["tenant/t-vision"] == "vision"

    _deliver(router, txn, TASKS, cancellation("t-vision"), BOB)
    assert _refused(txn) == [("tenant_forged", "t-vision")]
    assert _routed(txn) == [("TaskSubmitted", "t-vision")]  # bob's cancellation never routed

    _deliver(router, txn, TASKS, cancellation("t-vision"), ALICE)
    assert _routed(txn) == [("TaskSubmitted", "t-vision"), ("TaskCancelled", "t-vision")]


def test_the_first_accepted_submission_keeps_the_task_id() -> None:
    router, txn = _router(), _Txn()
    _deliver(router, txn, NODES, _node(), Signer("node-a", NODE_KEY))
    _deliver(router, txn, TASKS, submission("t-1", "vision"), ALICE)
    _deliver(router, txn, TASKS, submission("t-1", "nlp"), BOB)  # same id, other tenant
    assert txn.puts["tenant/t-1"] == "vision"
    _deliver(router, txn, TASKS, cancellation("t-1"), BOB)
    assert _refused(txn) == [("tenant_forged", "t-1")]
