"""The Faust app of the scheduler: topics from the catalog, tables, agents, timer, web views.

Run a worker with ``hetsched worker`` (or ``faust -A streams.app worker``).
Settings come from the environment (:mod:`streams.settings`); see
``docs/service.md`` for the architecture (cells, router, tables, exactly-once).

Tables (all changelog-backed, partitioned like the source topics; the
worker's memory store is rebuilt from the changelogs on start):

=====================  =====================  ==========================================
table                  written by             holds
=====================  =====================  ==========================================
node_to_cell           route_inputs           the cell each node was assigned at registration
task_to_cell           route_inputs           the cell each task was routed to
cellnode_to_record     schedule_cells         ``cell/node`` -> node record (capacity, order)
celltask_to_record     schedule_cells         ``cell/task`` -> task record (status, placement)
cell_to_meta           schedule_cells         per-cell counters, last tick, last input offset done
source_to_offset       route_inputs           ``topic/partition`` -> last source offset routed
=====================  =====================  ==========================================
"""

from __future__ import annotations

from typing import Any

import faust

from schemas.faust_codec import HETSCHED, ORJSON, register_codecs
from schemas.kafka import faust_broker_url, faust_settings
from schemas.topics import INPUT_LOG, NODES, TASK_STATUS, TASKS, TELEMETRY
from streams.core.service_profile import service_scheduler
from streams.dashboard import register_dashboard
from streams.processors import recovery
from streams.processors.context import Context, Tables
from streams.processors.routing import make_router
from streams.processors.scheduling import CellStore, make_scheduler
from streams.processors.summaries import SummaryView, summaries_spec
from streams.processors.ticks import make_ticker
from streams.processors.txn import TransactionalSender
from streams.settings import WorkerSettings
from streams.web import register_pages

settings = WorkerSettings.from_env()
register_codecs()
recovery.install(settings.bootstrap)  # Faust's EOS recovery highwaters are wrong

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
    broker_commit_interval=settings.commit_interval_s,
    table_standby_replicas=0,
    broker_session_timeout=settings.session_timeout_s,
    broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 5),
    **faust_settings(),
)


def _catalog_topic(*names: str) -> faust.TopicT:
    """A source topic of the catalog: raw keys, envelopes (or dead letters) as values."""
    return app.topic(*(settings.topic(n) for n in names), key_type=bytes,
                     key_serializer="raw", value_serializer=HETSCHED,
                     partitions=settings.partitions)


def _table(name: str) -> Any:
    schema = faust.Schema(key_serializer=ORJSON, value_serializer=ORJSON)
    return app.Table(name, partitions=settings.partitions, schema=schema)


routed_inputs = _catalog_topic(NODES, TELEMETRY, TASKS, TASK_STATUS)
input_log = _catalog_topic(INPUT_LOG)

tables = Tables(
    node_to_cell=_table("node_to_cell"),
    task_to_cell=_table("task_to_cell"),
    cellnode_to_record=_table("cellnode_to_record"),
    celltask_to_record=_table("celltask_to_record"),
    cell_to_meta=_table("cell_to_meta"),
    cell_to_summary=SummaryView(settings.bootstrap,
                                summaries_spec(settings.app_id, settings.partitions).name),
    source_to_offset=_table("source_to_offset"),
)
context = Context(app, settings, tables, TransactionalSender(app))
cells = CellStore(context, service_scheduler(settings.profile))

app.agent(routed_inputs, name="route_inputs")(make_router(context))
app.agent(input_log, name="schedule_cells")(make_scheduler(context, cells))
app.timer(settings.tick_s, name="tick_cells")(make_ticker(context))
register_pages(app, context, cells)
register_dashboard(app, context, cells)  # /dashboard (streams/dashboard)
app.task(tables.cell_to_summary.run)


@app.on_partitions_revoked.connect
async def _forget_cells(sender: Any, *args: Any, **kwargs: Any) -> None:
    """A rebalance may move cells: rebuild each from its table records on its next event.

    The tables themselves stay: Faust keeps the partitions a worker retains (their
    open transaction continues) and, for the memory store, drops the keys of
    partitions it loses when recovery completes and re-reads newly assigned ones
    from the committed changelog, so local state never keeps an aborted write.
    """
    cells.forget()


@app.page("/health")
async def health(web: faust.web.Web, request: faust.web.Request) -> faust.web.Response:
    """Liveness for operators and the demo: 200 once the worker is running."""
    return web.json({"status": "ok", "app": settings.app_id, "kafka": settings.bootstrap})
