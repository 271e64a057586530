"""The router and sequencer: node and task events in, each appended to its cell's input log.

Consumes ``hetsched.nodes``, ``hetsched.telemetry`` (keyed by node) and
``hetsched.tasks``, ``hetsched.task-status`` (keyed by task). The topics are
co-partitioned, so one agent owns a node's or a task's whole history and can
keep a node's and a task's cell in its partition's state. The original envelope is
appended unchanged except for ``cell`` (event id and event time kept), in the
order this agent reads it; that order is the order the cell will see.

Exactly once: the appended record, the state update and the consumed offset
commit in one transaction (:mod:`streams.processors.eos`).

Security (``docs/security.md``): when ``HETSCHED_SECURITY_CONFIG`` names an
identity configuration, records on ``hetsched.tasks`` and the node topics must
carry a valid origin signature whose principal owns the tenant / node id they
claim (:func:`streams.security.identity.authorize_input`); a refused record is
dead-lettered and never reaches a cell. Signatures cover the topic actually
written (prefix included, as the agents and ``hetsched submit`` sign it).
Unset, nothing is checked (development, tests).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter
from schemas.events import NodeRegistered, TaskSubmitted
from schemas.signing import Refusal, verify_origin
from schemas.topics import TASKS, TELEMETRY
from streams import router
from streams.metrics import ROUTED, UNROUTED
from streams.processors.context import Context
from streams.processors.eos import Transaction
from streams.processors.ingest import routed_bytes, valid_telemetry
from streams.security.identity import (
    NODE_TOPICS,
    Identity,
    authorize_input,
    bind_node,
    bind_tenant,
    identity_from_env,
)

PARK_LIMIT = 32
"""Events kept per node that arrive before its registration (see ``Router._park``)."""


class Router:
    """The router's :class:`~streams.processors.eos.Handler`: state ``node/<id>`` and
    ``task/<id>`` -> cell, per source partition (the four topics are co-partitioned,
    so a node's or a task's whole history is in one partition number)."""

    def __init__(self, ctx: Context) -> None:
        ctx.identity = identity_from_env()  # read once: a bad file stops the worker at start
        self.ctx = ctx
        self.state: dict[int, dict[str, Any]] = {}
        self._pending: dict[str, int] = {}
        """Per cell: GPUs of tasks routed there since its summary last changed (a hint)."""
        self._seen: dict[str, Any] = {}
        self._routed: dict[str, Any] = {}
        """``ROUTED`` counter per event type (``labels()`` costs a lock and a lookup)."""

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.state[partition] = state

    def drop(self, partition: int) -> None:
        self.state.pop(partition, None)

    async def process(self, msg: Any, txn: Transaction) -> None:
        """Route one record: append it to its cell's input log (or dead-letter it)."""
        ctx = self.ctx
        spec = ctx.spec_of(msg.topic)
        if spec is not None and spec.name == TELEMETRY and ctx.identity is None:
            value = valid_telemetry(msg.value)
            if value is not None:
                # Valid telemetry of a registered node: straight to its cell. Anything
                # else (invalid, unregistered node, another type) takes the path below.
                cell = self.state[msg.partition].get(f"node/{value.payload.node_id}")
                if cell is not None:
                    await self._append(txn, str(cell), value)
                    return
        value = decode(msg.value or b"")
        if isinstance(value, DeadLetter):
            await ctx.dead_letter(txn, msg, value)
            return
        if spec is not None and value.type not in spec.event_types:
            letter = DeadLetter(reason="wrong_topic", original_b64=_b64(value),
                                message=f"{value.type} is not carried on {msg.topic}",
                                event_type=value.type, event_version=value.version,
                                event_id=value.event_id)
            await ctx.dead_letter(txn, msg, letter)
            return
        if ctx.identity is not None and spec is not None and (
                spec.name == TASKS or spec.name in NODE_TOPICS):
            refusal = _authorize(ctx.identity, spec.name, msg, value)
            if refusal is not None:
                await ctx.dead_letter(txn, msg, refusal.dead_letter(
                    msg.value or b"", topic=msg.topic, key=msg.key, event_type=value.type,
                    event_id=value.event_id))
                return
        cell = await self._cell_of(msg.partition, txn, value)
        if cell is None:
            if not await self._park(msg.partition, txn, value):
                UNROUTED.inc()
            return
        await self._append(txn, cell, value)
        if isinstance(value.payload, NodeRegistered):
            await self._unpark(msg.partition, txn, value.payload.node_id, cell)

    async def _append(self, txn: Transaction, cell: str, value: Any) -> None:
        raw = encode(value) if value.cell == cell else routed_bytes(value, cell)
        await txn.send(self.ctx.input_log, cell.encode(), raw)
        counter = self._routed.get(value.type)
        if counter is None:
            counter = self._routed[value.type] = ROUTED.labels(value.type)
        counter.inc()

    async def _park(self, partition: int, txn: Transaction, value: Any) -> bool:
        """Keep a node's event that arrived before its registration (another topic of
        the same partition number, read in no fixed order against it): an agent sends
        its first telemetry right after registering, and a dropped report is not resent
        until the GPU changes. Appended after the registration routes; the last
        :data:`PARK_LIMIT` per node are kept. False for what no registration can route."""
        p = value.payload
        node_id = getattr(p, "node_id", None)
        if node_id is None or getattr(p, "task_id", None) is not None:
            return False
        state, key = self.state[partition], f"early/{node_id}"
        parked = [*state.get(key, []), base64.b64encode(encode(value)).decode()][-PARK_LIMIT:]
        await self._put(txn, state, key, parked)
        return True

    async def _unpark(self, partition: int, txn: Transaction, node_id: str, cell: str) -> None:
        state, key = self.state[partition], f"early/{node_id}"
        parked = state.pop(key, None)
        if not parked:
            return
        await txn.put(key, None)
        for raw in parked:
            await self._append(txn, cell, decode(base64.b64decode(raw)))

    async def reject(self, msg: Any, txn: Transaction, error: str) -> None:
        """Dead-letter a record whose processing kept failing (see ``eos.POISON_ATTEMPTS``)."""
        await self.ctx.reject(txn, msg, error)

    async def _cell_of(self, partition: int, txn: Transaction, value: Any) -> str | None:
        ctx = self.ctx
        cells, state = ctx.settings.cell_names, self.state[partition]
        p = value.payload
        if isinstance(p, NodeRegistered):
            cell = state.get(f"node/{p.node_id}")
            if cell is None:
                summaries = dict(ctx.summaries.items())
                pending: dict[str, int] = ctx.local.setdefault("routed_gpus", {})
                known = router.gpus_by_cell(summaries)
                load = {c: known.get(c, 0) + pending.get(c, 0) for c in cells}
                cell = router.cell_for_node(p.cell, cells, load)
                pending[cell] = pending.get(cell, 0) + len(p.gpus)
                await self._put(txn, state, f"node/{p.node_id}", cell)
            return str(cell)
        if isinstance(p, TaskSubmitted):
            cell = state.get(f"task/{p.task_id}")
            if cell is None:
                summaries = dict(ctx.summaries.items())
                r = p.resources
                routed = ctx.local.get("routed_gpus", {})
                for c, summary in summaries.items():
                    if self._seen.get(c) is not summary:
                        self._seen[c] = summary
                        self._pending[c] = 0
                cell = router.cell_for_task(p.task_id, r.gpu_count, r.gpu_models, cells,
                                            router.with_pending(summaries, self._pending),
                                            [c for c, n in routed.items() if n])
                self._pending[cell] = self._pending.get(cell, 0) + max(1, r.gpu_count)
                await self._put(txn, state, f"task/{p.task_id}", cell)
            return str(cell)
        fields = p.__dict__  # a missing attribute costs an exception in pydantic's __getattr__
        node_id, task_id = fields.get("node_id"), fields.get("task_id")
        if task_id is not None:
            if value.cell in cells:
                return str(value.cell)
            found = state.get(f"task/{task_id}")
            return None if found is None else str(found)
        if node_id is not None:
            found = state.get(f"node/{node_id}")
            return None if found is None else str(found)
        return None

    @staticmethod
    async def _put(txn: Transaction, state: dict[str, Any], key: str, cell: Any) -> None:
        state[key] = cell  # dropped with the partition if the batch aborts
        await txn.put(key, cell)


def _authorize(identity: Identity, catalog_topic: str, msg: Any,
               value: Any) -> Refusal | None:
    """Why ``event`` is refused on security grounds, or None (see the module doc).

    Cancellations are not checked against the task's tenant here: the router
    does not hold tenants (``task_tenant`` left unset).
    """
    headers = msg.headers or ()
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    raw = msg.value or b""
    if msg.topic != catalog_topic:
        # Prefixed deployment: producers sign the topic they write to, while
        # authorize_input recognises input topics by catalog name.
        origin = verify_origin(msg.topic, msg.key, raw, pairs, identity.keyring)
        if isinstance(origin, Refusal):
            return origin
        bound = (bind_tenant(value, origin, identity.tenants) if catalog_topic == TASKS
                 else bind_node(value, origin, identity.nodes))
        return bound if isinstance(bound, Refusal) else None
    result = authorize_input(catalog_topic, msg.key, raw, pairs, value, identity)
    return result if isinstance(result, Refusal) else None


def _b64(value: Any) -> str:
    return base64.b64encode(encode(value)).decode()
