"""The topic catalog: every Kafka topic of the integration API, in one place.

Each entry says what the topic carries, what its record key is, how many
partitions it starts with, and how long Kafka keeps it. Producers must key
records as stated (:func:`key_for` does it) so that everything about one
node, task or cell stays in one partition, in order.

Choices, and why:

* ``hetsched.input-log`` is keyed by cell: one ordered log per cell is the
  scheduler's source of truth (a partition may host several cells when there
  are more cells than partitions; each cell's order still holds). It is kept
  forever (``retention.ms=-1``) because audit replay re-runs it from the start.
* ``hetsched.decisions`` is keyed by cell too, and has the same partition
  count: it is co-partitioned with the input log, so the worker owning a cell
  writes that cell's decisions, the cell's decision order (what replay
  compares) lives in one partition, and each node's decisions -- a
  subsequence -- are ordered as well, including a migration that concerns two
  nodes of the cell. Executors read their cell's partition and keep the
  decisions naming their node. Kept forever for audit.
* ``hetsched.node-inventory`` is compacted: only the latest registration per
  node matters to a (re)starting router; a tombstone removes a left node.
* Telemetry is high volume and only recent samples matter: short retention.
* Dead letters are kept 30 days so an operator can inspect and re-drive them.
  The dead-letter topic has one partition whatever the deployment's partition
  count (``fixed_partitions``): refusals are few, and one partition keeps every
  refusal of the deployment in one order that an operator reads with one
  consumer and one offset.

Partition counts: a deployment chooses one count (``HETSCHED_PARTITIONS``,
default 8, the catalog's) for every topic that does not fix its own, because
the scheduler finds a cell's input-log partition by that count
(:func:`for_deployment`). Cleanup policy and retention are never overridden.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

DAY_MS = 24 * 60 * 60 * 1000
FOREVER = -1

NODES = "hetsched.nodes"
NODE_INVENTORY = "hetsched.node-inventory"
TELEMETRY = "hetsched.telemetry"
TASKS = "hetsched.tasks"
TASK_STATUS = "hetsched.task-status"
INPUT_LOG = "hetsched.input-log"
DECISIONS = "hetsched.decisions"
DEADLETTER = "hetsched.deadletter"

NODE_EVENTS = (
    "NodeRegistered",
    "NodeHeartbeat",
    "NodeDraining",
    "NodeFailed",
    "NodeLeft",
    "GpuFailed",
)
TELEMETRY_EVENTS = ("GpuTelemetry", "LinkMetrics")
TASK_EVENTS = ("TaskSubmitted", "TaskCancelled")
STATUS_EVENTS = ("TaskStarted", "TaskUsage", "TaskOverUse", "TaskFinished", "TaskFailed")
DECISION_EVENTS = (
    "TaskPlaced",
    "TaskResized",
    "TaskMigrating",
    "TaskPreempted",
    "TaskProbe",
    "TaskUnschedulable",
    "TaskRejected",
)
INPUT_EVENTS = NODE_EVENTS + TELEMETRY_EVENTS + TASK_EVENTS + STATUS_EVENTS + ("Tick",)


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the catalog."""

    name: str
    key: str
    """Record key: a payload field name, ``cell`` (the envelope's), or ``source_topic``."""
    partitions: int
    cleanup_policy: Literal["delete", "compact"]
    retention_ms: int
    """-1 keeps records forever."""
    description: str
    event_types: tuple[str, ...] = ()
    """Event types allowed on the topic; empty for non-envelope topics."""
    extra_config: dict[str, str] = field(default_factory=dict)
    fixed_partitions: bool = False
    """True: ``partitions`` is part of the contract, and a deployment's partition
    count (:func:`for_deployment`) leaves it as it is."""

    def config(self) -> dict[str, str]:
        """Kafka topic configs to create the topic with."""
        return {
            "cleanup.policy": self.cleanup_policy,
            "retention.ms": str(self.retention_ms),
            **self.extra_config,
        }


CATALOG: tuple[TopicSpec, ...] = (
    TopicSpec(
        name=NODES,
        key="node_id",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=7 * DAY_MS,
        description="Node lifecycle from agents: registration, heartbeats, drain, failure, leave.",
        event_types=NODE_EVENTS,
    ),
    TopicSpec(
        name=NODE_INVENTORY,
        key="node_id",
        partitions=8,
        cleanup_policy="compact",
        retention_ms=FOREVER,
        description="Latest NodeRegistered per node (compacted); a null value removes the node.",
        event_types=("NodeRegistered",),
    ),
    TopicSpec(
        name=TELEMETRY,
        key="node_id",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=1 * DAY_MS,
        description="Threshold-triggered GPU samples and measured link metrics.",
        event_types=TELEMETRY_EVENTS,
    ),
    TopicSpec(
        name=TASKS,
        key="task_id",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=7 * DAY_MS,
        description="Task submissions and cancellations: produced by users and other teams.",
        event_types=TASK_EVENTS,
    ),
    TopicSpec(
        name=TASK_STATUS,
        key="task_id",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=7 * DAY_MS,
        description="Task status and observed usage reported by node executors.",
        event_types=STATUS_EVENTS,
    ),
    TopicSpec(
        name=INPUT_LOG,
        key="cell",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=FOREVER,
        description="Per-cell ordered log of every scheduler input; the audit replay source.",
        event_types=INPUT_EVENTS,
    ),
    TopicSpec(
        name=DECISIONS,
        key="cell",
        partitions=8,
        cleanup_policy="delete",
        retention_ms=FOREVER,
        description="Scheduler decisions, co-partitioned with the input log by cell.",
        event_types=DECISION_EVENTS,
    ),
    TopicSpec(
        name=DEADLETTER,
        key="source_topic",
        partitions=1,
        cleanup_policy="delete",
        retention_ms=30 * DAY_MS,
        description="Refused messages: reason, position and original bytes (DeadLetter).",
        fixed_partitions=True,
    ),
)

BY_NAME: dict[str, TopicSpec] = {spec.name: spec for spec in CATALOG}


def for_deployment(specs: Iterable[TopicSpec], partitions: int | None) -> list[TopicSpec]:
    """``specs`` as a deployment with ``partitions`` partitions creates them.

    The count replaces the catalog's (8) on every topic that does not fix its own
    (the dead-letter topic keeps 1); None keeps every spec's. Cleanup policy,
    retention and other configs are the specs' own, always.
    """
    if partitions is None:
        return list(specs)
    if partitions < 1:
        raise ValueError(f"a topic needs at least one partition; got {partitions}")
    return [s if s.fixed_partitions or s.partitions == partitions
            else dataclasses.replace(s, partitions=partitions) for s in specs]


def catalog_spec(topic: str | None) -> TopicSpec | None:
    """The catalog entry of ``topic``, also under a deployment's topic prefix
    (``demo-1.hetsched.tasks`` is ``hetsched.tasks``); None for other topics."""
    if not topic:
        return None
    spec = BY_NAME.get(topic)
    if spec is not None:
        return spec
    return next((s for s in CATALOG if topic.endswith(s.name)), None)


def topics_for(event_type: str) -> list[TopicSpec]:
    """The topics an event type may be produced to."""
    return [s for s in CATALOG if event_type in s.event_types]


def key_for(spec: TopicSpec, envelope: Any) -> bytes:
    """The record key (UTF-8) for ``envelope`` on ``spec``'s topic.

    Raises ``ValueError`` when the key is missing (e.g. an input-log event
    without a cell), because an unkeyed record would break per-key order.
    """
    if spec.key == "cell":
        value = envelope.cell
    elif spec.key == "source_topic":
        value = envelope.source_topic
    else:
        value = getattr(envelope.payload, spec.key, None)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{spec.name} needs a {spec.key!r} key; got {value!r}")
    return value.encode()


def wrong_key(spec: TopicSpec, key: bytes | None, envelope: Any) -> str | None:
    """Why ``key`` is not the record key ``envelope`` needs on ``spec``'s topic; None
    when it is (or when the event names no such field, which :func:`key_for` refuses).

    The key is what the partitioner hashes: a submission keyed by anything but its
    task id can land in another partition than its cancellation and be overtaken by
    it, so the router dead-letters such a record instead of guessing the order.
    """
    try:
        want = key_for(spec, envelope)
    except ValueError:
        return None
    if key == want:
        return None
    got = "no key (null)" if key is None else repr(bytes(key).decode("utf-8", "replace"))
    return (f"wrong_key: the record's key is {got}; a record on {spec.name} is keyed by "
            f"its {spec.key}, {want.decode()!r} (docs/api.md, Keys and partitioner)")
