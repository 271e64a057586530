"""Roles and their Kafka ACLs, as data: the one place that says who may do what.

Four roles, least privilege on the catalog's topics (:mod:`schemas.topics`):

* ``scheduler`` -- reads every input topic, is the only writer of the input
  log and the decisions; owns its Faust internals (changelog/repartition
  topics, consumer group, transactional ids) through PREFIXED patterns on its
  app id.
* ``node`` -- agents and executors: write node lifecycle, inventory, telemetry
  and task status; read decisions. Which node ids a node principal may speak
  for is checked on the records themselves (:mod:`streams.security.identity`),
  because an ACL cannot look inside a record.
* ``submitter`` -- writes task submissions and cancellations, nothing else.
* ``dashboard`` -- reads everything, writes nothing.

Everyone that produces may write dead letters of what it refuses to consume
except submitters and dashboards, which consume nothing they could refuse.

:func:`bindings` expands roles and principals into :class:`AclBinding` rows;
``hetsched acl print`` shows them and ``hetsched acl apply`` creates them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from schemas.topics import (
    CATALOG,
    DEADLETTER,
    DECISIONS,
    INPUT_LOG,
    NODE_INVENTORY,
    NODES,
    TASK_STATUS,
    TASKS,
    TELEMETRY,
)


class Resource(IntEnum):
    """Kafka resource types (wire values of the ACL APIs)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class Operation(IntEnum):
    """Kafka ACL operations (wire values)."""

    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    DESCRIBE_CONFIGS = 10
    IDEMPOTENT_WRITE = 12


class Pattern(IntEnum):
    """Kafka resource pattern types (wire values)."""

    LITERAL = 3
    PREFIXED = 4


ALLOW = 3
"""Kafka permission type ALLOW; the set has no DENY rows (default deny)."""
CLUSTER_NAME = "kafka-cluster"
ROLES = ("scheduler", "node", "submitter", "dashboard")
DEFAULT_SCHEDULER_APP_ID = "hetsched-scheduler"
NODE_GROUP_PREFIX = "hetsched-node"
DASHBOARD_GROUP_PREFIX = "hetsched-dashboard"


@dataclass(frozen=True, order=True)
class Grant:
    """One permission of a role, before it is given to a principal."""

    resource: Resource
    name: str
    pattern: Pattern
    operation: Operation


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ALLOW ACL for one principal, as the CreateAcls API takes it."""

    principal: str
    resource: Resource
    name: str
    pattern: Pattern
    operation: Operation
    host: str = "*"


def _topic(name: str, *ops: Operation, pattern: Pattern = Pattern.LITERAL) -> list[Grant]:
    return [Grant(Resource.TOPIC, name, pattern, op) for op in ops]


def _group(prefix: str, *ops: Operation) -> list[Grant]:
    return [Grant(Resource.GROUP, prefix, Pattern.PREFIXED, op) for op in ops]


R, W, D = Operation.READ, Operation.WRITE, Operation.DESCRIBE
INPUT_TOPICS = (NODES, NODE_INVENTORY, TELEMETRY, TASKS, TASK_STATUS)


def role_grants(role: str, *, app_id: str = DEFAULT_SCHEDULER_APP_ID) -> list[Grant]:
    """The permissions of ``role`` (``app_id``: the scheduler's Faust app id)."""
    grants: list[Grant] = []
    if role == "scheduler":
        for name in INPUT_TOPICS:
            grants += _topic(name, R, D)
        for name in (INPUT_LOG, DECISIONS):
            grants += _topic(name, R, W, D)
        grants += _topic(DEADLETTER, W, D)
        for spec in CATALOG:  # ensure_topics at worker start; never deletes or alters
            grants += _topic(spec.name, Operation.CREATE, Operation.DESCRIBE_CONFIGS)
        grants += _topic(app_id, Operation.ALL, pattern=Pattern.PREFIXED)
        grants += _group(app_id, R, D)
        grants += [
            Grant(Resource.TRANSACTIONAL_ID, app_id, Pattern.PREFIXED, op) for op in (W, D)
        ]
        grants.append(
            Grant(Resource.CLUSTER, CLUSTER_NAME, Pattern.LITERAL, Operation.IDEMPOTENT_WRITE)
        )
    elif role == "node":
        for name in (NODES, NODE_INVENTORY, TELEMETRY, TASK_STATUS, DEADLETTER):
            grants += _topic(name, W, D)
        grants += _topic(DECISIONS, R, D)
        grants += _group(NODE_GROUP_PREFIX, R, D)
    elif role == "submitter":
        grants += _topic(TASKS, W, D)
    elif role == "dashboard":
        for spec in CATALOG:
            grants += _topic(spec.name, R, D)
        grants += _group(DASHBOARD_GROUP_PREFIX, R, D)
    else:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    return sorted(set(grants))


def bindings(
    principals: Mapping[str, Iterable[str]], *, app_id: str = DEFAULT_SCHEDULER_APP_ID
) -> list[AclBinding]:
    """Every ACL for ``principals`` (role -> ``User:name`` list), sorted, no duplicates."""
    rows: set[AclBinding] = set()
    for role, names in principals.items():
        grants = role_grants(role, app_id=app_id)
        for principal in names:
            if not principal.startswith("User:"):
                raise ValueError(f"principal {principal!r} must look like User:<name>")
            rows.update(
                AclBinding(principal, g.resource, g.name, g.pattern, g.operation) for g in grants
            )
    return sorted(rows)


def may(
    rows: Iterable[AclBinding], principal: str, resource: Resource, name: str, op: Operation
) -> bool:
    """Would these ALLOW rows permit ``op`` (the authorizer's matching, for tests/docs)."""
    implied = {
        Operation.READ: {Operation.DESCRIBE},
        Operation.WRITE: {Operation.DESCRIBE},
    }
    for row in rows:
        if row.principal != principal or row.resource != resource:
            continue
        matches = row.name == name if row.pattern == Pattern.LITERAL else name.startswith(row.name)
        if not matches:
            continue
        if row.operation in (op, Operation.ALL) or op in implied.get(row.operation, set()):
            return True
    return False


def role_table(*, app_id: str = DEFAULT_SCHEDULER_APP_ID) -> list[tuple[str, str, str, str]]:
    """(role, resource, pattern:name, operations) rows for printing and the docs."""
    rows: list[tuple[str, str, str, str]] = []
    for role in ROLES:
        merged: dict[tuple[Resource, Pattern, str], list[str]] = {}
        for g in role_grants(role, app_id=app_id):
            merged.setdefault((g.resource, g.pattern, g.name), []).append(g.operation.name)
        for (resource, pattern, name), ops in merged.items():
            shown = name if pattern == Pattern.LITERAL else f"{name}* (prefixed)"
            rows.append((role, resource.name, shown, ", ".join(ops)))
    return rows
