"""Against the real broker: the topics ``hetsched worker`` creates have the catalog's
partitions, cleanup policy and retention, read back with Kafka's admin API, and an
existing topic that differs is reported once (issue 34, defect 1).

The worker's own code path (:func:`streams.commands.worker.ensure_worker_topics`) with a
uuid-prefixed deployment of 3 partitions; its topics are deleted after. The same logic
without a broker: ``tests/schemas/test_admin_catalog.py``.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from schemas.admin import delete_topics_with_prefix
from schemas.topics import BY_NAME, CATALOG, DEADLETTER, TASKS
from streams.commands.worker import ensure_worker_topics, worker_topics
from streams.settings import WorkerSettings

pytestmark = pytest.mark.integration

PARTITIONS = 3


def _settings(bootstrap: str, run: str) -> WorkerSettings:
    return WorkerSettings(
        bootstrap=bootstrap, app_id=f"it-{run}-app", web_port=0, web_host="127.0.0.1",
        data_dir=Path("."), cells=1, partitions=PARTITIONS, replication=1, tick_s=1.0,
        profile="hetsched", topic_prefix=f"it-{run}.")


async def _read_back(bootstrap: str, names: list[str]) -> dict[str, tuple[int, dict[str, str]]]:
    """topic -> (partition count, cleanup.policy and retention.ms), as the broker says."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        counts = {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(names)}
        wanted = {"cleanup.policy": None, "retention.ms": None}
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n, dict(wanted)) for n in names])
        configs: dict[str, dict[str, Any]] = {}
        for response in responses:
            for resource in response.to_object()["resources"]:
                assert resource["error_code"] == 0, resource
                configs[resource["resource_name"]] = {
                    e["config_names"]: e["config_value"] for e in resource["config_entries"]}
        return {n: (counts[n], configs[n]) for n in names}
    finally:
        await admin.close()


async def test_the_worker_creates_every_topic_as_the_catalog_says(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture,
) -> None:
    run = uuid.uuid4().hex[:8]
    settings = _settings(kafka_bootstrap, run)
    tasks = settings.topic(TASKS)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:  # an operator's earlier, different tasks topic: left as it is, and reported
        await admin.create_topics([NewTopic(tasks, 2, 1, topic_configs={
            "cleanup.policy": "compact", "retention.ms": str(BY_NAME[TASKS].retention_ms)})])
    finally:
        await admin.close()
    try:
        with caplog.at_level(logging.WARNING, logger="schemas.admin"):
            created = await ensure_worker_topics(settings)
            assert await ensure_worker_topics(settings) == []  # idempotent, said once
        specs = worker_topics(settings)
        assert sorted(created) == sorted(s.name for s in specs if s.name != tasks)

        found = await _read_back(kafka_bootstrap, [s.name for s in specs])
        for spec in CATALOG:  # the catalog's settings, HETSCHED_PARTITIONS but for 1 topic
            partitions, configs = found[settings.topic(spec.name)]
            if spec.name != TASKS:
                assert partitions == (1 if spec.name == DEADLETTER else PARTITIONS), spec.name
                assert configs == {"cleanup.policy": spec.cleanup_policy,
                                   "retention.ms": str(spec.retention_ms)}, spec.name
        for spec in specs[len(CATALOG):]:  # the app's internal topics
            assert found[spec.name] == (PARTITIONS, {"cleanup.policy": "compact",
                                                     "retention.ms": "-1"}), spec.name
        assert found[tasks] == (2, {"cleanup.policy": "compact",
                                    "retention.ms": str(BY_NAME[TASKS].retention_ms)})
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert sorted(w.split(" (")[0] for w in warnings) == [
            f"topic {tasks}: cleanup.policy is compact on the broker; the catalog says delete",
            f"topic {tasks}: partitions is 2 on the broker; the catalog says {PARTITIONS}",
        ]
    finally:
        await delete_topics_with_prefix(kafka_bootstrap, settings.topic_prefix)
        await delete_topics_with_prefix(kafka_bootstrap, settings.app_id)
