"""The dashboard's 2 s sampler reads the allocation off the cells, as the page shows it.

Why: the sampler used to build the whole page document (every node, GPU and
running task) to record two numbers; ``pages.allocation`` reads them off the
cells' arrays. The curve must not change: the share is the mean of the page's
``gpus_used_milli`` over every GPU, the queue the page's queue length.
"""

from __future__ import annotations

from service_builders import CLUSTER, TASK_MIX, node, task, with_cell

from streams.adapter import apply
from streams.core.cell import Cell
from streams.core.request import MILLI_PER_GPU
from streams.dashboard.pages import allocation
from streams.profiles.service import service_scheduler
from streams.web import cell_view

SCHED = service_scheduler("hetsched")


def _page_figures(cells: list[Cell]) -> tuple[float, int]:
    views = [cell_view(c) for c in cells]
    used = [u for v in views for n in v["nodes"] for u in n["gpus_used_milli"]]
    share = sum(used) / (MILLI_PER_GPU * len(used)) if used else 0.0
    return share, sum(len(v["queue"]) for v in views)


def test_the_sampled_allocation_is_the_pages() -> None:
    cells = [Cell("cell-0", SCHED), Cell("cell-1", SCHED)]
    assert allocation(cells) == _page_figures(cells) == (0.0, 0)
    for c, cell in enumerate(cells):
        for i, (n, m, g) in enumerate(CLUSTER):
            apply(cell, with_cell(node(f"{n}-{c}", m, g, t=i), cell.name))
        for rep in range(3 + c):  # more than fits: some stay queued
            for i, (t, g, s, mdl) in enumerate(TASK_MIX):
                apply(cell, with_cell(task(f"{t}-{c}-{rep}", g, s, mdl, t=10 + i), cell.name))
    share, queued = allocation(cells)
    assert (share, queued) == _page_figures(cells)
    assert 0.0 < share <= 1.0 and queued > 0
