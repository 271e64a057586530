"""Publishing node events on the catalog's topics, through the schemas' codec.

Wire format, keys and topic settings all come from ``schemas`` (envelope,
:func:`schemas.consume.produce_event`, :mod:`schemas.topics`); this module
only adds the node side's two needs: a topic-name prefix (so tests and demos
can run isolated on a shared broker) and an in-memory publisher with the same
interface for unit tests and broker-less simulations.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from schemas.events import Envelope, Event, make_event
from schemas.topics import (
    BY_NAME,
    DEADLETTER,
    DECISIONS,
    NODE_INVENTORY,
    NODES,
    TASK_STATUS,
    TELEMETRY,
    TopicSpec,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Topics:
    """The node side's topics, optionally prefixed."""

    prefix: str = ""

    def spec(self, name: str) -> TopicSpec:
        return dataclasses.replace(BY_NAME[name], name=self.prefix + name)

    @property
    def nodes(self) -> TopicSpec:
        return self.spec(NODES)

    @property
    def inventory(self) -> TopicSpec:
        return self.spec(NODE_INVENTORY)

    @property
    def telemetry(self) -> TopicSpec:
        return self.spec(TELEMETRY)

    @property
    def status(self) -> TopicSpec:
        return self.spec(TASK_STATUS)

    @property
    def decisions(self) -> TopicSpec:
        return self.spec(DECISIONS)

    @property
    def deadletter(self) -> TopicSpec:
        return self.spec(DEADLETTER)

    def produced(self) -> list[TopicSpec]:
        """The topics the node writes, which it may create. Not the decisions topic:
        the scheduler owns it, and its partition count must match the input log's."""
        return [self.nodes, self.inventory, self.telemetry, self.status, self.deadletter]

    def all(self) -> list[TopicSpec]:
        return [
            self.nodes,
            self.inventory,
            self.telemetry,
            self.status,
            self.decisions,
            self.deadletter,
        ]


class Publisher(Protocol):
    """Sends one event; returns the envelope sent (its id is the causation of replies)."""

    async def publish(
        self,
        topic: TopicSpec,
        payload: Event,
        *,
        source: str,
        cell: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> Envelope[Event]: ...


def envelope(
    payload: Event,
    *,
    source: str,
    cell: str | None = None,
    causation_id: str | None = None,
    correlation_id: str | None = None,
) -> Envelope[Event]:
    """Wrap a payload as the node side does: event time = now (UTC), random ULID."""
    return make_event(
        payload,
        source=source,
        occurred_at=datetime.now(UTC),
        cell=cell,
        causation_id=causation_id,
        correlation_id=correlation_id,
    )


class KafkaPublisher:
    """Idempotent, acks=all producer of the schemas' envelopes."""

    def __init__(self, bootstrap: str, *, client_id: str = "hetsched-node") -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.producer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer

        from schemas.consume import PRODUCER_DEFAULTS
        from schemas.kafka import aiokafka_kwargs

        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            linger_ms=5,
            **PRODUCER_DEFAULTS,
            **aiokafka_kwargs(),
        )
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # a failed start leaves a client to close (retries make many)
            raise
        self.producer = producer

    async def stop(self) -> None:
        if self.producer is not None:
            await self.producer.stop()
            self.producer = None

    async def publish(
        self,
        topic: TopicSpec,
        payload: Event,
        *,
        source: str,
        cell: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> Envelope[Event]:
        from schemas.consume import produce_event

        if self.producer is None:
            raise RuntimeError("publisher not started")
        env = envelope(
            payload,
            source=source,
            cell=cell,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        await produce_event(self.producer, topic, env)
        return env


class MemoryPublisher:
    """Keeps what would have been sent, in order (tests, simulations without Kafka)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Envelope[Event]]] = []

    async def publish(
        self,
        topic: TopicSpec,
        payload: Event,
        *,
        source: str,
        cell: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> Envelope[Event]:
        env = envelope(
            payload,
            source=source,
            cell=cell,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        self.sent.append((topic.name, env))
        return env

    def payloads(self, event_type: str | None = None) -> list[Any]:
        """Payloads sent (of one type), typed loosely for tests to read fields."""
        return [e.payload for _, e in self.sent if event_type in (None, e.type)]


async def connect(
    publisher: KafkaPublisher,
    health: Any,
    *,
    topics: list[TopicSpec] | None = None,
    replication_factor: int = 1,
    partitions: int | None = None,
) -> None:
    """Create the node's missing topics (when given) and start the publisher, waiting
    out an unreachable cluster with backoff (``health``: a
    :class:`schemas.kafka.KafkaHealth`, which the node's ``/health`` shows).

    Why wait instead of exiting: a node restarted by systemd in a loop while the
    brokers are away says nothing a health check can read and hammers the
    cluster when it returns; waiting here costs one attempt per backoff step.
    """

    async def once() -> None:
        if topics:
            await ensure_topics(publisher.bootstrap, topics,
                                replication_factor=replication_factor, partitions=partitions)
        await publisher.start()

    await health.connect(once, what="node start", log=log)


async def ensure_topics(
    bootstrap: str,
    topics: Topics | list[TopicSpec],
    *,
    replication_factor: int = 1,
    partitions: int | None = None,
) -> None:
    """Create missing topics with the catalog's settings (all of ``Topics`` if given);
    ``partitions``: the deployment's count, for the topics whose count the catalog
    does not fix (:func:`schemas.topics.for_deployment`: the dead-letter topic keeps 1)."""
    from schemas.admin import ensure_topics as create

    specs = topics.all() if isinstance(topics, Topics) else topics
    await create(bootstrap, specs, replication_factor=replication_factor, partitions=partitions)
