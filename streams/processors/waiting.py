"""What the router keeps in a partition's state until it can route it, and how much.

Two kinds of records wait, both in the router partition's state (so they survive a
restart and leave exactly once, in a transaction of that partition):

* **parked**, ``early/<node>``: a node's events read before its registration (the
  node topics are read in no fixed order against each other). Appended after the
  registration routes. At most :data:`PARK_LIMIT` events per node (the latest) and
  :data:`PARKED_NODES_LIMIT` nodes per partition (the least recently parked node's
  events are dropped first), so the whole cluster keeps at most
  ``PARKED_NODES_LIMIT * partitions`` nodes' worth however many unknown node ids
  send.
* **held**, ``held/<task>``: a submission read while no cell is known to have a
  node (a submission sequenced ahead of the first registrations, read from another
  topic). Routed and appended once a cell is known to have one, so the cell does not
  answer a final ``TaskUnschedulable`` for want of nodes that were on their way.
  Later events of a held task (a cancellation, a status) wait behind it in the same
  entry and follow it in order.

Bounds of holding, so that a cluster that never gets a node still answers every
submission: a held task is released after :data:`HOLD_MAX_S` of wall-clock time
anyway (routed as before: the cell refuses it with its reason), and at most
:data:`HOLD_LIMIT` tasks per partition (:data:`HOLD_EVENTS_LIMIT` events each) are
held; past that the oldest is released at once. The router checks at the end of
every transaction of the partition, so a partition that reads nothing more checks
nothing more (see :meth:`streams.processors.routing.Router.finish`).
"""

from __future__ import annotations

from typing import Any

PARK_LIMIT = 32
"""Events kept per node that arrive before its registration (the latest)."""
PARKED_NODES_LIMIT = 256
"""Nodes per router partition with parked events (the least recently parked go first)."""
HOLD_LIMIT = 256
"""Submissions held per router partition while no cell is known to have a node."""
HOLD_EVENTS_LIMIT = 16
"""Records kept per held task (its submission and what followed it)."""
HOLD_MAX_S = 60.0
"""Wall-clock seconds a submission waits for a cell with a node before it is routed
anyway. Nodes normally register within a second of a submission that raced them;
a minute covers agents started right after the scheduler, and a cluster without
nodes still answers (the cell's refusal says why) instead of keeping the user waiting."""

EARLY, HELD = "early/", "held/"


class Waiting:
    """Per partition, the order of parked nodes and of held tasks (the state keeps the
    records themselves), rebuilt from the state on restore: held tasks by the sequence
    number their entry carries, parked nodes in the restored state's order (first write
    of each key in the state topic, so only roughly the parking order: it decides which
    unknown node's events are dropped first, never whether the bound holds)."""

    def __init__(self) -> None:
        self.parked: dict[int, dict[str, None]] = {}
        """Per partition: node ids with parked events, least recently parked first."""
        self.held: dict[int, dict[str, None]] = {}
        """Per partition: held task ids, oldest first."""
        self._seq: dict[int, int] = {}

    def restore(self, partition: int, state: dict[str, Any]) -> None:
        self.parked[partition] = {k[len(EARLY):]: None for k in state if k.startswith(EARLY)}
        held = sorted((v["seq"], k[len(HELD):]) for k, v in state.items() if k.startswith(HELD))
        self.held[partition] = {task: None for _, task in held}
        self._seq[partition] = held[-1][0] + 1 if held else 0

    def drop(self, partition: int) -> None:
        for index in (self.parked, self.held, self._seq):
            index.pop(partition, None)

    def park(self, partition: int, node: str) -> str | None:
        """Note that ``node`` parked an event; the node whose events must go, or None."""
        order = self.parked[partition]
        order.pop(node, None)
        order[node] = None
        if len(order) <= PARKED_NODES_LIMIT:
            return None
        oldest = next(iter(order))
        del order[oldest]
        return oldest

    def unpark(self, partition: int, node: str) -> None:
        self.parked[partition].pop(node, None)

    def is_held(self, partition: int, task: str) -> bool:
        return task in self.held[partition]

    def hold(self, partition: int, task: str, at: float, record: str) -> dict[str, Any]:
        """A new held entry (the caller writes it to ``held/<task>``)."""
        seq = self._seq[partition]
        self._seq[partition] = seq + 1
        self.held[partition][task] = None
        return {"seq": seq, "at": at, "records": [record]}

    def release(self, partition: int, task: str) -> None:
        self.held[partition].pop(task, None)

    def held_tasks(self, partition: int) -> list[str]:
        """Held task ids of ``partition``, oldest first."""
        return list(self.held.get(partition, ()))
