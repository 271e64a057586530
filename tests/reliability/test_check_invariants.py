"""The invariant checker on a sound recorded run, and on logs doctored to break each invariant.

Each doctored log adds the smallest evidence of one failure (a second placement,
a repeated decision, a start applied twice ...) to a run that passes, and the
check must name exactly that invariant.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from reliability_builders import PREFIX, append, envelopes, event, recorded

from schemas.events import GpuAssignment, NodeFailed, TaskPlaced, TaskStarted, TaskSubmitted
from schemas.topics import DECISIONS, INPUT_LOG, TASK_STATUS, TASKS
from streams.audit import logfile
from streams.audit.logfile import Header
from streams.check import findings as f
from streams.check.invariants import check

SIM = {"duration_s": 1.0, "gpu_util_pct": 50.0, "gpu_mem_used_mib": 100}
REPO = Path(__file__).resolve().parents[2]


def _violated(records: list, **kw: bool) -> dict[str, int]:
    return {k: v for k, v in check(records, PREFIX, **kw).by_invariant().items() if v}


def test_a_sound_run_satisfies_every_invariant_and_accounts_for_every_task():
    rec = recorded()
    report = check(rec.records, PREFIX, settled=True)
    assert report.ok, report.render()
    states = report.states()
    assert len(report.task_states) == 30
    assert states["lost"] == 0 and states["in_flight"] == 0
    assert states["unschedulable"] == 6  # the H100 tasks: no such GPU in the cell
    assert states["running"] + states["finished"] + states["queued"] == 24
    assert 0 < report.max_share_milli <= 1000


def test_a_second_placement_of_a_running_task_is_a_double_placement():
    rec = recorded()
    records = rec.records
    placed = envelopes(records, "TaskPlaced")[-1]
    again = placed.payload.model_copy(update={
        "decision_id": event(placed.payload, "x").event_id})
    append(records, DECISIONS, event(again, "again", causation_id=placed.causation_id,
                                     event_id=again.decision_id))
    assert f.DOUBLE_PLACEMENT in _violated(records)


def test_a_gpu_booked_past_1000_milli_is_an_over_commit():
    rec = recorded()
    records = rec.records
    placed = envelopes(records, "TaskPlaced")[-1].payload
    sub = TaskSubmitted.model_validate({
        "task_id": "intruder", "tenant": "t", "resources": {"gpu_count": 1},
        "executor": {"kind": "simulated", "simulated": SIM}})
    cause = event(sub, "intruder")
    append(records, INPUT_LOG, cause)
    bad = TaskPlaced(decision_id=event(sub, "d").event_id, cause_event_id=cause.event_id,
                     task_id="intruder", node_id=placed.node_id,
                     gpus=[GpuAssignment(index=placed.gpus[0].index, share_milli=1000)],
                     executor=placed.executor, reason=placed.reason)
    append(records, DECISIONS, event(bad, "bad", causation_id=cause.event_id,
                                     event_id=bad.decision_id))
    violated = _violated(records)
    assert f.OVER_COMMIT in violated and f.DOUBLE_PLACEMENT not in violated


def test_one_decision_id_at_two_offsets_is_a_duplicate_decision():
    rec = recorded()
    records = rec.records
    append(records, DECISIONS, envelopes(records, "TaskPlaced")[0])
    assert set(_violated(records)) == {f.DUPLICATE_DECISION}


def test_a_submission_never_decided_is_in_flight_live_and_lost_when_settled():
    rec = recorded()
    records = rec.records
    sub = TaskSubmitted.model_validate({
        "task_id": "orphan", "tenant": "t", "resources": {"gpu_count": 1},
        "executor": {"kind": "simulated", "simulated": SIM}})
    append(records, TASKS, event(sub, "orphan", cell=None))
    live = check(records, PREFIX)
    assert live.ok and live.task_states["orphan"] == "in_flight"
    settled = check(records, PREFIX, settled=True)
    assert settled.by_invariant()[f.LOST_TASK] == 1
    assert settled.task_states["orphan"] == "lost"


def test_a_placement_on_a_node_whose_failure_was_logged_breaks_membership():
    rec = recorded()
    records = rec.records
    placed = envelopes(records, "TaskPlaced")[-1]
    failed = event(NodeFailed(node_id=placed.payload.node_id, reason="heartbeat_timeout"), "nf")
    append(records, INPUT_LOG, failed)
    sub = TaskSubmitted.model_validate({
        "task_id": "late", "tenant": "t", "resources": {"gpu_count": 0},
        "executor": {"kind": "simulated", "simulated": SIM}})
    cause = event(sub, "late")
    append(records, INPUT_LOG, cause)
    bad = TaskPlaced(decision_id=event(sub, "late-d").event_id, cause_event_id=cause.event_id,
                     task_id="late", node_id=placed.payload.node_id, gpus=[],
                     executor=placed.payload.executor, reason=placed.payload.reason)
    append(records, DECISIONS, event(bad, "late-e", causation_id=cause.event_id,
                                     event_id=bad.decision_id))
    assert set(_violated(records)) == {f.MEMBERSHIP}


@pytest.mark.parametrize("distinct_events, violated", [
    pytest.param(False, set(), id="a producer retry of one start event is not a second start"),
    pytest.param(True, {f.DUPLICATE_APPLY}, id="two start events for one decision are two starts"),
])
def test_executors_start_each_decision_at_most_once(distinct_events: bool, violated: set):
    rec = recorded()
    records = rec.records
    placed = envelopes(records, "TaskPlaced")[0]
    p = placed.payload
    start = TaskStarted(task_id=p.task_id, node_id=p.node_id, decision_id=p.decision_id)
    first = event(start, "s1", causation_id=placed.event_id)
    second = event(start, "s2" if distinct_events else "s1", causation_id=placed.event_id)
    append(records, TASK_STATUS, first)
    append(records, TASK_STATUS, second)
    assert set(_violated(records)) == violated


def test_a_start_for_a_decision_never_made_is_reported():
    rec = recorded()
    records = rec.records
    start = TaskStarted(task_id="ghost", node_id="node-t4-0",
                        decision_id=event(TaskStarted(task_id="g", node_id="n",
                                                      decision_id="0" * 26), "g").event_id)
    append(records, TASK_STATUS, event(start, "ghost"))
    assert set(_violated(records)) == {f.PHANTOM_START}


def test_undecodable_records_are_counted_not_fatal():
    rec = recorded()
    records = rec.records
    from streams.audit.records import Record
    records.append(Record(PREFIX + INPUT_LOG, 0, 10_000, None, b"cell-0", b"{not json"))
    report = check(records, PREFIX, settled=True)
    assert report.ok and report.counts[f"undecodable:{INPUT_LOG}"] == 1


def _doctored() -> list:
    """A recorded run with a second placement and a repeated decision added."""
    records = recorded().records
    placed = envelopes(records, "TaskPlaced")[-1]
    again = placed.payload.model_copy(update={
        "decision_id": event(placed.payload, "x").event_id})
    append(records, DECISIONS, event(again, "again", causation_id=placed.causation_id,
                                     event_id=again.decision_id))
    append(records, DECISIONS, envelopes(records, "TaskPlaced")[0])
    return records


def test_a_file_a_list_in_any_order_and_an_iterator_give_the_same_report(tmp_path: Path):
    records = _doctored()
    path = tmp_path / "run.jsonl.gz"
    logfile.write(path, Header(topics=[], exported_at="", topic_prefix=PREFIX), records)
    expected = check(records, PREFIX, settled=True).to_json()
    found = {name for name, n in expected["invariants"].items() if n}
    assert found == {f.DOUBLE_PLACEMENT, f.DUPLICATE_DECISION}, found
    shuffled = random.Random(7).sample(records, len(records))
    assert check(logfile.LogFile(path), PREFIX, settled=True).to_json() == expected
    assert check(shuffled, PREFIX, settled=True).to_json() == expected
    assert check(iter(records), PREFIX, settled=True).to_json() == expected


def test_a_file_is_checked_without_holding_its_input_log(telemetry_audit_file):
    log = telemetry_audit_file
    tracemalloc.start()
    try:
        report = check(logfile.LogFile(log.path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok and report.counts[INPUT_LOG] == log.inputs
    # a list of the records would hold all their bytes (the earlier check: 9 times them)
    assert peak < log.input_bytes / 2, (peak, log.input_bytes)


@pytest.mark.parametrize("doctor, code", [
    pytest.param(False, 0, id="a sound exported file exits 0"),
    pytest.param(True, 1, id="a file with a repeated decision exits 1 and names it"),
])
def test_the_cli_checks_an_exported_file(tmp_path: Path, doctor: bool, code: int):
    rec = recorded()
    records = rec.records
    if doctor:
        append(records, DECISIONS, envelopes(records, "TaskPlaced")[0])
    path = tmp_path / "run.jsonl.gz"
    logfile.write(path, Header(topics=[PREFIX + INPUT_LOG, PREFIX + DECISIONS],
                               exported_at="2026-11-29T14:00:00+00:00", topic_prefix=PREFIX),
                  records)
    done = subprocess.run([sys.executable, "-m", "streams.cli", "check", str(path), "--settled"],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    assert (f.DUPLICATE_DECISION + ": ") in done.stdout if doctor else "all hold" in done.stdout
