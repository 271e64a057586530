"""A tick's task scans pass over finished tasks without visiting them (replay speed, issue 9)."""

from __future__ import annotations

from streams.core import cell as cell_module
from streams.core.adapt import engine
from streams.core.cell import Cell
from streams.core.events import NodeAdded, TaskArrived, TaskEnded
from streams.core.request import TaskRequest
from streams.profiles.service import service_scheduler


def test_the_engine_names_the_cells_statuses() -> None:
    assert (engine.RUNNING, engine.QUEUED, engine.DONE) == (
        cell_module.RUNNING, cell_module.QUEUED, cell_module.DONE)


def test_unfinished_tasks_keep_submission_order_and_leave_out_finished_ones() -> None:
    cell = Cell("c", service_scheduler("hetsched"))
    cell.add_node(NodeAdded("e0", "n0", 64000, 262144, 1, "A100"), None, 0.0)
    for k in range(4):  # one GPU: t0 runs, the others wait in the queue
        cell.submit(TaskArrived(f"a{k}", TaskRequest(f"t{k}", 1000, 1024, 1, 1000)),
                    {}, None, float(k))
    cell.end(TaskEnded("f0", "t0"), now_s=10.0)  # t1 starts on the freed GPU
    assert cell.tasks["t0"].status == cell_module.DONE
    assert cell.tasks["t1"].status == cell_module.RUNNING
    assert [r.task for r in engine._unfinished(cell)] == ["t1", "t2", "t3"]
