"""A submission forging another tenant, end to end on the secured broker.

Alice (tenant ``vision``) submits one task for herself, one claiming bob's
tenant ``nlp`` (signed with her own key) and one unsigned. The scheduler reads
``hetsched.tasks`` as its own principal, authorizes each record with the
router's call and dead-letters the refused ones; only the bound tenants reach
the quota tally, so bob's quota holds exactly bob's task.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from security_events import submission

from schemas import encode
from schemas.codec import decode_deadletter
from schemas.consume import PRODUCER_DEFAULTS, consume_events, produce_event, send_deadletter
from schemas.signing import Refusal
from schemas.topics import BY_NAME, DEADLETTER, TASKS, key_for
from streams.security.identity import authorize_input, load_identity

pytestmark = pytest.mark.integration


async def _producer(cluster, user: str) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap, **PRODUCER_DEFAULTS, **cluster.kwargs_for(user)
    )
    await producer.start()
    return producer


async def test_a_forged_tenant_is_dead_lettered_and_the_real_tenants_quota_is_untouched(
    secure_cluster,
) -> None:
    cluster = secure_cluster
    run = uuid.uuid4().hex[:8]
    own = submission(f"own-{run}", "vision", 500)
    forged = submission(f"forged-{run}", "nlp", 1000)
    unsigned = submission(f"unsigned-{run}", "nlp", 1000)
    bobs = submission(f"bob-{run}", "nlp", 250)

    alice = await _producer(cluster, "alice")
    bob = await _producer(cluster, "bob")
    try:
        await produce_event(alice, BY_NAME[TASKS], own, signer=cluster.signer("alice"))
        await produce_event(alice, BY_NAME[TASKS], forged, signer=cluster.signer("alice"))
        await alice.send_and_wait(TASKS, encode(unsigned), key=key_for(BY_NAME[TASKS], unsigned))
        await produce_event(bob, BY_NAME[TASKS], bobs, signer=cluster.signer("bob"))
    finally:
        await alice.stop()
        await bob.stop()

    identity = load_identity(cluster.security_config)
    ours = {e.event_id for e in (own, forged, unsigned, bobs)}
    accepted: dict[str, str] = {}
    refused: dict[str, str] = {}
    quota_milli: dict[str, int] = {}
    scheduler = await _producer(cluster, "scheduler")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, **cluster.kwargs_for("scheduler")
    )
    await consumer.start()
    try:
        tps = [TopicPartition(TASKS, p) for p in range(cluster.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)

        async def route() -> None:
            async for received in consume_events(consumer, scheduler):
                event = received.event
                if event.event_id not in ours:
                    continue
                result = authorize_input(
                    received.topic, received.key, received.value, received.headers, event,
                    identity,
                )
                if isinstance(result, Refusal):
                    letter = result.dead_letter(
                        received.value, topic=received.topic, partition=received.partition,
                        offset=received.offset, key=received.key, event_type=event.type,
                        event_id=event.event_id,
                    )
                    await send_deadletter(scheduler, letter)
                    refused[event.payload.task_id] = result.code
                else:
                    payload = result.payload
                    accepted[payload.task_id] = payload.tenant
                    quota_milli[payload.tenant] = (
                        quota_milli.get(payload.tenant, 0) + payload.resources.gpu_share_milli
                    )
                if len(accepted) + len(refused) == len(ours):
                    return

        await asyncio.wait_for(route(), 30)
    finally:
        await consumer.stop()
        await scheduler.stop()

    assert accepted == {f"own-{run}": "vision", f"bob-{run}": "nlp"}
    assert refused == {f"forged-{run}": "tenant_forged", f"unsigned-{run}": "unsigned"}
    assert quota_milli == {"vision": 500, "nlp": 250}

    letters = await _read_dead_letters(cluster, {forged.event_id, unsigned.event_id})
    assert letters[forged.event_id].message.startswith("tenant_forged:")
    assert "'alice'" in letters[forged.event_id].message
    assert letters[forged.event_id].errors[0].field == "payload.tenant"
    assert letters[unsigned.event_id].message.startswith("unsigned:")
    cluster.outputs.extend(letter.model_dump_json() for letter in letters.values())


async def _read_dead_letters(cluster, wanted: set[str]):
    """The dead letters with these event ids, read as the dashboard role."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, **cluster.kwargs_for("grafana")
    )
    await consumer.start()
    found = {}
    try:
        tps = [TopicPartition(DEADLETTER, p) for p in range(cluster.partitions_of(DEADLETTER))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)

        async def read() -> None:
            async for record in consumer:
                try:
                    letter = decode_deadletter(record.value)
                except ValueError:  # the matrix test's probe bytes
                    continue
                if letter.event_id in wanted:
                    found[letter.event_id] = letter
                    if len(found) == len(wanted):
                        return

        await asyncio.wait_for(read(), 20)
    finally:
        await consumer.stop()
    return found
