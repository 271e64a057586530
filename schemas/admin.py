"""Create the catalog's topics at start-up, idempotently.

Every process that needs the topics may call :func:`ensure_topics`; existing
topics are left as they are (partition counts are never changed behind an
operator's back), missing ones are created with the catalog's settings.

Run ``python -m schemas.admin [--replication-factor N]`` to create them from a
shell (the bootstrap servers come from ``KAFKA_BOOTSTRAP`` or the local broker,
see :mod:`schemas.kafka`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from schemas.kafka import aiokafka_kwargs, bootstrap_servers
from schemas.topics import CATALOG, TopicSpec

log = logging.getLogger(__name__)

LOCAL_REPLICATION_FACTOR = 1
"""Safe on the single local broker; pass 3 (or more) on a production cluster."""


async def ensure_topics(
    bootstrap: str,
    catalog: Iterable[TopicSpec] = CATALOG,
    *,
    replication_factor: int = LOCAL_REPLICATION_FACTOR,
    partitions: int | None = None,
    client_kwargs: Mapping[str, Any] | None = None,
) -> list[str]:
    """Create the missing topics of ``catalog``; return the names created.

    ``partitions`` overrides every spec's count (handy for tests).
    ``client_kwargs`` are the security arguments (default: from the
    environment, :func:`schemas.kafka.aiokafka_kwargs`).
    """
    specs = list(catalog)
    security = aiokafka_kwargs() if client_kwargs is None else dict(client_kwargs)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created: list[str] = []
        for spec in missing:
            topic = NewTopic(
                name=spec.name,
                num_partitions=partitions or spec.partitions,
                replication_factor=replication_factor,
                topic_configs=spec.config(),
            )
            try:
                response = await admin.create_topics([topic])
            except TopicAlreadyExistsError:
                continue  # another process won the race: fine
            if _created(response, spec.name):
                created.append(spec.name)
        log.info("topics ensured: %d created of %d", len(created), len(specs))
        return created
    finally:
        await admin.close()


async def delete_topics_with_prefix(
    bootstrap: str, prefix: str, *, client_kwargs: Mapping[str, Any] | None = None,
) -> list[str]:
    """Delete every topic whose name starts with ``prefix``; return the names deleted.

    For the isolated deployments of benches (a topic prefix per run): a broker that
    keeps every run's topics runs out of file handles after a few hundred runs (each
    partition holds its segment and index files open). An empty prefix is refused.
    """
    if not prefix:
        raise ValueError("delete_topics_with_prefix: an empty prefix would delete every topic")
    security = aiokafka_kwargs() if client_kwargs is None else dict(client_kwargs)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        doomed = sorted(t for t in await admin.list_topics() if t.startswith(prefix))
        if doomed:
            await admin.delete_topics(doomed)
        return doomed
    finally:
        await admin.close()


def _created(response: object, name: str) -> bool:
    """True if the CreateTopics response reports success for ``name``.

    Error code 36 (TOPIC_ALREADY_EXISTS) means a concurrent creator won, which
    is fine; any other error is raised.
    """
    for topic, code, *rest in getattr(response, "topic_errors", []):
        if topic != name or code == 0:
            continue
        if code == TopicAlreadyExistsError.errno:
            return False
        message = rest[0] if rest else ""
        raise RuntimeError(f"creating {name} failed: error {code} {message}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Create the catalog's missing topics; print the ones created."""
    parser = argparse.ArgumentParser(prog="python -m schemas.admin", description=__doc__)
    parser.add_argument("--bootstrap", default=None, help="host:port list (default: env)")
    parser.add_argument("--replication-factor", type=int, default=LOCAL_REPLICATION_FACTOR)
    args = parser.parse_args(argv)
    created = asyncio.run(
        ensure_topics(
            args.bootstrap or bootstrap_servers(), replication_factor=args.replication_factor
        )
    )
    for name in created:
        print(f"created {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
