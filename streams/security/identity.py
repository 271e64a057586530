"""Who an input really comes from: tenant and node identity bound to principals.

The tenant of a submission and the node id of a node event are claims in the
message body; anybody allowed to write the topic could claim anything. The
scheduler's router therefore:

1. checks the record's origin signature (:func:`schemas.signing.verify_origin`),
   which proves the authenticated principal that produced it;
2. binds the claim to that principal with this configuration:
   ``tenants`` (submitter principal -> its one tenant) and ``nodes`` (node
   principal -> the node ids it speaks for).

A mismatch is a :class:`~schemas.signing.Refusal` that the router writes to
the dead-letter topic (``Refusal.dead_letter``); nothing of it reaches the
core, so quotas and fair share only ever see the bound tenant.

One call for the router, per input record::

    result = authorize_input(record.topic, record.key, record.value, record.headers,
                             envelope, identity)   # Envelope | Refusal

The configuration is a YAML file (``HETSCHED_SECURITY_CONFIG``), see
docs/security.md::

    roles: {scheduler: [User:scheduler], node: [User:node-a], ...}
    tenants: {alice: vision}
    nodes: {node-a: [node-a]}
    signing_keys: {alice: keys/alice.key, node-a: keys/node-a.key}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from schemas.events import Envelope, Event
from schemas.signing import Headers, Refusal, read_key_file, verify_origin
from schemas.topics import NODE_INVENTORY, NODES, TASK_STATUS, TASKS, TELEMETRY

NODE_TOPICS = (NODES, NODE_INVENTORY, TELEMETRY, TASK_STATUS)


def principal_name(principal: str) -> str:
    """``User:alice`` and ``alice`` both name the SASL user ``alice``."""
    return principal.removeprefix("User:")


@dataclass(frozen=True)
class Identity:
    """The scheduler's identity configuration (immutable; secrets not shown)."""

    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tenants: Mapping[str, str] = field(default_factory=dict)
    nodes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    keyring: Mapping[str, bytes] = field(default_factory=dict, repr=False)


def _mapping(data: Any, name: str, path: Path) -> dict[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, dict):
        raise ValueError(f"{path}: {name} must be a mapping")
    return value


def load_identity(path: str | Path) -> Identity:
    """Read the YAML file; key file paths are relative to its folder."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top")
    roles = {
        str(role): tuple(str(p) for p in principals or ())
        for role, principals in _mapping(data, "roles", path).items()
    }
    tenants = {principal_name(str(p)): str(t) for p, t in _mapping(data, "tenants", path).items()}
    nodes = {
        principal_name(str(p)): frozenset(str(n) for n in ([ids] if isinstance(ids, str) else ids))
        for p, ids in _mapping(data, "nodes", path).items()
    }
    keyring = {
        principal_name(str(p)): read_key_file(path.parent / str(key_path))
        for p, key_path in _mapping(data, "signing_keys", path).items()
    }
    return Identity(roles=roles, tenants=tenants, nodes=nodes, keyring=keyring)


def identity_from_env() -> Identity | None:
    """The configuration named by ``HETSCHED_SECURITY_CONFIG``, or None (unsecured)."""
    path = os.environ.get("HETSCHED_SECURITY_CONFIG", "").strip()
    return load_identity(path) if path else None


def bind_tenant(
    envelope: Envelope[Event],
    principal: str,
    tenants: Mapping[str, str],
    *,
    task_tenant: Callable[[str], str | None] | None = None,
) -> Envelope[Event] | Refusal:
    """The submission with its tenant bound to ``principal``, or why it is refused.

    A ``TaskSubmitted`` must name exactly the principal's tenant. A
    ``TaskCancelled`` is accepted only for a task of that tenant, when
    ``task_tenant`` (task id -> owning tenant, from the scheduler's state) is given.
    """
    name = principal_name(principal)
    tenant = tenants.get(name)
    if tenant is None:
        return Refusal(
            "unknown_principal", f"principal {name!r} is not mapped to a tenant", "headers", name
        )
    payload = envelope.payload
    claimed = getattr(payload, "tenant", None)
    if envelope.type == "TaskSubmitted" and claimed != tenant:
        return Refusal(
            "tenant_forged",
            f"principal {name!r} submits for tenant {tenant!r}, message claims {claimed!r}",
            "payload.tenant",
            str(claimed),
        )
    if envelope.type == "TaskCancelled" and task_tenant is not None:
        task_id = str(getattr(payload, "task_id", ""))
        owner = task_tenant(task_id)
        if owner is not None and owner != tenant:
            return Refusal(
                "tenant_forged",
                f"principal {name!r} (tenant {tenant!r}) may not cancel {task_id!r} "
                f"of tenant {owner!r}",
                "payload.task_id",
                task_id,
            )
    return envelope


def bind_node(
    envelope: Envelope[Event], principal: str, nodes: Mapping[str, Iterable[str]]
) -> Envelope[Event] | Refusal:
    """The node event if ``principal`` speaks for its ``node_id``, else why not.

    This binds a report to its sender only. Whether the task a finish or failure names
    is placed on that node is the cell's to answer (``Cell.refuse_report``: only the
    cell knows the placement, and its answer is a replayed decision).
    """
    name = principal_name(principal)
    allowed = nodes.get(name)
    if allowed is None:
        return Refusal(
            "unknown_principal", f"principal {name!r} is not mapped to node ids", "headers", name
        )
    node_id = getattr(envelope.payload, "node_id", None)
    if node_id is None or node_id not in set(allowed):
        return Refusal(
            "node_forged",
            f"principal {name!r} may not report for node {node_id!r}",
            "payload.node_id",
            None if node_id is None else str(node_id),
        )
    return envelope


def authorize_input(
    topic: str,
    record_key: bytes | None,
    value: bytes,
    headers: Headers | None,
    envelope: Envelope[Event],
    identity: Identity,
    *,
    task_tenant: Callable[[str], str | None] | None = None,
) -> Envelope[Event] | Refusal:
    """Verify a decoded input record's origin and bind its tenant or node id."""
    if topic != TASKS and topic not in NODE_TOPICS:
        return envelope
    origin = verify_origin(topic, record_key, value, headers, identity.keyring)
    if isinstance(origin, Refusal):
        return origin
    if topic == TASKS:
        return bind_tenant(envelope, origin, identity.tenants, task_tenant=task_tenant)
    return bind_node(envelope, origin, identity.nodes)
