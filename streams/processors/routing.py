"""The router and sequencer: node and task events in, each appended to its cell's input log.

Consumes ``hetsched.nodes``, ``hetsched.telemetry`` (keyed by node) and
``hetsched.tasks``, ``hetsched.task-status`` (keyed by task). The topics are
co-partitioned, so one agent owns a node's or a task's whole history and can
keep ``node_to_cell`` / ``task_to_cell`` in tables. The original envelope is
appended unchanged except for ``cell`` (event id and event time kept), in the
order this agent reads it; that order is the order the cell will see.

Exactly once: the appended record, the table update and the consumed offset
commit in one transaction (:mod:`streams.processors.txn`).

Security (``docs/security.md``): when ``HETSCHED_SECURITY_CONFIG`` names an
identity configuration, records on ``hetsched.tasks`` and the node topics must
carry a valid origin signature whose principal owns the tenant / node id they
claim (:func:`streams.security.identity.authorize_input`); a refused record is
dead-lettered and never reaches a cell. Signatures cover the topic actually
written (prefix included, as the agents and ``hetsched submit`` sign it).
Unset, nothing is checked (development, tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import faust

from schemas.codec import encode
from schemas.deadletter import DeadLetter
from schemas.events import NodeRegistered, TaskSubmitted
from schemas.signing import Refusal, verify_origin
from schemas.topics import TASKS
from streams import router
from streams.metrics import ROUTED, UNROUTED
from streams.processors.context import Context
from streams.security.identity import (
    NODE_TOPICS,
    Identity,
    authorize_input,
    bind_node,
    bind_tenant,
    identity_from_env,
)


def make_router(ctx: Context) -> Callable[[faust.StreamT[Any]], Awaitable[None]]:
    ctx.identity = identity_from_env()  # read once: a bad file stops the worker at start

    async def route_inputs(stream: faust.StreamT[Any]) -> None:
        async for event in stream.events():
            await route_one(ctx, event)

    return route_inputs


async def route_one(ctx: Context, event: faust.types.EventT) -> None:
    """Route one event; skip it if its effects are committed already (re-delivery).

    The source position is saved in ``source_to_offset`` in the same transaction
    as the append and the routing tables, so a successor after a failover knows
    exactly which events are done, whatever Faust's own offset commit says.
    """
    msg = event.message
    position = f"{msg.topic}/{msg.partition}"
    if msg.offset <= ctx.tables.source_to_offset.get(position, -1):
        return
    async with ctx.sender.atomic(event):
        await _route(ctx, event)
        await ctx.sender.put(event, ctx.tables.source_to_offset, position, msg.offset)


async def _route(ctx: Context, event: faust.types.EventT) -> None:
    value = event.value
    if isinstance(value, DeadLetter):
        await ctx.dead_letter(event, value)
        return
    spec = ctx.spec_of(event.message.topic)
    if spec is not None and value.type not in spec.event_types:
        letter = DeadLetter(reason="wrong_topic", original_b64="",
                            message=f"{value.type} is not carried on {event.message.topic}",
                            event_type=value.type, event_version=value.version,
                            event_id=value.event_id)
        await ctx.dead_letter(event, letter.model_copy(update={"original_b64": _b64(value)}))
        return
    if ctx.identity is not None and spec is not None and (
            spec.name == TASKS or spec.name in NODE_TOPICS):
        refusal = _authorize(ctx.identity, spec.name, event, value)
        if refusal is not None:
            msg = event.message
            await ctx.dead_letter(event, refusal.dead_letter(
                msg.value or b"", topic=msg.topic, key=msg.key, event_type=value.type,
                event_id=value.event_id))
            return
    cell = await _cell_of(ctx, event, value)
    if cell is None:
        UNROUTED.inc()
        return
    routed = value if value.cell == cell else value.model_copy(update={"cell": cell})
    await ctx.sender.send(event, ctx.input_log, cell.encode(), encode(routed))
    ROUTED.labels(value.type).inc()


async def _cell_of(ctx: Context, event: faust.types.EventT, value: Any) -> str | None:
    cells, t = ctx.settings.cell_names, ctx.tables
    p = value.payload
    if isinstance(p, NodeRegistered):
        cell = t.node_to_cell.get(p.node_id)
        if cell is None:
            pending: dict[str, int] = ctx.local.setdefault("routed_gpus", {})
            known = router.gpus_by_cell(dict(t.cell_to_summary.items()))
            load = {c: known.get(c, 0) + pending.get(c, 0) for c in cells}
            cell = router.cell_for_node(p.cell, cells, load)
            pending[cell] = pending.get(cell, 0) + len(p.gpus)
            await ctx.sender.put(event, t.node_to_cell, p.node_id, cell)
        return str(cell)
    node_id = getattr(p, "node_id", None)
    if isinstance(p, TaskSubmitted):
        cell = t.task_to_cell.get(p.task_id)
        if cell is None:
            r = p.resources
            routed = ctx.local.get("routed_gpus", {})
            cell = router.cell_for_task(p.task_id, r.gpu_count, r.gpu_models, cells,
                                        dict(t.cell_to_summary.items()),
                                        [c for c, n in routed.items() if n])
            await ctx.sender.put(event, t.task_to_cell, p.task_id, cell)
        return str(cell)
    task_id = getattr(p, "task_id", None)
    if task_id is not None:
        if value.cell in cells:
            return str(value.cell)
        found = t.task_to_cell.get(task_id)
        return None if found is None else str(found)
    if node_id is not None:
        found = t.node_to_cell.get(node_id)
        return None if found is None else str(found)
    return None


def _authorize(identity: Identity, catalog_topic: str, event: faust.types.EventT,
               value: Any) -> Refusal | None:
    """Why ``event`` is refused on security grounds, or None (see the module doc).

    Cancellations are not checked against the task's tenant here: the router
    does not hold tenants (``task_tenant`` left unset).
    """
    msg = event.message
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
    import base64

    return base64.b64encode(encode(value)).decode()
