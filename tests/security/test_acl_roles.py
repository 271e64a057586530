"""Each role can do what it must and is refused what it must not, on a real broker.

The expected matrix below is written out by hand from the issue (not derived
from streams.security.acls), so the test checks the ACL module as well as the
broker's enforcement of it.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    TopicAuthorizationFailedError,
)

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

pytestmark = pytest.mark.integration

ALL_TOPICS = [spec.name for spec in CATALOG]
# role user -> (topics it may write, topics it may read)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "scheduler": (
        {INPUT_LOG, DECISIONS, DEADLETTER},
        {NODES, NODE_INVENTORY, TELEMETRY, TASKS, TASK_STATUS, INPUT_LOG, DECISIONS},
    ),
    "node-a": ({NODES, NODE_INVENTORY, TELEMETRY, TASK_STATUS, DEADLETTER}, {DECISIONS}),
    "alice": ({TASKS}, set()),
    "grafana": (set(), set(ALL_TOPICS)),
}
ROLE_IDS = {
    "scheduler": "the scheduler writes only the input log, decisions and dead letters",
    "node-a": "a node writes only node, telemetry and status topics and reads decisions",
    "alice": "a submitter writes task submissions and nothing else",
    "grafana": "a dashboard reads everything and writes nothing",
}


@pytest.fixture(scope="module")
def seeded(secure_cluster):
    """One record on partition 0 of every topic, so an allowed read returns data."""

    async def seed() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=secure_cluster.bootstrap, **secure_cluster.kwargs_for("admin")
        )
        await producer.start()
        try:
            for topic in ALL_TOPICS:
                await producer.send_and_wait(topic, b"probe", key=b"probe", partition=0)
        finally:
            await producer.stop()

    asyncio.run(seed())
    return secure_cluster


async def _try_produce(cluster, user: str, topic: str) -> str:
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, **cluster.kwargs_for(user))
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"attempt", key=b"attempt")
        return "ok"
    except TopicAuthorizationFailedError as exc:
        assert topic in str(exc), f"the error should name the topic: {exc}"
        return "denied"
    finally:
        await producer.stop()


async def _try_consume(cluster, user: str, topic: str) -> str:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None, **cluster.kwargs_for(user)
    )
    await consumer.start()
    try:
        if topic not in await consumer.topics():
            return "denied"  # no DESCRIBE: the broker does not even show the topic
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        records = await consumer.getmany(tp, timeout_ms=5000)
        assert records.get(tp), f"{user} may read {topic} but got no record"
        return "ok"
    except TopicAuthorizationFailedError as exc:
        assert topic in str(exc), f"the error should name the topic: {exc}"
        return "denied"
    finally:
        await consumer.stop()


@pytest.mark.parametrize("user", list(EXPECTED), ids=[ROLE_IDS[u] for u in EXPECTED])
async def test_role_produce_and_consume_per_topic(seeded, user: str) -> None:
    may_write, may_read = EXPECTED[user]
    got, want = {}, {}
    for topic in ALL_TOPICS:
        got[("write", topic)] = await _try_produce(seeded, user, topic)
        want[("write", topic)] = "ok" if topic in may_write else "denied"
        got[("read", topic)] = await _try_consume(seeded, user, topic)
        want[("read", topic)] = "ok" if topic in may_read else "denied"
    wrong = {k: (got[k], want[k]) for k in got if got[k] != want[k]}
    assert not wrong, f"{user}: (got, expected) per (operation, topic): {wrong}"


async def test_idempotent_producers_work_for_writers_and_fail_for_readers(seeded) -> None:
    """The project's producers are idempotent; a dashboard cannot even get a producer id."""
    for user, topic, allowed in (("alice", TASKS, True), ("grafana", TASKS, False)):
        producer = AIOKafkaProducer(
            bootstrap_servers=seeded.bootstrap, enable_idempotence=True, acks="all",
            **seeded.kwargs_for(user),
        )
        try:
            if allowed:
                await producer.start()
                await producer.send_and_wait(topic, b"idempotent", key=b"k")
            else:  # refused when asking for a producer id (start) or at the first send
                refused = (ClusterAuthorizationFailedError, TopicAuthorizationFailedError)
                with pytest.raises(refused):
                    await producer.start()
                    await producer.send_and_wait(topic, b"idempotent", key=b"k")
        finally:
            await producer.stop()


async def test_consumer_groups_are_limited_to_the_role_prefix(seeded) -> None:
    async def join(user: str, group: str, topic: str) -> str:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=seeded.bootstrap, group_id=group,
            auto_offset_reset="earliest", **seeded.kwargs_for(user),
        )
        try:
            await consumer.start()
            await consumer.getmany(timeout_ms=3000)
            return "ok"
        except GroupAuthorizationFailedError:
            return "denied"
        finally:
            await consumer.stop()

    assert await join("grafana", "hetsched-dashboard-ops", DECISIONS) == "ok"
    assert await join("grafana", "hetsched-scheduler", DECISIONS) == "denied"
    assert await join("scheduler", "hetsched-scheduler", TASKS) == "ok"


async def test_plain_mechanism_over_tls_is_accepted_with_the_same_acls(seeded) -> None:
    cluster = seeded
    producer = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap, **cluster.kwargs_for("grafana-plain", "PLAIN")
    )
    await producer.start()
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(TASKS, b"x", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=None,
        **cluster.kwargs_for("grafana-plain", "PLAIN"),
    )
    await consumer.start()
    try:
        tp = TopicPartition(DECISIONS, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert (await consumer.getmany(tp, timeout_ms=5000)).get(tp)
    finally:
        await consumer.stop()


async def test_a_wrong_password_is_refused_without_echoing_it(seeded, tmp_path) -> None:
    wrong = tmp_path / "wrong.password"
    wrong.write_text("definitely-not-the-password-4711\n")
    env = seeded.env_for("alice")
    env["KAFKA_SASL_PASSWORD_FILE"] = str(wrong)
    from schemas.kafka import security_settings

    producer = AIOKafkaProducer(
        bootstrap_servers=seeded.bootstrap, request_timeout_ms=5000,
        **security_settings(env).aiokafka_kwargs(),
    )
    with pytest.raises(KafkaError) as info:
        await producer.start()
    await producer.stop()
    assert isinstance(info.value, KafkaConnectionError | KafkaError)
    seeded.outputs.append(f"{info.value!r} {info.value}")
    assert "definitely-not-the-password" not in f"{info.value!r} {info.value}"
