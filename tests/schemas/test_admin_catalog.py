"""The catalog's partitions, cleanup policy and retention hold for every topic created,
and a topic that already exists with other settings is reported once (issue 34, defect 1).

No broker: ``schemas.admin``'s admin client is replaced by :class:`FakeAdmin`, which
answers with aiokafka's own response types where the code reads them. The same path
against the real broker: ``tests/schemas/test_worker_topics.py``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

import pytest
from aiokafka.protocol.admin import DescribeConfigsResponse_v1

import schemas.admin as admin_module
from schemas.admin import Drift, ensure_topics, topic_drift
from schemas.topics import BY_NAME, CATALOG, DEADLETTER, DECISIONS, TASKS, for_deployment

TOPIC_AUTHORIZATION_FAILED = 29


class FakeAdmin:
    """The parts of ``AIOKafkaAdminClient`` that ``ensure_topics`` uses."""

    existing: ClassVar[dict[str, tuple[int, dict[str, str]]]] = {}
    """topic -> (partitions, configs) on the 'broker'."""
    created: ClassVar[list[Any]] = []
    describe_configs_error = 0

    def __init__(self, **kwargs: Any) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def list_topics(self) -> list[str]:
        return list(self.existing)

    async def create_topics(self, new_topics: list[Any]) -> Any:
        for topic in new_topics:
            FakeAdmin.created.append(topic)
            self.existing[topic.name] = (topic.num_partitions, dict(topic.topic_configs))
        return type("Response", (), {"topic_errors": [(t.name, 0, None) for t in new_topics]})

    async def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
        return [{"error_code": 0, "topic": name, "is_internal": False,
                 "partitions": [{"error_code": 0, "partition": p, "leader": 0,
                                 "replicas": [0], "isr": [0]}
                                for p in range(self.existing[name][0])]}
                for name in topics]

    async def describe_configs(self, config_resources: list[Any]) -> list[Any]:
        resources = []
        for resource in config_resources:
            configs = self.existing[resource.name][1]
            entries = [(k, v, False, 5, False, []) for k, v in configs.items()
                       if not resource.configs or k in resource.configs]
            resources.append((self.describe_configs_error, None, 2, resource.name, entries))
        return [DescribeConfigsResponse_v1(throttle_time_ms=0, resources=resources)]


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    monkeypatch.setattr(admin_module, "AIOKafkaAdminClient", FakeAdmin)
    monkeypatch.setattr(admin_module, "_warned", set())
    FakeAdmin.existing, FakeAdmin.created, FakeAdmin.describe_configs_error = {}, [], 0
    return FakeAdmin


def test_a_deployment_partition_count_never_changes_the_dead_letter_topics_one() -> None:
    """HETSCHED_PARTITIONS sizes the cell-keyed and entity-keyed topics; the dead-letter
    topic keeps the single partition docs/api.md and the AsyncAPI document promise."""
    for count in (2, 8, 12):
        specs = {s.name: s for s in for_deployment(CATALOG, count)}
        assert specs[DEADLETTER].partitions == 1
        assert {s.partitions for n, s in specs.items() if n != DEADLETTER} == {count}
    assert for_deployment(CATALOG, None) == list(CATALOG)
    assert [s.name for s in for_deployment(CATALOG, 3)] == [s.name for s in CATALOG]


async def test_every_created_topic_has_the_catalogs_partitions_cleanup_and_retention(
    fake_admin: type[FakeAdmin],
) -> None:
    """What the worker does (a deployment count of 8): before the fix, the dead-letter
    topic was created with 8 partitions."""
    created = await ensure_topics("broker:9092", CATALOG, partitions=8)
    assert sorted(created) == sorted(s.name for s in CATALOG)
    by_name = {t.name: t for t in fake_admin.created}
    assert by_name[DEADLETTER].num_partitions == 1
    for spec in CATALOG:
        topic = by_name[spec.name]
        assert topic.topic_configs["cleanup.policy"] == spec.cleanup_policy
        assert topic.topic_configs["retention.ms"] == str(spec.retention_ms)
        if spec.name != DEADLETTER:
            assert topic.num_partitions == 8


async def test_an_existing_topic_that_differs_from_the_catalog_is_reported_once(
    fake_admin: type[FakeAdmin], caplog: pytest.LogCaptureFixture,
) -> None:
    fake_admin.existing = {
        DEADLETTER: (8, {"cleanup.policy": "delete", "retention.ms": "604800000"}),
        TASKS: (8, {"cleanup.policy": "compact", "retention.ms": str(7 * 86_400_000)}),
        DECISIONS: (8, {"cleanup.policy": "delete", "retention.ms": "-1"}),  # as the catalog
    }
    with caplog.at_level(logging.WARNING, logger="schemas.admin"):
        for _ in range(3):  # a node retrying its start calls ensure_topics again
            await ensure_topics("broker:9092", CATALOG, partitions=8)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert any(w.startswith(f"topic {DEADLETTER}: partitions is 8 on the broker; "
                            "the catalog says 1") for w in warnings)
    assert any(w.startswith(f"topic {DEADLETTER}: retention.ms is 604800000 on the broker; "
                            "the catalog says 2592000000") for w in warnings)
    assert any(w.startswith(f"topic {TASKS}: cleanup.policy is compact on the broker; "
                            "the catalog says delete") for w in warnings)
    assert not any(DECISIONS in w for w in warnings)
    assert {t.name for t in fake_admin.created} == {s.name for s in CATALOG} - set(
        [DEADLETTER, TASKS, DECISIONS])


async def test_a_topic_whose_configs_cannot_be_read_is_not_reported_as_different(
    fake_admin: type[FakeAdmin], caplog: pytest.LogCaptureFixture,
) -> None:
    """A principal without DescribeConfigs (a node) still starts; no false alarm."""
    fake_admin.existing = {s.name: (s.partitions, {}) for s in CATALOG}
    fake_admin.describe_configs_error = TOPIC_AUTHORIZATION_FAILED
    with caplog.at_level(logging.INFO, logger="schemas.admin"):
        assert await ensure_topics("broker:9092", CATALOG) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("could not read the configs" in r.getMessage() for r in caplog.records)


def test_drift_compares_partitions_and_every_config_the_catalog_sets() -> None:
    spec = BY_NAME[DEADLETTER]
    same = {"cleanup.policy": "delete", "retention.ms": str(spec.retention_ms)}
    assert topic_drift(spec, 1, same) == []
    assert topic_drift(spec, 3, {**same, "cleanup.policy": "compact"}) == [
        Drift(DEADLETTER, "partitions", "3", "1"),
        Drift(DEADLETTER, "cleanup.policy", "compact", "delete"),
    ]
    assert topic_drift(spec, None, {}) == []  # nothing read: nothing claimed
    extra = dataclasses.replace(spec, extra_config={"min.insync.replicas": "2"})
    assert topic_drift(extra, 1, {**same, "min.insync.replicas": "1"}) == [
        Drift(DEADLETTER, "min.insync.replicas", "1", "2")]


def test_a_drift_message_names_the_topic_the_setting_what_was_found_and_the_catalog() -> None:
    text = str(Drift("hetsched.deadletter", "partitions", "8", "1"))
    assert text == ("topic hetsched.deadletter: partitions is 8 on the broker; the catalog "
                    "says 1 (hetsched never alters an existing topic: see docs/api.md, "
                    "Topics)")


async def test_a_broker_that_will_not_describe_its_topics_does_not_stop_a_start(
    fake_admin: type[FakeAdmin], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aiokafka.errors import KafkaConnectionError

    async def refuse(self: FakeAdmin, topics: list[str]) -> list[dict[str, Any]]:
        raise KafkaConnectionError("describe refused")

    monkeypatch.setattr(FakeAdmin, "describe_topics", refuse)
    fake_admin.existing = {DEADLETTER: (8, {})}
    created = await ensure_topics("broker:9092", CATALOG, partitions=8)
    assert sorted(created) == sorted(s.name for s in CATALOG if s.name != DEADLETTER)
