"""Create the catalog's topics at start-up, idempotently.

Every process that needs the topics may call :func:`ensure_topics`; missing
ones are created with the catalog's settings (partition count, cleanup policy,
retention; a deployment's partition count applies only where the catalog does
not fix one, :func:`schemas.topics.for_deployment`). Existing topics are left
as they are (partition counts are never changed behind an operator's back), but
one that differs from the catalog is logged, once per process and setting, as a
warning naming the topic, the setting, what the broker has and what the catalog
says (:class:`Drift`).

Run ``python -m schemas.admin [--replication-factor N]`` to create them from a
shell (the bootstrap servers come from ``KAFKA_BOOTSTRAP`` or the local broker,
see :mod:`schemas.kafka`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from schemas.kafka import aiokafka_kwargs, bootstrap_servers
from schemas.topics import CATALOG, TopicSpec, for_deployment

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

    ``partitions``: the deployment's partition count (``HETSCHED_PARTITIONS``), for
    every spec that does not fix its own (:func:`schemas.topics.for_deployment`);
    None keeps each spec's. ``client_kwargs`` are the security arguments (default:
    from the environment, :func:`schemas.kafka.aiokafka_kwargs`). Topics that
    already exist are compared with their specs (:func:`report_drift`).
    """
    specs = for_deployment(catalog, partitions)
    security = aiokafka_kwargs() if client_kwargs is None else dict(client_kwargs)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        await report_drift(admin, [s for s in specs if s.name in existing])
        created: list[str] = []
        for spec in missing:
            topic = NewTopic(
                name=spec.name,
                num_partitions=spec.partitions,
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


@dataclass(frozen=True)
class Drift:
    """One setting of an existing topic that differs from its catalog spec."""

    topic: str
    setting: str
    """``partitions`` or a topic config name (``cleanup.policy``, ``retention.ms``...)."""
    found: str
    """What the broker has."""
    expected: str
    """What the catalog says."""

    def __str__(self) -> str:
        return (f"topic {self.topic}: {self.setting} is {self.found} on the broker; the "
                f"catalog says {self.expected} (hetsched never alters an existing topic: "
                "see docs/api.md, Topics)")


def topic_drift(spec: TopicSpec, partitions: int | None,
                configs: Mapping[str, str]) -> list[Drift]:
    """How an existing topic (``partitions`` and ``configs`` as the broker describes
    them) differs from ``spec``: its partition count and every config the spec sets.
    A setting the broker did not report (None, or absent) is not compared."""
    out: list[Drift] = []
    if partitions is not None and partitions != spec.partitions:
        out.append(Drift(spec.name, "partitions", str(partitions), str(spec.partitions)))
    for name, expected in spec.config().items():
        found = configs.get(name)
        if found is not None and found != expected:
            out.append(Drift(spec.name, name, found, expected))
    return out


_warned: set[Drift] = set()
"""Drifts already logged by this process: each is said once, not at every retry."""


async def report_drift(admin: Any, specs: list[TopicSpec]) -> list[Drift]:
    """Compare existing topics with their specs, read back with ``admin``
    (``describe_topics`` for partitions, ``describe_configs`` for configs); log each
    new :class:`Drift` as a warning and return every drift found.

    Best effort: a principal allowed to create but not to describe (or a broker that
    will not say) gets one info line and no comparison for what could not be read,
    never a failed start.
    """
    if not specs:
        return []
    try:
        partitions, configs, unread = await _read_settings(admin, specs)
    except Exception as exc:  # KafkaError, or an answer not shaped as expected
        log.info("could not read the settings of existing topics (%s: %s): not compared "
                 "with the catalog", type(exc).__name__, exc)
        return []
    if unread:
        log.info("could not read the configs of %s: not compared with the catalog",
                 ", ".join(sorted(unread)))
    found = [d for s in specs
             for d in topic_drift(s, partitions.get(s.name), configs.get(s.name, {}))]
    for drift in found:
        if drift not in _warned:
            _warned.add(drift)
            log.warning("%s", drift)
    return found


async def _read_settings(admin: Any, specs: list[TopicSpec]) -> tuple[
        dict[str, int], dict[str, dict[str, str]], list[str]]:
    """Partition counts and the specs' configs of existing topics, as the broker
    describes them, and the topics whose configs it refused to describe."""
    partitions: dict[str, int] = {}
    for topic in await admin.describe_topics([s.name for s in specs]):
        if topic.get("error_code", 0) == 0 and topic.get("partitions"):
            partitions[topic["topic"]] = len(topic["partitions"])
    responses = await admin.describe_configs([
        ConfigResource(ConfigResourceType.TOPIC, s.name, dict.fromkeys(s.config()))
        for s in specs])
    configs: dict[str, dict[str, str]] = {}
    unread: list[str] = []
    for response in responses:
        for resource in response.to_object()["resources"]:
            if resource["error_code"]:
                unread.append(resource["resource_name"])
                continue
            configs[resource["resource_name"]] = {
                e["config_names"]: e["config_value"] for e in resource["config_entries"]
                if e["config_value"] is not None}
    return partitions, configs, unread


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
