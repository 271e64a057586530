"""Replaying cells in parallel processes gives the very report a single process gives.

Cells are independent logs, so ``replay(..., jobs=N)`` forks workers that each
replay whole cells; counts, hashes, the first mismatch (the earliest cause of
all inputs) and leftover decisions must come out as in the serial replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from audit_builders import NODES, export, tasks

from streams.audit.records import Record
from streams.audit.workload import Recording, record_run
from streams.cli import main
from streams.profiles.service import service_scheduler
from streams.replay import ReplayReport, replay

pytestmark = pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(),
    reason="parallel replay forks its workers")


def _cell(k: int, n: int = 40, rename: bool = True) -> Recording:
    """Cell ``k`` on partition ``k``; ``rename`` False reuses cell 0's names (same ids)."""
    tag = f"c{k}-" if rename else ""
    nodes = [(tag + name, *rest) for name, *rest in NODES]
    reqs = [dataclasses.replace(t, task=tag + t.task) for t in tasks(n)]
    return record_run(nodes, reqs, service_scheduler("hetsched"), cell=f"cell-{k}",
                      running_limit=8, tick_every=10, prefix="t.", partition=k)


def _split(recs: list[Recording]) -> tuple[list[Record], list[Record]]:
    inputs = [r for rec in recs for r in rec.inputs]
    decisions = [r for rec in recs for r in rec.decisions]
    return inputs, decisions


def _report(inputs: Iterable[Record], decisions: list[Record] | None,
            jobs: int) -> dict[str, Any]:
    report: ReplayReport = replay(inputs, decisions, service_scheduler("hetsched"), jobs=jobs)
    out = report.to_json()
    out.pop("elapsed_s")
    out["cells"] = report.cells
    return out


def _changed(inputs: list[Record], partition: int, nth: int) -> list[Record]:
    """The ``nth`` submission of a partition asks for more CPU than any node has."""
    seen = 0
    out = []
    for r in inputs:
        doc = orjson.loads(r.value or b"")
        if r.partition == partition and doc["type"] == "TaskSubmitted":
            if seen == nth:
                doc["payload"]["resources"]["cpu_milli"] = 10**9
                r = dataclasses.replace(r, value=orjson.dumps(doc, option=orjson.OPT_SORT_KEYS))
            seen += 1
        out.append(r)
    return out


def test_three_cells_on_two_processes_give_the_single_process_report() -> None:
    inputs, decisions = _split([_cell(0), _cell(1), _cell(2)])
    serial = _report(inputs, decisions, jobs=1)
    assert serial["ok"] and len(serial["cells"]) == 3 and serial["matches"] > 100
    assert _report(inputs, decisions, jobs=2) == serial
    assert _report(inputs, decisions, jobs=3) == serial
    assert _report(inputs, None, jobs=2) == _report(inputs, None, jobs=1)


def test_the_first_mismatch_is_the_earliest_cause_whichever_process_found_it() -> None:
    inputs, decisions = _split([_cell(0), _cell(1), _cell(2)])
    # cell 2 diverges early in its log, cell 1 later; partition 1 sorts first.
    changed = _changed(_changed(inputs, 2, 1), 1, 20)
    serial = _report(changed, decisions, jobs=1)
    assert not serial["ok"] and serial["mismatches"] >= 2
    assert serial["first_mismatch"]["cause_position"].startswith("t.hetsched.input-log[1]")
    assert _report(changed, decisions, jobs=3) == serial
    # a recorded decision whose cause is gone is reported after every replayed one
    dropped = [r for r in changed if r.event_id != decisions[-1].doc["causation_id"]]  # type: ignore[index]
    assert _report(dropped, decisions, jobs=2) == _report(dropped, decisions, jobs=1)


def test_one_event_id_in_two_cells_falls_back_to_the_serial_order() -> None:
    # Same node and task names in both cells: their events have the same ids.
    inputs, decisions = _split([_cell(0), _cell(1, rename=False)])
    serial = _report(inputs, decisions, jobs=1)
    assert _report(inputs, decisions, jobs=2) == serial


def test_an_undecodable_record_is_skipped_in_parallel_as_in_serial() -> None:
    inputs, decisions = _split([_cell(0), _cell(1)])
    broken = [dataclasses.replace(r, value=b"{not json") if i == 60 else r
              for i, r in enumerate(inputs)]
    serial = _report(broken, decisions, jobs=1)
    assert serial["skipped"] == 1 and not serial["ok"]
    assert _report(broken, decisions, jobs=2) == serial


class _Passes:
    """A re-iterable over ``records`` (like an audit file read again), counting the
    passes made in this process."""

    def __init__(self, records: list[Record]) -> None:
        self.records, self.passes = records, 0

    def __iter__(self) -> Iterator[Record]:
        self.passes += 1
        return iter(self.records)


def test_inputs_read_again_by_each_process_give_the_single_process_report() -> None:
    inputs, decisions = _split([_cell(0), _cell(1), _cell(2)])
    serial = _report(inputs, decisions, jobs=1)
    again = _Passes(inputs)
    assert _report(again, decisions, jobs=2) == serial
    assert again.passes == 1  # here only to split the cells: the processes read their own
    sizes: dict[str, int] = {}
    for r in inputs:
        sizes[r.cell or ""] = sizes.get(r.cell or "", 0) + 1
    given = _Passes(inputs)
    report = replay(given, decisions, service_scheduler("hetsched"), jobs=2, cell_sizes=sizes)
    assert given.passes == 0 and report.ok and report.matches == serial["matches"]
    changed = _changed(_changed(inputs, 2, 1), 1, 20)
    assert _report(_Passes(changed), decisions, jobs=3) == _report(changed, decisions, jobs=1)
    # An iterator can be read once: it is replayed in this process, to the same report.
    assert _report(iter(inputs), decisions, jobs=2) == serial


def test_the_replay_command_takes_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = Recording(prefix="t.")
    for k in range(2):
        part = _cell(k)
        rec.inputs += part.inputs
        rec.decisions += part.decisions
    path = export(tmp_path / "two-cells.jsonl.gz", rec)
    assert main(["replay", str(path), "--jobs", "2", "--json"]) == 0
    parallel = orjson.loads(capsys.readouterr().out)["replay"]
    assert main(["replay", str(path), "--json"]) == 0
    serial = orjson.loads(capsys.readouterr().out)["replay"]
    parallel.pop("elapsed_s")
    serial.pop("elapsed_s")
    assert parallel == serial and serial["ok"]
