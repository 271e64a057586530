"""Start a scheduler worker (a Faust worker of ``streams.app``).

Several workers with the same ``HETSCHED_APP_ID`` share the cells through
Kafka consumer-group rebalancing. Settings come from the environment; see
``streams/settings.py``. The catalog's topics (with ``HETSCHED_TOPIC_PREFIX``)
are created first if missing, with ``HETSCHED_PARTITIONS`` partitions (except
the dead-letter topic's one: :func:`schemas.topics.for_deployment`), the
catalog's cleanup policy and retention, and ``HETSCHED_REPLICATION`` replicas;
an existing topic that differs from the catalog is logged once
(:func:`schemas.admin.report_drift`). :func:`worker_topics` lists them.

When Kafka is unreachable at start the worker does not exit: it retries with
exponential backoff and jitter (:mod:`schemas.backoff`, one log line per
attempt) and serves ``/health`` with 503 and the last error meanwhile; Faust
starts once the topics are ensured. SIGTERM while waiting exits 0.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.kafka import KafkaHealth
    from schemas.topics import TopicSpec
    from streams.settings import WorkerSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loglevel", "-l", default="info",
                        choices=["crit", "error", "warn", "info", "debug"],
                        help="log level (default info)")
    parser.add_argument("--web-port", type=int, help="web server port (default HETSCHED_WEB_PORT)")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import os
    import sys

    from schemas.command_line import check_limits

    if args.web_port is not None:
        check_limits([("--web-port", args.web_port, 0 < args.web_port < 65536, "a TCP port")])
        os.environ["HETSCHED_WEB_PORT"] = str(args.web_port)
    from schemas.event_loop import use_event_loop

    use_event_loop()  # before any loop exists (the Kafka wait below, then Faust's)
    from streams.app import app, kafka_health, settings

    settings.data_dir.mkdir(parents=True, exist_ok=True)

    async def topics() -> None:
        await ensure_worker_topics(settings)

    if not asyncio.run(_wait_for_kafka(topics, settings, kafka_health)):
        print("hetsched worker: stopped while waiting for Kafka", file=sys.stderr)
        return 0
    _bound_graceful_stop(float(os.environ.get("HETSCHED_STOP_GRACE_S", "15")))
    # Faust's CLI reads sys.argv; it exits the process when the worker stops.
    sys.argv = ["hetsched", "worker", "--loglevel", args.loglevel,
                "--web-port", str(settings.web_port), "--web-host", settings.web_host]
    app.main()
    return 0


def worker_topics(settings: WorkerSettings) -> list[TopicSpec]:
    """The topics a worker creates: the catalog's (prefixed) and its app's internal
    ones (cell summaries, the processors' state), as ``settings`` sizes them."""
    import dataclasses

    from schemas.topics import CATALOG, for_deployment
    from streams.processors.eos_txn import state_spec
    from streams.processors.summaries import summaries_spec

    catalog = [dataclasses.replace(s, name=settings.topic(s.name)) for s in CATALOG]
    catalog.append(summaries_spec(settings.app_id, settings.partitions))
    catalog += [state_spec(settings.app_id, name, settings.partitions)
                for name in ("router", "scheduler")]
    return for_deployment(catalog, settings.partitions)


async def ensure_worker_topics(settings: WorkerSettings) -> list[str]:
    """Create the missing :func:`worker_topics`; return the names created."""
    from schemas.admin import ensure_topics

    return await ensure_topics(settings.bootstrap, worker_topics(settings),
                               replication_factor=settings.replication,
                               partitions=settings.partitions)


async def _wait_for_kafka(connect: Callable[[], Awaitable[None]], settings: WorkerSettings,
                         health: KafkaHealth) -> bool:
    """Run ``connect`` (ensure the topics) until Kafka answers, serving ``/health``
    meanwhile; False when SIGTERM/SIGINT came first.

    Why before Faust: a Faust app whose producer cannot bootstrap stops the
    whole worker with a traceback, so the cluster must answer before it starts.
    Each failed attempt is one log line naming the address, the error and
    the wait.
    """
    import asyncio
    import logging
    import signal
    import time

    from streams.web import serve_health

    # Faust configures logging when it starts; until then, a plain handler of our own.
    log = logging.getLogger("hetsched.worker")
    log.setLevel(logging.INFO)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(asctime)s] [%(levelname)s] %(message)s"))
    # schemas.admin says here which existing topic differs from the catalog
    topic_log = logging.getLogger("schemas.admin")
    topic_log.setLevel(logging.INFO)
    for logger in (log, topic_log):
        logger.addHandler(handler)
        logger.propagate = False
    started = time.time()
    runner = await serve_health(settings.web_host, settings.web_port, health, settings.app_id)
    waiting = asyncio.ensure_future(health.connect(connect, what="ensuring topics", log=log))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, waiting.cancel)
    try:
        await waiting
        if health.since > started:
            log.warning("kafka at %s is reachable; starting the worker", settings.bootstrap)
        return True
    except asyncio.CancelledError:
        return False
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        for logger in (log, topic_log):
            logger.removeHandler(handler)
            logger.propagate = True


def _bound_graceful_stop(grace_s: float) -> None:
    """On SIGTERM / SIGINT let Faust stop gracefully, but exit after ``grace_s`` at most.

    faust-streaming 0.15's shutdown under exactly-once can hang for good (after
    aiokafka's "Not in the middle of a transaction" while stopping the
    transactional producers), leaving the worker to be killed. Exiting then is
    safe: it is what a crash does, and the open transactions are aborted by
    the next owner of their partitions (or by the broker's transaction
    timeout), so nothing uncommitted becomes visible and nothing is lost.
    """
    import os
    import threading

    from faust.worker import Worker

    def exit_later() -> None:
        timer = threading.Timer(grace_s, os._exit, args=(0,))
        timer.daemon = True
        timer.start()

    def wrap(name: str) -> None:
        original = getattr(Worker, name)

        def handler(self: Worker) -> None:
            exit_later()
            original(self)

        setattr(Worker, name, handler)

    wrap("_on_sigterm")
    wrap("_on_sigint")
