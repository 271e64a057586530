"""Create ACL bindings on a cluster through the Kafka admin API (CreateAcls v1).

aiokafka 0.14's admin client has no ``create_acls`` method, but its protocol
module defines the CreateAcls request; this sends every binding in one
request to a broker (brokers forward ACL changes to the KRaft controller) and
raises on the first binding the broker refused, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest, CreateAclsRequest_v1

from schemas.kafka import aiokafka_kwargs
from streams.security.acls import ALLOW, AclBinding


class _CreateAcls(CreateAclsRequest):
    """CreateAcls with many creations (the library's builder sends one)."""

    def __init__(self, rows: Sequence[AclBinding]) -> None:
        self._rows = list(rows)

    def build(self, request_struct_class: type[Any]) -> Any:
        if request_struct_class.API_VERSION < 1:
            raise RuntimeError("the broker does not support prefixed ACLs (CreateAcls v1)")
        return CreateAclsRequest_v1(
            [
                (
                    int(r.resource), r.name, int(r.pattern), r.principal, r.host,
                    int(r.operation), ALLOW,
                )
                for r in self._rows
            ]
        )


class AclApplyError(RuntimeError):
    """The broker refused an ACL binding."""


async def apply_acls(
    bootstrap: str,
    rows: Sequence[AclBinding],
    *,
    client_kwargs: Mapping[str, Any] | None = None,
) -> int:
    """Create ``rows`` (idempotent); return how many were sent."""
    security = aiokafka_kwargs() if client_kwargs is None else dict(client_kwargs)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        response = await admin._send_request(_CreateAcls(rows))
    finally:
        await admin.close()
    for row, (code, message) in zip(rows, response.creation_responses, strict=True):
        if code:
            error = for_code(code)
            raise AclApplyError(
                f"creating {row.operation.name} on {row.resource.name} {row.name} for "
                f"{row.principal} failed: {error.__name__} {message or ''}".strip()
            )
    return len(rows)
