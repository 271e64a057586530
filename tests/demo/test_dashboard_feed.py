"""The dashboard feed reads records cheaply and still shows what a full decode shows.

Why: the feed consumes every submission, telemetry sample and decision in the
worker process the scheduler runs in; :meth:`Feed.note_raw` reads the JSON fields
it shows and decodes only the decisions kept for the page. What the page gets
must not change: the same telemetry, tenants, placement count and decisions
(newest first, at most ``SHOWN_DECISIONS``) as ``note(decode(...))`` of every record.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schemas.codec import decode, encode
from schemas.events import (
    DecisionReason,
    ExecutorSpec,
    GpuAssignment,
    GpuTelemetry,
    SimulatedWork,
    TaskPlaced,
    TaskSubmitted,
    make_event,
)
from schemas.ids import new_event_id
from streams.dashboard.feed import SHOWN_DECISIONS, Feed

EXECUTOR = ExecutorSpec(kind="simulated", simulated=SimulatedWork(
    duration_s=1.0, gpu_util_pct=50.0, gpu_mem_used_mib=1024))


def _event(payload: Any) -> bytes:
    return encode(make_event(payload, source="test", occurred_at=datetime.now(UTC),
                             cell="cell-0"))


def _records(tasks: int) -> list[bytes]:
    out = []
    for i in range(tasks):
        out.append(_event(TaskSubmitted.model_validate({
            "task_id": f"t{i}", "tenant": f"team-{i % 3}", "resources": {"gpu_count": 1},
            "executor": EXECUTOR.model_dump(mode="json")})))
        out.append(_event(GpuTelemetry(
            node_id=f"n{i % 4}", gpu_index=i % 2, gpu_uuid=f"GPU-{i % 4}-{i % 2}",
            gpu_util_pct=float(i), mem_used_mib=1024, temperature_c=40.0 + i, power_w=100.0)))
        now = datetime.now(UTC)
        out.append(_event(TaskPlaced(
            task_id=f"t{i}", node_id=f"n{i % 4}", executor=EXECUTOR,
            gpus=[GpuAssignment(index=i % 2, share_milli=500)],
            reason=DecisionReason(code="test", message=f"placed {i}"),
            decision_id=new_event_id(now), cause_event_id=new_event_id(now))))
    out.append(b"not json at all")
    return out


def test_the_cheap_read_shows_what_a_full_decode_shows() -> None:
    tasks = SHOWN_DECISIONS + 7
    *records, unreadable = _records(tasks)
    full, cheap = Feed(), Feed()
    for raw in records:  # every good record is taken, none raises
        full.note(decode(raw))
        cheap.note_raw(raw, decode)
    # follow() skips a record the feed cannot read: both reads refuse it, and change nothing
    with pytest.raises(ValueError):
        cheap.note_raw(unreadable, decode)
    with pytest.raises(AttributeError):  # decode gives a dead letter, not an event
        full.note(decode(unreadable))
    assert cheap.placed == full.placed == tasks
    assert cheap.tenants == {f"t{i}": f"team-{i % 3}" for i in range(tasks)}
    assert cheap.telemetry == {f"n{i % 4}/{i % 2}": {"util": float(i), "temp": 40.0 + i}
                               for i in range(tasks)}  # each GPU's latest sample
    assert cheap.telemetry == full.telemetry
    assert cheap.tenants == full.tenants
    shown = cheap.recent_decisions(decode)
    assert shown == list(full.decisions)
    assert len(shown) == SHOWN_DECISIONS and shown[0]["task"] == f"t{SHOWN_DECISIONS + 6}"
    assert cheap.recent_decisions(decode) == shown  # decoded once, kept


def test_a_gang_is_one_decision_row_naming_every_member_node() -> None:
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "schemas" / "fixtures" / "TaskPlaced.v2.json"
    raw = fixture.read_bytes()
    feed = Feed()
    feed.note_raw(raw, decode)
    (row,) = feed.recent_decisions(decode)
    assert row["task"] == "pretrain-7" and row["node"] == "node-17, node-18"
    assert [(m["rank"], m["node"], len(m["gpus"])) for m in row["members"]] == [
        (0, "node-17", 8), (1, "node-18", 4)]
    assert feed.placed == 1  # one placement for the whole gang
