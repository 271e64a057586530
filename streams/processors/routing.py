"""The router and sequencer: node and task events in, each appended to its cell's input log.

Consumes ``hetsched.nodes``, ``hetsched.telemetry`` (keyed by node) and
``hetsched.tasks``, ``hetsched.task-status`` (keyed by task). The topics are
co-partitioned, so one agent owns a node's or a task's whole history and can
keep a node's and a task's cell in its partition's state. The original envelope is
appended unchanged except for ``cell`` (event id and event time kept), in the
order this agent reads it; that order is the order the cell will see.

Exactly once: the appended record, the state update and the consumed offset
commit in one transaction (:mod:`streams.processors.eos`).

Waiting (:mod:`streams.processors.waiting`): a node's events read before its
registration are parked until it routes; a submission read while no cell is
known to have a node is held until one is (or a bound releases it), so that a
registration read a moment later from another topic is not answered with a
final ``TaskUnschedulable``.

GpuTelemetry, most of the input, takes a cheaper decode and encode
(:mod:`streams.processors.ingest`) that accepts and writes exactly what the
general path does, and its envelope is left to the scheduler of the same worker
(``Context.routed``), which then need not validate the record again.

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
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from schemas.codec import decode, encode
from schemas.deadletter import DeadLetter, FieldError
from schemas.events import GpuTelemetry, NodeRegistered, TaskSubmitted
from schemas.signing import Refusal, verify_origin
from schemas.topics import BY_NAME, TASKS, TELEMETRY, TopicSpec, wrong_key
from streams import router
from streams.metrics import ROUTED, UNROUTED, CountsByType
from streams.processors.context import Context
from streams.processors.eos_txn import Transaction
from streams.processors.ingest import routed_bytes, valid_telemetry
from streams.processors.waiting import (
    EARLY,
    HELD,
    HOLD_EVENTS_LIMIT,
    HOLD_LIMIT,
    HOLD_MAX_S,
    PARK_LIMIT,
    PARKED_NODES_LIMIT,
    Waiting,
)
from streams.security.identity import (
    NODE_TOPICS,
    Identity,
    authorize_input,
    bind_node,
    bind_tenant,
    identity_from_env,
)

__all__ = ["PARK_LIMIT", "Router"]

log = logging.getLogger(__name__)
TENANT = "tenant/"  # state key prefix: task id -> tenant of its accepted submission
NODE = "node/"  # state key prefix: node id -> its cell
TELEMETRY_TYPE = GpuTelemetry.EVENT_TYPE
assert TELEMETRY_TYPE in BY_NAME[TELEMETRY].event_types  # what Router.process's fast path skips
_UNKNOWN: Any = object()


class Router:
    """The router's :class:`~streams.processors.eos_txn.Handler`: state ``node/<id>`` and
    ``task/<id>`` -> cell, per source partition (the four topics are co-partitioned,
    so a node's or a task's whole history is in one partition number), and what waits
    (``early/<node>``, ``held/<task>``: :mod:`streams.processors.waiting`); with
    security configured also ``tenant/<task>``, the owner its cancellations must match.

    ``clock``: wall-clock seconds, for how long a submission has been held.
    """

    def __init__(self, ctx: Context, clock: Callable[[], float] = time.time) -> None:
        ctx.identity = identity_from_env()  # read once: a bad file stops the worker at start
        self.ctx = ctx
        self.clock = clock
        self.state: dict[int, dict[str, Any]] = {}
        self.waiting = Waiting()
        self._node_cells: dict[int, set[str]] = {}
        """Per partition: cells its state has routed a registration to (restored)."""
        self._pending: dict[str, int] = {}
        """Per cell: GPUs of tasks routed there since its summary last changed (a hint)."""
        self._seen: dict[str, Any] = {}
        self._routed = CountsByType(ROUTED)
        """Appends by event type, counted at each ``finish``."""
        self._specs: dict[str, TopicSpec | None] = {}
        """Catalog entry per (prefixed) topic name read, as ``Context.spec_of`` gives it."""

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.state[partition] = state
        self.waiting.restore(partition, state)
        self._node_cells[partition] = {str(v) for k, v in state.items()
                                       if k.startswith("node/")}

    def drop(self, partition: int) -> None:
        self.state.pop(partition, None)
        self.waiting.drop(partition)
        self._node_cells.pop(partition, None)

    async def process(self, msg: Any, txn: Transaction) -> None:
        """Route one record: append it to its cell's input log (or dead-letter it)."""
        ctx = self.ctx
        spec = self._specs.get(msg.topic, _UNKNOWN)
        if spec is _UNKNOWN:
            spec = self._specs[msg.topic] = ctx.spec_of(msg.topic)
        value = None
        if spec is not None and spec.name == TELEMETRY:
            # Telemetry, most of the input, decodes cheaper to the very same envelope;
            # whatever that path does not accept, decode judges (and dead-letters) as ever.
            value = valid_telemetry(msg.value)
            if value is not None and ctx.identity is None and \
                    msg.key == value.payload.node_id.encode():
                # What the general path below does with a GpuTelemetry record of a routed
                # node when no security is configured (the type is carried on this topic,
                # it names no task, it is keyed by its node, its cell is its node's):
                # append it, without the checks that cannot apply. An unrouted node's
                # record takes the general path.
                cell = self.state[msg.partition].get(NODE + value.payload.node_id)
                if cell is not None:
                    await self._append(txn, str(cell), value)
                    return
        if value is None:  # a null value (tombstone): its letter says what the topic needs
            value = decode(msg.value) if msg.value is not None else decode(None, topic=msg.topic)
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
        problem = None if spec is None else wrong_key(spec, msg.key, value)
        if problem is not None:
            await ctx.dead_letter(txn, msg, _wrong_key_letter(problem, msg, value))
            return
        if ctx.identity is not None and spec is not None and (
                spec.name == TASKS or spec.name in NODE_TOPICS):
            owners = self.state[msg.partition]
            refusal = _authorize(ctx.identity, spec.name, msg, value,
                                 task_tenant=lambda task: owners.get(TENANT + task))
            if refusal is not None:
                await ctx.dead_letter(txn, msg, refusal.dead_letter(
                    msg.value or b"", topic=msg.topic, key=msg.key, event_type=value.type,
                    event_id=value.event_id))
                return
            if isinstance(value.payload, TaskSubmitted) and \
                    TENANT + value.payload.task_id not in owners:
                # The first accepted submission owns the task id: later cancellations
                # are bound to its tenant (bind_tenant's task_tenant).
                await self._put(txn, owners, TENANT + value.payload.task_id,
                                value.payload.tenant)
        partition = msg.partition
        task_id = value.payload.__dict__.get("task_id")
        if task_id is not None and self.waiting.is_held(partition, task_id):
            await self._hold_after(partition, txn, task_id, value)
            return
        cell = await self._cell_of(partition, txn, value)
        if cell is None:
            if isinstance(value.payload, TaskSubmitted):
                await self._hold(partition, txn, value)
            elif not await self._park(partition, txn, value):
                UNROUTED.inc()
            return
        await self._append(txn, cell, value)
        if isinstance(value.payload, NodeRegistered):
            await self._unpark(partition, txn, value.payload.node_id, cell)

    async def finish(self, partition: int, txn: Transaction) -> None:
        """End of a transaction of ``partition``: release the submissions it holds that can
        go now (a cell is known to have a node, or they waited :data:`HOLD_MAX_S`).

        Only a transaction of the partition can release its held tasks (their state and
        their append commit together): the next record on any of its four topics, or,
        for a partition that reads nothing, the idle transaction ``eos`` runs about once
        a second while :meth:`has_waiting` (:meth:`idle`).
        """
        held = self.waiting.held_tasks(partition)
        if not held:
            self._routed.flush()
            return
        known = self._any_cell_with_nodes()
        now = self.clock()
        state = self.state[partition]
        for task in held:
            waited = now - float(state[HELD + task]["at"])
            if known or waited >= HOLD_MAX_S:
                if not known:
                    log.warning("task %s waited %.0f s for a cell with a node; routing it "
                                "anyway (its cell answers)", task, waited)
                await self._release(partition, txn, task)
        self._routed.flush()

    def has_waiting(self, partition: int) -> bool:
        """Whether ``partition`` holds submissions that a transaction could release (for a
        processor that runs :meth:`idle` on partitions that read nothing)."""
        return bool(self.waiting.held.get(partition))

    async def idle(self, partition: int, txn: Transaction) -> None:
        """A transaction of ``partition`` that consumed nothing (``eos`` runs it for a quiet
        partition that :meth:`has_waiting`): what :meth:`finish` does, so a held task is
        released on time without more input on its partition."""
        await self.finish(partition, txn)

    async def _append(self, txn: Transaction, cell: str, value: Any) -> None:
        kind = value.type
        # routed_bytes(value, value.cell) is encode(value); for telemetry it is cheaper.
        raw = encode(value) if value.cell == cell and kind != TELEMETRY_TYPE \
            else routed_bytes(value, cell)
        await txn.send(self.ctx.input_log, cell.encode(), raw)
        if kind == TELEMETRY_TYPE:
            self.ctx.routed.remember(raw, value, cell)  # the scheduler's validation of ``raw``
        self._routed.add(kind)

    # ---- a node's events before its registration -------------------------------------

    async def _park(self, partition: int, txn: Transaction, value: Any) -> bool:
        """Keep a node's event that arrived before its registration (another topic of
        the same partition number, read in no fixed order against it): an agent sends
        its first telemetry right after registering, and a dropped report is not resent
        until the GPU changes. Appended after the registration routes; bounded per node
        and per partition (:mod:`streams.processors.waiting`). False for what no
        registration can route."""
        fields = value.payload.__dict__
        node_id = fields.get("node_id")
        if node_id is None or fields.get("task_id") is not None:
            return False
        state, key = self.state[partition], EARLY + node_id
        parked = [*state.get(key, []), _b64(value)][-PARK_LIMIT:]
        state.pop(key, None)  # re-inserted last, as in self.waiting: least recent first
        await self._put(txn, state, key, parked)
        evicted = self.waiting.park(partition, node_id)
        if evicted is not None:
            dropped = state.pop(EARLY + evicted, [])
            await txn.put(EARLY + evicted, None)
            UNROUTED.inc(len(dropped))
            log.warning("node %s never registered: dropped its %d early events (more than "
                        "%d unregistered nodes sent events)", evicted, len(dropped),
                        PARKED_NODES_LIMIT)
        return True

    async def _unpark(self, partition: int, txn: Transaction, node_id: str, cell: str) -> None:
        state, key = self.state[partition], EARLY + node_id
        self.waiting.unpark(partition, node_id)
        parked = state.pop(key, None)
        if not parked:
            return
        await txn.put(key, None)
        for raw in parked:
            await self._append(txn, cell, decode(base64.b64decode(raw)))

    # ---- a submission before any cell has a node -------------------------------------

    async def _hold(self, partition: int, txn: Transaction, value: Any) -> None:
        """Keep a submission until a cell is known to have a node (see :meth:`finish`)."""
        held = self.waiting.held_tasks(partition)
        if len(held) >= HOLD_LIMIT:
            log.warning("more than %d submissions wait for a node; routing the oldest (%s) "
                        "anyway", HOLD_LIMIT, held[0])
            await self._release(partition, txn, held[0])
        task = value.payload.task_id
        if not held:
            log.warning("task %s waits: no cell is known to have a node yet; it goes to one "
                        "when a node registers, or after %.0f s at the latest (checked at "
                        "this router partition's next transaction)", task, HOLD_MAX_S)
        entry = self.waiting.hold(partition, task, self.clock(), _b64(value))
        await self._put(txn, self.state[partition], HELD + task, entry)

    async def _hold_after(self, partition: int, txn: Transaction, task: str,
                          value: Any) -> None:
        """A later event of a held task waits behind its submission (same order)."""
        state, key = self.state[partition], HELD + task
        entry = dict(state[key])
        entry["records"] = [*entry["records"], _b64(value)]
        await self._put(txn, state, key, entry)
        if len(entry["records"]) >= HOLD_EVENTS_LIMIT:
            await self._release(partition, txn, task)

    async def _release(self, partition: int, txn: Transaction, task: str) -> None:
        """Route a held submission now and append it with what followed it, in order."""
        state, key = self.state[partition], HELD + task
        self.waiting.release(partition, task)
        entry = state.pop(key)
        await txn.put(key, None)
        first, *rest = (decode(base64.b64decode(raw)) for raw in entry["records"])
        if isinstance(first, DeadLetter) or not isinstance(first.payload, TaskSubmitted):
            # _hold stores the submission first, as this worker encoded it
            raise TypeError(f"held records of task {task} do not start with its submission")
        cell = self._route_task(first.payload)
        await self._put(txn, state, f"task/{task}", cell)
        await self._append(txn, cell, first)
        for value in rest:
            await self._append(txn, cell, value)

    # ---- cells ----------------------------------------------------------------------

    def _populated(self) -> list[str]:
        """Cells known to have had a node: routed by this worker since it started
        (a hint, not persisted) or in the restored state of a partition it owns."""
        routed: dict[str, int] = self.ctx.local.get("routed_gpus", {})
        cells = {c for c, n in routed.items() if n}
        for node_cells in self._node_cells.values():
            cells |= node_cells
        return sorted(cells)

    def _any_cell_with_nodes(self) -> bool:
        return bool(self._populated()) or any(
            s and s.get("nodes") for _, s in self.ctx.summaries.items())

    def _route_task(self, p: TaskSubmitted) -> str:
        """The cell for a submission not routed before (``streams.router.cell_for_task``)."""
        ctx = self.ctx
        summaries = dict(ctx.summaries.items())
        for c, summary in summaries.items():
            if self._seen.get(c) is not summary:
                self._seen[c] = summary
                self._pending[c] = 0
        r = p.resources
        cell = router.cell_for_task(p.task_id, r.gpu_count, r.gpu_models,
                                    ctx.settings.cell_names,
                                    router.with_pending(summaries, self._pending),
                                    self._populated())
        self._pending[cell] = self._pending.get(cell, 0) + max(1, r.gpu_count)
        return cell

    async def reject(self, msg: Any, txn: Transaction, error: str) -> None:
        """Dead-letter a record whose processing kept failing (see ``eos.POISON_ATTEMPTS``)."""
        await self.ctx.reject(txn, msg, error)

    async def _cell_of(self, partition: int, txn: Transaction, value: Any) -> str | None:
        """The cell ``value`` goes to; None for what cannot route yet (a node's event
        before its registration, a submission while no cell has a node) or ever."""
        ctx = self.ctx
        state = self.state[partition]
        p = value.payload
        if isinstance(p, NodeRegistered):
            cell = state.get(f"node/{p.node_id}")
            if cell is None:
                cells = ctx.settings.cell_names
                summaries = dict(ctx.summaries.items())
                pending: dict[str, int] = ctx.local.setdefault("routed_gpus", {})
                known = router.gpus_by_cell(summaries)
                load = {c: known.get(c, 0) + pending.get(c, 0) for c in cells}
                cell = router.cell_for_node(p.cell, cells, load)
                pending[cell] = pending.get(cell, 0) + len(p.gpus)
                await self._put(txn, state, f"node/{p.node_id}", cell)
                self._node_cells.setdefault(partition, set()).add(str(cell))
            return str(cell)
        if isinstance(p, TaskSubmitted):
            cell = state.get(f"task/{p.task_id}")
            if cell is None:
                if not self._any_cell_with_nodes():
                    return None  # held (see finish)
                cell = self._route_task(p)
                await self._put(txn, state, f"task/{p.task_id}", cell)
            return str(cell)
        fields = p.__dict__  # a missing attribute costs an exception in pydantic's __getattr__
        node_id, task_id = fields.get("node_id"), fields.get("task_id")
        if task_id is not None:
            if value.cell in ctx.settings.cell_names:
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


def _authorize(identity: Identity, catalog_topic: str, msg: Any, value: Any, *,
               task_tenant: Callable[[str], str | None] | None = None) -> Refusal | None:
    """Why ``event`` is refused on security grounds, or None (see the module doc).

    ``task_tenant`` (task id -> the tenant whose submission this router accepted,
    from the partition's state: tasks are keyed by id, so a task's submission and
    its cancellations share a partition) binds a ``TaskCancelled`` to the task's
    owner. A task submitted before security was configured has no recorded owner
    and can be cancelled by any authenticated tenant, as before.
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
        bound = (bind_tenant(value, origin, identity.tenants, task_tenant=task_tenant)
                 if catalog_topic == TASKS else bind_node(value, origin, identity.nodes))
        return bound if isinstance(bound, Refusal) else None
    result = authorize_input(catalog_topic, msg.key, raw, pairs, value, identity,
                             task_tenant=task_tenant)
    return result if isinstance(result, Refusal) else None


def _wrong_key_letter(problem: str, msg: Any, value: Any) -> DeadLetter:
    """A record keyed by something else than its topic's key field: ``validation_failed``
    with a ``wrong_key:`` message (as ``too_large:`` is; a new reason code would change
    DeadLetter v1's enum, which the compatibility rule treats as breaking)."""
    key = None if msg.key is None else bytes(msg.key).decode("utf-8", "replace")
    return DeadLetter(
        reason="validation_failed", message=problem,
        errors=[FieldError(field="(key)", value=key, error=problem.removeprefix("wrong_key: "))],
        original_b64=base64.b64encode(msg.value or b"").decode(),
        event_type=value.type, event_version=value.version, event_id=value.event_id)


def _b64(value: Any) -> str:
    return base64.b64encode(encode(value)).decode()
