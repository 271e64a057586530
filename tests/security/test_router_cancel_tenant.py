"""The router binds a cancellation to the tenant whose submission owns the task.

Before, a signed ``TaskCancelled`` from any known tenant passed the router (it
held no tenants), so tenant ``nlp`` could cancel a ``vision`` task by id. Now
the first accepted submission records ``tenant/<task>`` in the router
partition's state (a task's submission and cancellations share a partition:
both are keyed by task id) and later cancellations must come from that tenant.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from security_events import NOW, cancellation, submission
from test_identity import ALICE_KEY, BOB_KEY, IDENTITY, NODE_KEY, signed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from router_fakes import RecordingTxn, offline_router, registration

from schemas.codec import decode, decode_deadletter
from schemas.signing import Signer
from schemas.topics import NODES, TASKS
from streams.processors.routing import Router

ALICE, BOB = Signer("alice", ALICE_KEY), Signer("bob", BOB_KEY)


def _router() -> Router:
    router = offline_router(cells=2, partitions=2)
    router.ctx.identity = IDENTITY  # the router reads HETSCHED_SECURITY_CONFIG; unset in tests
    return router


def _deliver(router: Router, txn: RecordingTxn, topic: str, envelope: Any, signer: Signer) -> None:
    value, key, headers = signed(topic, envelope, signer)
    msg = SimpleNamespace(topic=topic, partition=0, offset=0, key=key, value=value,
                          headers=headers, timestamp=None)
    asyncio.run(router.process(msg, txn))


def _node() -> Any:
    return registration("node-a", "cell-1", NOW)


def _routed(txn: RecordingTxn) -> list[tuple[str, str]]:
    return [(decode(v).type, decode(v).payload.task_id) for t, _, v in txn.sent
            if t.endswith("input-log") and hasattr(decode(v).payload, "task_id")]


def _refused(txn: RecordingTxn) -> list[tuple[str, str]]:
    out = []
    for topic, _, value in txn.sent:
        if topic.endswith("deadletter"):
            letter = decode_deadletter(value)
            out.append((letter.message.split(":")[0], letter.errors[0].value))
    return out


def test_another_tenant_cannot_cancel_a_task_it_does_not_own() -> None:
    router, txn = _router(), RecordingTxn()
    _deliver(router, txn, NODES, _node(), Signer("node-a", NODE_KEY))
    _deliver(router, txn, TASKS, submission("t-vision", "vision"), ALICE)
    assert txn.puts["tenant/t-vision"] == "vision"

    _deliver(router, txn, TASKS, cancellation("t-vision"), BOB)
    assert _refused(txn) == [("tenant_forged", "t-vision")]
    assert _routed(txn) == [("TaskSubmitted", "t-vision")]  # bob's cancellation never routed

    _deliver(router, txn, TASKS, cancellation("t-vision"), ALICE)
    assert _routed(txn) == [("TaskSubmitted", "t-vision"), ("TaskCancelled", "t-vision")]


def test_the_first_accepted_submission_keeps_the_task_id() -> None:
    router, txn = _router(), RecordingTxn()
    _deliver(router, txn, NODES, _node(), Signer("node-a", NODE_KEY))
    _deliver(router, txn, TASKS, submission("t-1", "vision"), ALICE)
    _deliver(router, txn, TASKS, submission("t-1", "nlp"), BOB)  # same id, other tenant
    assert txn.puts["tenant/t-1"] == "vision"
    _deliver(router, txn, TASKS, cancellation("t-1"), BOB)
    assert _refused(txn) == [("tenant_forged", "t-1")]
