"""Integrity findings on doctored logs, the explain timeline, and what-if replays."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest
from audit_builders import export, recorded

from streams.audit.explain import timeline
from streams.audit.integrity import check
from streams.audit.logfile import Header, LogFile
from streams.audit.records import Record
from streams.cli import main

HEADER = Header(topics=[], exported_at="", topic_prefix="t.")


def kinds(records: list[Record], header: Header = HEADER) -> dict[str, str]:
    return {f.kind: f.severity for f in check(header, records).findings}


def test_a_clean_recording_has_only_transactional_gaps() -> None:
    found = kinds(recorded(20).records)
    assert found == {"transactional gap": "info"}


@pytest.mark.parametrize(("doctor", "kind", "severity"), [
    (lambda rs: [*rs, rs[3]], "duplicate record", "error"),
    (lambda rs: [*rs[:3], rs[5], rs[4], *rs[6:]], "out of order", "error"),
    (lambda rs: [*rs, dataclasses.replace(rs[2], offset=10_000)], "duplicate event", "warning"),
], ids=["the same offset twice is a duplicate record",
        "a smaller offset after a larger one is out of order",
        "the same event id at two offsets is a duplicate event"])
def test_doctored_input_logs_are_reported(doctor: object, kind: str, severity: str) -> None:
    rec = recorded(20)
    found = kinds(doctor(rec.inputs) + rec.decisions)  # type: ignore[operator]
    assert found.get(kind) == severity


def test_a_gap_is_missing_records_when_the_export_read_uncommitted() -> None:
    rec = recorded(20)
    header = dataclasses.replace(HEADER, isolation_level="read_uncommitted")
    assert kinds(rec.records, header).get("missing records") == "error"


def test_a_decision_without_its_cause_and_a_repeated_decision_are_errors() -> None:
    rec = recorded(20)
    found = kinds(rec.inputs[:-3] + rec.decisions + [dataclasses.replace(
        rec.decisions[0], offset=99_999)])
    assert found.get("orphan decision") == "error"
    assert found.get("duplicate decision") == "error"


def test_explain_tells_a_task_story_with_candidates_and_terms(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export(tmp_path / "run.jsonl.gz", recorded(30))
    assert main(["explain", "task-002", str(path)]) == 0
    out = capsys.readouterr().out
    assert "submitted" in out and "placed" in out and "finished" in out
    assert "caused by TaskSubmitted" in out
    assert "node" in out and "score" in out and "hetsched" in out  # the candidate table
    # The finish names the placement it ends; it was "caused by None (not in this log)".
    (placed,) = [line for line in out.splitlines() if "caused by TaskSubmitted" in line]
    decision_id = placed.split()[1]
    (finished,) = [i for i, line in enumerate(out.splitlines()) if " finished " in line]
    placed_at = next(line.split()[0] for line in out.splitlines() if " placed " in line)
    assert out.splitlines()[finished + 1] == (
        f"    reports on decision {decision_id} (placed at {placed_at})")
    assert "None" not in out
    assert main(["explain", "no-such-task", str(path)]) == 1


def test_a_decision_caused_by_another_tasks_event_names_that_event(tmp_path: Path) -> None:
    """task-005 queues, then is placed when another task finishes: the cause is found in
    the second pass over the file, which kept none of the other task's records."""
    rec = recorded(60)
    log = LogFile(export(tmp_path / "run.jsonl.gz", rec))
    rows = timeline(log, "task-005", "t.")
    assert rows == timeline(rec.records, "task-005", "t.")
    placed = [row for row in rows if row["type"] == "TaskPlaced"]
    assert len(placed) == 1 and placed[0]["cause"]["type"] == "TaskFinished"
    finished = {r.event_id: r.doc for r in rec.inputs}[placed[0]["cause"]["event_id"]]
    assert finished is not None and finished["payload"]["task_id"] != "task-005"
    assert [row["step"] for row in rows][:3] == ["submitted", "queued", "placed"]


def test_explain_refuses_a_one_pass_iterator() -> None:
    with pytest.raises(TypeError, match="reads the log twice"):
        timeline(iter(recorded(10).records), "task-001", "t.")


def test_what_if_reports_how_decisions_and_metrics_would_differ(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = export(tmp_path / "run.jsonl.gz", recorded(40))
    assert main(["replay", str(path), "--policy", "bestfit", "--json"]) == 0
    result = orjson.loads(capsys.readouterr().out)
    assert result["baseline_profile"] == "hetsched" and result["what_if_profile"] == "bestfit"
    assert set(result["baseline"]) >= {"placements", "unschedulable_decisions",
                                       "mean_queueing_delay_s", "mean_allocation_ratio"}
    assert 0 <= result["decisions_differ"] <= result["baseline"]["decisions"] + result[
        "what_if"]["decisions"]
    same = tmp_path / "same.yaml"
    same.write_text("name: hetsched\nweights: {hetsched: 1.0}\n")
    assert main(["replay", str(path), "--profile", str(same), "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["decisions_differ"] == 0


def test_a_repeated_event_names_where_it_was_first_and_counts_keep_every_info() -> None:
    from streams.audit.integrity import INFO_KEPT

    rec = recorded(60)
    first = rec.inputs[2]
    again = dataclasses.replace(first, offset=10_000)
    report = check(HEADER, [*rec.inputs, again, *rec.decisions])
    (dup,) = [f for f in report.findings if f.kind == "duplicate event"]
    assert dup.where == f"{again.topic}[{again.partition}]@10000"
    assert dup.detail == (f"{first.event_id} also at "
                          f"{first.topic}[{first.partition}]@{first.offset}")
    # Every input and decision offset here is one transaction's: a gap after each.
    gaps = report.counts["transactional gap"]
    assert gaps > INFO_KEPT
    assert sum(f.kind == "transactional gap" for f in report.findings) == INFO_KEPT


def test_an_offset_out_of_order_is_still_found_again_as_a_duplicate() -> None:
    rec = recorded(20)
    rs = rec.inputs
    doctored = [*rs[:3], rs[5], rs[4], rs[4], *rs[6:]]  # 4 after 5, then 4 again
    found = [(f.kind, f.where) for f in check(HEADER, doctored).findings
             if f.severity == "error"]
    where = f"{rs[4].topic}[{rs[4].partition}]@{rs[4].offset}"
    assert found == [("out of order", where), ("duplicate record", where)]


def test_a_retried_input_logged_again_later_leaves_the_decisions_in_order() -> None:
    """A client sends the same submission twice (a retry, docs/api.md) with other inputs
    between: the decisions answer its first copy and stay in order; a real swap of two
    decisions is still an error."""
    rec = recorded(20)
    causes = [r.head.causation_id for r in rec.decisions if r.head is not None]
    first = next(i for i, r in enumerate(rec.inputs)
                 if r.head is not None and r.head.event_id == causes[0])
    retry = dataclasses.replace(rec.inputs[first], offset=rec.inputs[-1].offset + 1)
    found = kinds([*rec.inputs, retry, *rec.decisions])
    assert found.get("duplicate event") == "warning"  # and a source time regression
    assert "out-of-order decision" not in found, found
    later = next(i for i, c in enumerate(causes) if c != causes[0])
    swapped = [rec.decisions[later], *rec.decisions[:later], *rec.decisions[later + 1:]]
    assert kinds(rec.inputs + swapped).get("out-of-order decision") == "error"
