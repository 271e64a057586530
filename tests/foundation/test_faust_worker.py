"""A real Faust worker process: agent -> table -> output topic, and the changelog."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

APP = Path(__file__).with_name("faust_counter_app.py")


async def _read_all(bootstrap: str, topic: str, expected: int, timeout_s: float) -> list:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
        enable_auto_commit=False, group_id=None,
    )
    await consumer.start()
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < expected and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


async def test_faust_worker_counts_into_table_and_output(
    kafka_bootstrap, project_env, processes, tmp_path,
):
    suffix = uuid.uuid4().hex[:10]
    app_id = f"test-counter-{suffix}"
    topic_in, topic_out = f"test.words.{suffix}", f"test.counts.{suffix}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 1, 1) for t in (topic_in, topic_out)])
    finally:
        await admin.close()

    env = dict(project_env, APP_ID=app_id, COUNTER_IN=topic_in, COUNTER_OUT=topic_out,
               DATA_DIR=str(tmp_path / "faust"))
    argv = [sys.executable, str(APP), "worker", "-l", "info"]
    worker = processes.start("faust-worker", argv, env)

    words = ["gpu", "node", "gpu", "task", "gpu", "node"]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for word in words:
            await producer.send_and_wait(topic_in, key=word.encode(), value=word.encode())
    finally:
        await producer.stop()

    out = await _read_all(kafka_bootstrap, topic_out, len(words), timeout_s=90)
    assert worker.poll() is None, processes.log_of(worker)
    assert [r.value.decode() for r in out] == [
        "gpu:1", "node:1", "gpu:2", "task:1", "gpu:3", "node:2",
    ], processes.log_of(worker)

    changelog = f"{app_id}-word_to_count-changelog"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        assert changelog in await admin.list_topics()
    finally:
        await admin.close()
    updates = await _read_all(kafka_bootstrap, changelog, len(words), timeout_s=30)
    latest = {json.loads(r.key): json.loads(r.value) for r in updates}
    assert latest == {"gpu": 3, "node": 2, "task": 1}
    assert len(updates) == len(words)
