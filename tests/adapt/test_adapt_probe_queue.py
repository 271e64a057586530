"""A probe placed from the queue (by a finish or a new node) is a probe, with its window."""

from __future__ import annotations

from adapt_builders import cell, finished, node, run, run_envs, task, tick

from schemas.events import TaskMigrating, TaskPlaced, TaskProbe


def test_a_queued_probe_placed_when_a_task_finishes_starts_its_window():
    c = cell(probe_s=60.0)
    envs = run_envs(c, node("n1", gpus=1, t=0), task("x", t=1, duration_s=600))
    placed = next(e for e in envs if isinstance(e.payload, TaskPlaced))
    out = run(c, task("p", t=2, profile=None, argv=("new.py",)))
    assert not any(isinstance(o, TaskPlaced | TaskProbe) for o in out)  # queued
    out = run(c, finished("x", "n1", placed.event_id, 100))
    assert [type(o).__name__ for o in out] == ["TaskProbe"]
    assert run(c, tick(1, 150)) == []  # 50 s into its 60 s window
    moved = run(c, tick(2, 161))
    assert [type(o).__name__ for o in moved] == ["TaskMigrating"]
    assert isinstance(moved[0], TaskMigrating) and moved[0].reason.code == "probe_classified"


def test_a_queued_probe_placed_on_a_new_node_is_a_probe():
    c = cell(probe_s=60.0)
    run(c, node("n1", gpus=1, t=0), task("x", t=1, duration_s=600))
    out = run(c, task("p", t=2, profile=None, argv=("new.py",)))
    assert not any(isinstance(o, TaskPlaced | TaskProbe) for o in out)  # queued
    out = run(c, node("n2", gpus=1, t=5))
    assert [type(o).__name__ for o in out] == ["TaskProbe"]
