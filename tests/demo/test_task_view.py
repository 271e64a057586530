"""The task view's endpoint (``/task/<id>``): a task's timeline and why it waits.

Why: a queued task could not be opened to see why it waits ("why is my job
pending?"). The endpoint answers from the records the dashboard's feed keeps
(:mod:`streams.dashboard.journal`) with ``hetsched explain``'s timeline, gives a
pending task's latest verdicts, answers 404 naming an unknown id, and takes any
task id (any string: slashes, percent signs, spaces) as the rest of its path.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from schemas.codec import decode, encode
from schemas.events import (
    DecisionReason,
    ExecutorSpec,
    GpuAssignment,
    GpuUsage,
    PolicyVerdict,
    SimulatedWork,
    TaskPlaced,
    TaskStarted,
    TaskSubmitted,
    TaskUnschedulable,
    TaskUsage,
    make_event,
)
from schemas.ids import new_event_id
from schemas.topics import DECISIONS, INPUT_LOG
from streams.audit.records import Record
from streams.core.cell import Cell
from streams.core.events import NodeAdded, TaskArrived
from streams.core.request import TaskRequest
from streams.dashboard.feed import Feed
from streams.dashboard.journal import MAX_LATER, TaskJournal
from streams.dashboard.pages import TASK_ROUTE
from streams.dashboard.task_view import task_response
from streams.profiles.service import service_scheduler

PREFIX = "run7."
EXECUTOR = ExecutorSpec(kind="simulated", simulated=SimulatedWork(
    duration_s=60.0, gpu_util_pct=50.0, gpu_mem_used_mib=1024))
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
VERDICTS = [PolicyVerdict(policy="fit", code="unschedulable", nodes=3,
                          reasons=["needs 4 GPUs, at most 2 free on a node"]),
            PolicyVerdict(policy="gpu_model", code="unschedulable", nodes=1,
                          reasons=["node n2 has T4, the task asks A100"])]


class Log:
    """Records of the input log and decisions topics, each at the next offset."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, topic: str, payload: Any, at: datetime, causation: str | None = None) -> str:
        event_id = new_event_id(at)
        raw = encode(make_event(payload, source="test", occurred_at=at, cell="cell-0",
                                causation_id=causation, event_id=event_id))
        self.records.append(Record(PREFIX + topic, 0, len(self.records), None, b"cell-0", raw))
        return event_id


def submitted(task_id: str) -> TaskSubmitted:
    return TaskSubmitted.model_validate({
        "task_id": task_id, "tenant": "research", "resources": {"gpu_count": 4},
        "executor": EXECUTOR.model_dump(mode="json")})


def waits(log: Log, task_id: str, cause: str, at: datetime) -> None:
    log.add(DECISIONS, TaskUnschedulable(
        task_id=task_id, decision_id=new_event_id(at), cause_event_id=cause, resolvable=True,
        verdicts=VERDICTS, nodes_considered=3, message="no feasible node now"), at, cause)


def placed(log: Log, task_id: str, cause: str, at: datetime) -> str:
    decision = new_event_id(at)
    log.add(DECISIONS, TaskPlaced(
        task_id=task_id, node_id="n1", executor=EXECUTOR,
        gpus=[GpuAssignment(index=i) for i in range(4)],
        reason=DecisionReason(code="best_score", message="best fit"),
        decision_id=decision, cause_event_id=cause), at, cause)
    return decision


def fed(log: Log) -> Feed:
    """A feed that read ``log`` as ``follow`` reads Kafka."""
    feed = Feed()
    for record in log.records:
        feed.note_record(record, decode)
    return feed


def response(feed: Feed, task_id: str) -> tuple[int, dict[str, Any]]:
    return task_response(task_id, feed.journal.records(task_id), PREFIX, [])


def test_a_queued_task_shows_its_timeline_and_the_verdicts_of_its_latest_decision() -> None:
    log, task = Log(), "run7-openb-pod-0412"
    cause = log.add(INPUT_LOG, submitted(task), T0)
    waits(log, task, cause, T0 + timedelta(seconds=1))
    log.add(INPUT_LOG, submitted("run7-openb-pod-0413"), T0)  # another task's record

    status, body = response(fed(log), task)
    assert status == 200
    assert [(r["step"], r["type"]) for r in body["timeline"]] == [
        ("submitted", "TaskSubmitted"), ("queued", "TaskUnschedulable")]
    assert body["timeline"][0]["at"].startswith("2026-12-04T12:00:00")
    pending = body["pending"]
    assert pending["resolvable"] is True and pending["nodes_considered"] == 3
    assert [(v["policy"], v["code"], v["reasons"], v["nodes"]) for v in pending["verdicts"]] == [
        (v.policy, v.code, v.reasons, v.nodes) for v in VERDICTS]
    # the same verdict lines `hetsched explain` prints for this task
    assert "fit: unschedulable: needs 4 GPUs, at most 2 free on a node" in body["explain"]
    assert "gpu_model: unschedulable: node n2 has T4, the task asks A100" in body["explain"]


def test_a_task_placed_after_waiting_is_no_longer_pending() -> None:
    log, task = Log(), "run7-openb-pod-0001"
    cause = log.add(INPUT_LOG, submitted(task), T0)
    waits(log, task, cause, T0 + timedelta(seconds=1))
    decision = placed(log, task, cause, T0 + timedelta(seconds=5))
    log.add(INPUT_LOG, TaskStarted(task_id=task, node_id="n1", decision_id=decision,
                                   gpu_indices=[0, 1, 2, 3]), T0 + timedelta(seconds=6))
    status, body = response(fed(log), task)
    assert status == 200 and body["pending"] is None
    assert [r["step"] for r in body["timeline"]] == ["submitted", "queued", "placed", "started"]


def test_a_status_report_read_from_the_input_log_is_not_shown_as_a_decision() -> None:
    log, task = Log(), "run7-openb-pod-0002"
    cause = log.add(INPUT_LOG, submitted(task), T0)
    decision = placed(log, task, cause, T0)
    log.add(INPUT_LOG, TaskStarted(task_id=task, node_id="n1", decision_id=decision), T0)
    feed = fed(log)
    assert [d["type"] for d in feed.recent_decisions(decode)] == ["TaskPlaced"]
    assert feed.placed == 1 and feed.tenants == {task: "research"}


def test_usage_reports_do_not_cost_the_timeline() -> None:
    log, task = Log(), "run7-openb-pod-0003"
    cause = log.add(INPUT_LOG, submitted(task), T0)
    decision = placed(log, task, cause, T0)
    log.add(INPUT_LOG, TaskStarted(task_id=task, node_id="n1", decision_id=decision),
            T0 + timedelta(seconds=1))
    log.add(INPUT_LOG, TaskUsage(task_id=task, node_id="n1", window_s=10.0, gpus=[
        GpuUsage(gpu_index=0, gpu_util_pct=80.0, mem_used_mib=2048)]), T0 + timedelta(seconds=11))
    status, body = response(fed(log), task)
    assert status == 200
    assert [r["step"] for r in body["timeline"]] == ["submitted", "placed", "started", "usage"]
    assert body["explain"] is not None or body["explain_error"].startswith("hetsched explain")


def test_an_unknown_task_is_a_404_naming_the_id() -> None:
    log = Log()
    log.add(INPUT_LOG, submitted("run7-known"), T0)
    status, body = response(fed(log), "run7-unknown/with%2Fodd id")
    assert status == 404
    assert "unknown task 'run7-unknown/with%2Fodd id'" in body["error"]
    status, body = response(fed(log), "")
    assert status == 404 and "no task id" in body["error"]


def test_a_task_the_feed_did_not_see_is_answered_from_the_workers_cells() -> None:
    """A task submitted before the worker started has no records in the feed (it reads
    from the latest offsets), but the worker's cell knows where it stands."""
    cell = Cell("cell-0", service_scheduler("hetsched"))
    cell.add_node(NodeAdded("e0", "n0", 64000, 262144, 1, "A100"), None, 0.0)
    for k in range(2):  # one GPU: t0 runs, t1 waits
        cell.submit(TaskArrived(f"a{k}", TaskRequest(f"t{k}", 1000, 1024, 1, 1000)),
                    {}, None, float(k))
    status, body = task_response("t1", [], PREFIX, [("cell-0", cell)])
    assert status == 200 and body["timeline"] == [] and body["pending"] is None
    assert body["now"]["status"] == "queued" and body["now"]["cell"] == "cell-0"
    status, body = task_response("t0", [], PREFIX, [("cell-0", cell)])
    assert body["now"]["status"] == "running" and body["now"]["node"] == "n0"


def test_the_journal_keeps_the_latest_tasks_and_each_ones_first_and_latest_records() -> None:
    journal = TaskJournal(max_tasks=2)
    rec = [Record("t", 0, i, None, None, b"{}") for i in range(40)]
    journal.keep("a", rec[0])
    for r in rec[1:39]:
        journal.keep("a", r)
    journal.keep("b", rec[39])
    assert journal.records("a") == [rec[0], *rec[39 - MAX_LATER:39]]
    journal.keep("c", rec[0])
    assert journal.records("a") == [] and len(journal) == 2


ODD_IDS = ["run7/team a/job 1", "50%off", "%2F", "a%20b", "ünï/cødé?#&", "..x", "x/../y"]


def test_the_route_takes_any_task_id_percent_encoded_as_the_rest_of_the_path() -> None:
    """The page asks ``/task/`` + ``encodeURIComponent(id)``; the route must give the
    handler that id back, slashes and percent signs included."""
    log = Log()
    for task in ODD_IDS:
        log.add(INPUT_LOG, submitted(task), T0)
    feed = fed(log)

    async def handler(request: web.Request) -> web.Response:
        status, body = response(feed, request.match_info["task_id"])
        return web.json_response(body, status=status)

    async def ask_all() -> list[tuple[str, int, Any]]:
        app = web.Application()
        app.router.add_route("GET", TASK_ROUTE, handler)
        async with TestClient(TestServer(app)) as client:
            out = []
            for task in [*ODD_IDS, "not/there%25"]:
                url = "/task/" + urllib.parse.quote(task, safe="")
                got = await client.get(url, allow_redirects=False)
                out.append((task, got.status, await got.json()))
            return out

    for task, status, body in asyncio.run(ask_all()):
        if task == "not/there%25":
            assert status == 404 and "'not/there%25'" in body["error"]
        else:
            assert status == 200, (task, body)
            assert body["task"] == task and body["timeline"][0]["step"] == "submitted"
