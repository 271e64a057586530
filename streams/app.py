"""The Faust app of the scheduler: topics from the catalog, tables, web views.

Run a worker with ``hetsched worker`` (or ``faust -A streams.app worker``).
Settings come from the environment (:mod:`streams.settings`).
"""

from __future__ import annotations

import faust

from schemas.faust_codec import register_codecs
from schemas.kafka import faust_broker_url
from streams.settings import WorkerSettings

settings = WorkerSettings.from_env()
register_codecs()

app = faust.App(
    settings.app_id,
    broker=faust_broker_url(settings.bootstrap),
    store="memory://",
    datadir=str(settings.data_dir),
    web_port=settings.web_port,
    web_bind=settings.web_host,
    topic_partitions=settings.partitions,
    topic_replication_factor=settings.replication,
    processing_guarantee="exactly_once",
)


@app.page("/health")
async def health(web: faust.web.Web, request: faust.web.Request) -> faust.web.Response:
    """Liveness for operators and the demo: 200 once the worker is running."""
    return web.json({"status": "ok", "app": settings.app_id, "kafka": settings.bootstrap})
