"""Deleting a bench run's topics by prefix (schemas.admin.delete_topics_with_prefix)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from schemas.admin import delete_topics_with_prefix, ensure_topics
from schemas.topics import CATALOG


async def _topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


@pytest.mark.integration
async def test_only_the_prefixed_topics_are_deleted(kafka_bootstrap: str) -> None:
    doomed, kept = f"d{uuid.uuid4().hex[:6]}.", f"k{uuid.uuid4().hex[:6]}."
    specs = [dataclasses.replace(s, name=prefix + s.name)
             for prefix in (doomed, kept) for s in CATALOG[:2]]
    await ensure_topics(kafka_bootstrap, specs, partitions=1)
    deleted = await delete_topics_with_prefix(kafka_bootstrap, doomed)
    assert deleted == sorted(doomed + s.name for s in CATALOG[:2])
    for _ in range(50):  # deletion is asynchronous on the broker
        left = await _topics(kafka_bootstrap)
        if not any(t.startswith(doomed) for t in left):
            break
        await asyncio.sleep(0.2)
    assert not any(t.startswith(doomed) for t in left)
    assert {kept + s.name for s in CATALOG[:2]} <= left
    await delete_topics_with_prefix(kafka_bootstrap, kept)


async def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="empty prefix"):
        await delete_topics_with_prefix("127.0.0.1:1", "")
