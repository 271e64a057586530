"""bench/replay.py's placement-free bound on a small workload: the taped replay must
reproduce the recording, and a tape with wrong answers must be caught, so the bound in
BENCHMARKS.md measures the same replay with the scoring taken out and nothing else."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from streams.audit.records import Record
from streams.audit.workload import record_run
from streams.core.scheduler import PlaceResult
from streams.profiles.service import service_scheduler
from streams.replay import replay
from streams.sim.traces import read_nodes, read_tasks

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    return importlib.import_module("replay")


def _recording(bench: ModuleType) -> tuple[list[Record], list[Record]]:
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:20]]
    tasks = read_tasks("openb_pod_list_default.csv")[:150]
    run = record_run(nodes, tasks, service_scheduler("hetsched"), running_limit=20)
    return bench._through_file(run)


def test_the_taped_replay_reproduces_every_decision_without_scoring(bench: ModuleType) -> None:
    inputs, decisions = _recording(bench)
    report, _, cpu, placed = bench.placement_free(inputs, decisions, "hetsched", repeat=1)
    assert report.ok and report.replayed == len(decisions)
    placements = sum(1 for d in decisions if b'"TaskPlaced"' in (d.value or b""))
    assert placed >= placements > 0  # every placement asked the tape (and queued retries)
    assert cpu > 0


def test_a_tape_with_other_answers_makes_the_replay_diverge(bench: ModuleType) -> None:
    inputs, decisions = _recording(bench)
    tape = bench.PlaceTape()
    with bench.placing_by(tape.record):
        replay(inputs, decisions, service_scheduler("hetsched"))
    placed = [a for a in tape.answers if a.node >= 0]
    other = next(a for a in placed if a.node != placed[0].node)
    tape.answers[tape.answers.index(placed[0])] = PlaceResult(other.node, other.gpus,
                                                              other.reason, other.verdict)
    with bench.placing_by(tape.play):
        report = replay(inputs, decisions, service_scheduler("hetsched"))
    assert not report.ok
    assert report.first is not None
    assert "node_id" in {path.split(".")[-1] for path, _, _ in report.first.diffs}


def test_the_telemetry_log_replays_every_record_as_an_input(bench: ModuleType) -> None:
    nodes = [(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
             for n in read_nodes("openb_node_list_gpu_node.csv")[:5]]
    inputs, decisions = bench.telemetry_log(nodes, "hetsched", 30)
    report = replay(inputs, decisions, service_scheduler("hetsched"))
    assert report.ok and report.events == 35 and report.skipped == 0
    assert len({r.offset for r in inputs}) == 35  # one offset each, as on the topic
