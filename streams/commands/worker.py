"""Start a scheduler worker (a Faust worker of ``streams.app``).

Several workers with the same ``HETSCHED_APP_ID`` share the cells through
Kafka consumer-group rebalancing. Settings come from the environment; see
``streams/settings.py``. The catalog's topics (with ``HETSCHED_TOPIC_PREFIX``)
are created first if missing, with ``HETSCHED_PARTITIONS`` partitions and
``HETSCHED_REPLICATION`` replicas.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loglevel", "-l", default="info",
                        choices=["crit", "error", "warn", "info", "debug"],
                        help="log level (default info)")
    parser.add_argument("--web-port", type=int, help="web server port (default HETSCHED_WEB_PORT)")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses
    import os
    import sys

    if args.web_port:
        os.environ["HETSCHED_WEB_PORT"] = str(args.web_port)
    from schemas.admin import ensure_topics
    from schemas.topics import CATALOG
    from streams.app import app, settings

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    from streams.processors.summaries import summaries_spec

    catalog = [dataclasses.replace(s, name=settings.topic(s.name)) for s in CATALOG]
    catalog.append(summaries_spec(settings.app_id, settings.partitions))
    from streams.processors.eos import state_spec

    catalog += [state_spec(settings.app_id, name, settings.partitions)
                for name in ("router", "scheduler")]
    asyncio.run(ensure_topics(settings.bootstrap, catalog, replication_factor=settings.replication,
                              partitions=settings.partitions))
    _bound_graceful_stop(float(os.environ.get("HETSCHED_STOP_GRACE_S", "15")))
    # Faust's CLI reads sys.argv; it exits the process when the worker stops.
    sys.argv = ["hetsched", "worker", "--loglevel", args.loglevel,
                "--web-port", str(settings.web_port), "--web-host", settings.web_host]
    app.main()
    return 0


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
