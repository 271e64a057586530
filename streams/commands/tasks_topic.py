"""The producer set-up that ``hetsched submit`` and ``hetsched cancel`` share.

Both write one event per task to ``hetsched.tasks`` (under the deployment's
topic prefix), keyed by task id, with the project's producer defaults and the
deployment's Kafka security settings.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer

    from schemas.topics import TopicSpec
    from streams.settings import WorkerSettings


def tasks_producer(settings: WorkerSettings) -> tuple[TopicSpec, AIOKafkaProducer]:
    """The tasks topic's spec (its deployed name) and a producer for it, not yet started."""
    import dataclasses

    from aiokafka import AIOKafkaProducer

    from schemas.consume import PRODUCER_DEFAULTS
    from schemas.kafka import aiokafka_kwargs
    from schemas.topics import BY_NAME, TASKS

    spec = dataclasses.replace(BY_NAME[TASKS], name=settings.topic(TASKS))
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, **PRODUCER_DEFAULTS,
                                **aiokafka_kwargs())
    return spec, producer
