"""The Faust app of the scheduler: the shell around the two exactly-once processors.

Run a worker with ``hetsched worker`` (or ``faust -A streams.app worker``).
Settings come from the environment (:mod:`streams.settings`); see
``docs/service.md`` for the architecture (cells, router, state, exactly-once).

Faust runs the web views (``/state``, ``/metrics``, ``/health``, ``/dashboard``),
the tick timer, the summaries reader and, as app services, the two processors:

=============  ==============================  =====================================
processor      consumes                        state topic (compacted, per partition)
=============  ==============================  =====================================
``router``     nodes, telemetry, tasks,        ``<app id>-router-state``:
               task-status                     ``node/<id>``, ``task/<id>`` -> cell
``scheduler``  input-log                       ``<app id>-scheduler-state``: the cells'
                                               node, task and meta records
=============  ==============================  =====================================

Each state topic also holds the next offset of every input partition
(``eos.offset/<topic>/<partition>``), committed with the outputs.

Both run Kafka's transactional consume-transform-produce loop directly on
aiokafka (:mod:`streams.processors.eos`), not Faust agents: faust-streaming's
exactly-once consume path loses and repeats events under kill -9 and rebalances
(docs/service.md). Faust itself consumes none of our topics any more, so its
``processing_guarantee`` is ``at_least_once``: it commits no offset of ours and
its producer sends nothing that needs a transaction.
"""

from __future__ import annotations

from typing import Any

import faust

from schemas.backoff import throttle_logs
from schemas.faust_codec import register_codecs
from schemas.kafka import KafkaHealth, faust_broker_url, faust_settings
from schemas.topics import INPUT_LOG, NODES, TASK_STATUS, TASKS, TELEMETRY
from streams.core.queue import QueueConfig
from streams.dashboard import register_dashboard
from streams.processors.context import Context
from streams.processors.eos import TransactionalProcessor
from streams.processors.ingest import RoutedTelemetry
from streams.processors.routing import Router
from streams.processors.scheduling import CellStore
from streams.processors.summaries import SummaryView, summaries_spec
from streams.processors.ticks import make_ticker
from streams.profiles.service import service_objectives, service_scheduler
from streams.settings import WorkerSettings, read_objectives
from streams.transient_logs import downgrade_transient_client_errors
from streams.web import health_body, register_pages

settings = WorkerSettings.from_env()
register_codecs()
throttle_logs()  # aiokafka logs every 100 ms retry while a broker is down: keep one per 30 s
downgrade_transient_client_errors()  # a fresh broker's coordinator lookup is no ERROR
kafka_health = KafkaHealth(settings.bootstrap)
"""Kafka reachability for ``/health``: ``hetsched worker`` reaches the cluster before
Faust starts (it cannot start without one), then :meth:`KafkaHealth.watch` keeps it
current while the aiokafka clients reconnect by themselves."""

app = faust.App(
    settings.app_id,
    broker=faust_broker_url(settings.bootstrap),
    store="memory://",
    datadir=str(settings.data_dir),
    web_port=settings.web_port,
    web_bind=settings.web_host,
    topic_partitions=settings.partitions,
    topic_replication_factor=settings.replication,
    processing_guarantee="at_least_once",
    table_standby_replicas=0,
    broker_session_timeout=settings.session_timeout_s,
    broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 5),
    **faust_settings(),
)

summaries_topic = summaries_spec(settings.app_id, settings.partitions).name
context = Context(settings, SummaryView(settings.bootstrap, summaries_topic))


def _decision_settings(s: WorkerSettings) -> tuple[Any, Any]:
    """The compiled profile and objectives; a bad one stops the worker with one line
    naming the variable (as ``WorkerSettings`` does for its numbers), not a traceback."""
    try:
        scheduler = service_scheduler(s.profile)
    except ValueError as exc:
        raise SystemExit(f"HETSCHED_PROFILE={s.profile!r}: {exc}") from None
    try:
        objectives = service_objectives(read_objectives(s.objectives)) if s.objectives else None
    except ValueError as exc:
        raise SystemExit(f"HETSCHED_OBJECTIVES: {exc}") from None
    return scheduler, objectives


scheduler, objectives = _decision_settings(settings)
cells = CellStore(context, scheduler, summaries_topic, objectives,
                  QueueConfig(predict_runtimes=settings.predict_runtimes))


def _processor(name: str, topics: list[str], handler: Any) -> TransactionalProcessor:
    return TransactionalProcessor(
        name=name, app_id=settings.app_id, bootstrap=settings.bootstrap,
        topics=[settings.topic(t) for t in topics], handler=handler,
        max_records=settings.batch_records, session_timeout_s=settings.session_timeout_s)


router_processor = _processor("router", [NODES, TELEMETRY, TASKS, TASK_STATUS], Router(context))
scheduler_processor = _processor("scheduler", [INPUT_LOG], cells)
if "scheduler" in settings.processors:
    router_processor.downstream_backlog = scheduler_processor.backlog  # eos._pace: why
else:  # a router-only process: no scheduler here to wait for or to take routed envelopes
    context.routed = RoutedTelemetry(limit=0)
context.owned_partitions = scheduler_processor.owned_partitions
PROCESSORS = tuple(p for p in (router_processor, scheduler_processor)
                   if p.name in settings.processors)
"""Started with the app (Faust ``app.service``) and stopped with it on SIGTERM: both, or
the one ``HETSCHED_PROCESSORS`` names (:func:`streams.settings._processors`)."""

for _p in PROCESSORS:
    app._extra_services.append(_p)  # type: ignore[arg-type]  # app.service() for an instance

app.timer(settings.tick_s, name="tick_cells")(make_ticker(context))
register_pages(app, context, cells)
register_dashboard(app, context, cells)  # /dashboard (streams/dashboard)
app.task(context.summaries.run)


@app.task
async def watch_kafka() -> None:
    """Keep ``/health`` current (a task without arguments: Faust passes the app otherwise)."""
    await kafka_health.watch()


@app.page("/health")
async def health(view: faust.web.View, request: faust.web.Request) -> faust.web.Response:
    """For operators, load balancers and the demo: 200 while the worker runs and reaches
    Kafka, 503 while Kafka is unreachable (the worker stays up and reconnects)."""
    status, body = health_body(kafka_health, settings.app_id)
    return view.json(body, status=status)
